"""The decision plot: hours vs dollars, one point per plan that fits, the Pareto front drawn.

A user trades time for money: a plan is worth a look only if no other plan is both faster and
cheaper (the Pareto front). The recommendation is marked and labelled, and the front's plans are
labelled where no label overlaps another (sm_dist.notebook.plot.place_labels); spot plans are a
second set of points (their expected hours include interruptions). matplotlib is imported only
when drawing, by sm_dist.notebook.plot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sm_dist.errors import SmDistError
from sm_dist.estimator.grid import Row
from sm_dist.estimator.record import EstimateRecord

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.transforms import Bbox

    from sm_dist.estimator.inputs import StrPath


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats on both axes (lower is better on each), sorted
    by the first axis. Ties: equal points are all kept."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1]))
    front: list[int] = []
    best = float("inf")
    for i in order:
        if points[i][1] < best or (front and points[i] == points[front[-1]]):
            front.append(i)
            best = min(best, points[i][1])
    return front


#: Labels drawn for the Pareto front (the recommendation's is always drawn).
MAX_LABELS = 8
#: Plans on one instance type and count whose hours and dollars differ by less than this share
#: sit on one spot of the plot: they get one label, their strategies joined.
SAME_SPOT = 0.02


def _label(row: Row) -> str:
    return f"{row.strategy.value} {row.instance_count}× {row.instance_type.removeprefix('ml.')}"


def _near(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return all(abs(x - y) <= SAME_SPOT * max(abs(x), abs(y)) for x, y in zip(a, b))


def front_labels(rows: Sequence[Row], points: Sequence[tuple[float, float]], front: Sequence[int],
                 chosen: Row | None) -> list[tuple[int, str]]:
    """(index, label) for the front's plans: one label per spot (plans of one instance type and
    count that nearly coincide share it, strategies joined), none where the recommendation sits."""
    groups: list[list[int]] = []
    for i in front:
        same = next((g for g in groups if rows[g[0]].instance_type == rows[i].instance_type
                     and rows[g[0]].instance_count == rows[i].instance_count and _near(points[g[0]], points[i])), None)
        if same is None:
            groups.append([i])
        else:
            same.append(i)
    out = []
    for group in groups:
        if any(rows[i] is chosen for i in group):
            continue
        first = rows[group[0]]
        strategies = "/".join(dict.fromkeys(rows[i].strategy.value for i in group))
        out.append((group[0], f"{strategies} {first.instance_count}× {first.instance_type.removeprefix('ml.')}"))
    return out[:MAX_LABELS]


def draw(est: EstimateRecord, path: StrPath | None = None, ax: Axes | None = None) -> Axes:
    """Draw `est` on `ax` (a new figure when None) and save it to `path` when given; returns ax.
    What `sm-dist estimate-cost --plot FILE` saves, and what a notebook shows inline."""
    from sm_dist.notebook.plot import new_axes, place_labels, save  # matplotlib: only when drawing

    rows = [r for r in est.rows if r.runnable and r.fits and r.cost is not None and r.hours is not None]
    if not rows:
        raise SmDistError("nothing to plot: no plan fits (see the estimate's warnings for what would)")
    if ax is None:
        ax = new_axes(1, figsize=(8, 5), path=path, feature="Estimate.plot()")[0]
    on_demand = [(r.hours or 0.0, r.cost.sagemaker) for r in rows if r.cost is not None]
    spot = [(r.cost.spot_hours, r.cost.spot) for r in rows if r.cost is not None]
    ax.scatter([h for h, _ in on_demand], [d for _, d in on_demand], s=18, color="tab:blue", alpha=0.5,
               label="on-demand plans")
    ax.scatter([h for h, _ in spot], [d for _, d in spot], s=18, color="tab:orange", alpha=0.4, marker="^",
               label="spot (expected)")
    front = pareto_front(on_demand)
    ax.plot([on_demand[i][0] for i in front], [on_demand[i][1] for i in front], color="tab:blue", lw=1.5,
            label="Pareto front (on-demand)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("hours")
    ax.set_ylabel("dollars")
    ax.set_title(f"{est.model['name']}: time vs money of the plans that fit")
    taken: list[Bbox] = []  # label boxes placed so far: the recommendation's first
    chosen = est.recommendation.row if est.recommendation is not None else None
    if chosen is not None and chosen.cost is not None and chosen.hours is not None:
        point = (chosen.cost.spot_hours, chosen.cost.spot) if est.spot else (chosen.hours, chosen.cost.sagemaker)
        ax.scatter(*point, s=140, facecolors="none", edgecolors="red", linewidths=2, label="recommended")
        place_labels(ax, [point], [f"recommended: {_label(chosen)}" + (" (spot)" if est.spot else "")], taken=taken,
                     markers=[*on_demand, *spot], fontsize="x-small", color="red", fontweight="bold")
    labelled = front_labels(rows, on_demand, front, None if est.spot else chosen)
    place_labels(ax, [on_demand[i] for i, _ in labelled], [label for _, label in labelled], taken=taken,
                 markers=[*on_demand, *spot], fontsize="x-small")
    ax.legend(fontsize="small", loc="best")
    if path is not None:
        save(ax, path)
    return ax


__all__ = ["MAX_LABELS", "draw", "front_labels", "pareto_front"]
