"""est.plot(): what `estimate-cost --plot` saves — hours vs dollars, the Pareto front, the
recommendation — with labels that never overlap."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

import sm_dist
from sm_dist.estimator.plot import front_labels, pareto_front


def _text_boxes(ax):  # the labels' text alone, without their leader lines
    from matplotlib.text import Text

    return [Text.get_window_extent(t) for t in ax.texts]


@pytest.mark.parametrize("counts", [[4, 8, 16], [1, 2, 4, 8, 16]])
def test_labels_are_readable_at_many_plans(tmp_path: Path, counts: list[int]) -> None:
    pytest.importorskip("matplotlib")
    est = sm_dist.estimate(model="llama2-7b", tokens=2e12, instance_counts=counts,
                           instance_types=["ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.g5.48xlarge"])
    ax = est.plot(tmp_path / "plans.png")
    labels = [t.get_text() for t in ax.texts]
    assert len(ax.collections[0].get_offsets()) >= 4 * len(counts)  # on-demand plans that fit
    assert len(labels) >= len(counts) and labels[0].startswith("recommended: ")
    boxes = _text_boxes(ax)
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b), (labels, a, b)
    area = ax.get_window_extent()
    assert all(area.x0 <= b.x0 and b.x1 <= area.x1 and area.y0 <= b.y0 and b.y1 <= area.y1 for b in boxes)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("hours", "dollars")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "on-demand plans", "spot (expected)", "Pareto front (on-demand)", "recommended"]


def test_plans_on_one_spot_share_a_label() -> None:
    est = sm_dist.estimate(model="llama2-7b", tokens=2e12, instance_types=["ml.p5.48xlarge"], instance_counts=[4, 8, 16])
    rows = [r for r in est.rows if r.runnable and r.fits and r.cost is not None and r.hours is not None]
    points = [(r.hours or 0.0, r.cost.sagemaker) for r in rows if r.cost is not None]
    front = pareto_front(points)
    chosen = est.recommendation.row if est.recommendation else None
    labels = front_labels(rows, points, front, chosen)
    assert labels and all("/" in text or " " in text for _, text in labels)
    assert len({rows[i].instance_count for i, _ in labels}) == len(labels)  # one label per count here
    assert all(rows[i] is not chosen for i, _ in labels)  # the recommendation has its own label


def test_a_file_only_plot_leaves_pyplot_alone(tmp_path: Path) -> None:
    """Saving from a script: a bare Figure, no pyplot figure left open, no backend switched."""
    plt = pytest.importorskip("matplotlib.pyplot")
    before = plt.get_fignums()
    est = sm_dist.estimate(model="gpt2", tokens=1e9, instance_types=["ml.g5.xlarge"], instance_counts=[1, 2])
    est.plot(tmp_path / "gpt2.svg")
    assert (tmp_path / "gpt2.svg").read_text().startswith("<?xml") and plt.get_fignums() == before
