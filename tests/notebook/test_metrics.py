"""job.metrics(): the table read from a job's log lines, and job.plot()'s figure."""

from __future__ import annotations

from pathlib import Path

import pytest

from sm_dist.contract.log_lines import resumed_line, step_line
from sm_dist.notebook.metrics import SM_DIST_SOURCE, TRAINER_SOURCE, read_metrics


def _run_with_a_resume() -> list[str]:
    """What LocalJob.logs() yields for a run killed after step 5 and resumed from step 4 (rank 0 on
    algo-1 prints the metric lines; torchrun's prefix on some of them)."""
    first = [f"[algo-1] {step_line(s, {'loss': 2.0 - s / 10, 'lr': 0.001})}" for s in range(1, 6)]
    again = [f"[algo-1] [rank0]: {step_line(s, {'loss': 1.5 - s / 100, 'lr': 0.0005})}" for s in range(5, 9)]
    return [*first, "[algo-1] [rank0]: Traceback (most recent call last):", f"[algo-1] {resumed_line(4, 0)}", *again,
            "[algo-2] [sm_dist worker] workers restarted on algo-2", "[algo-1] [sm_dist] final step=8 model_sha256=" + "a" * 64]


def test_sm_dist_lines_one_row_per_step_the_last_value_kept() -> None:
    metrics = read_metrics(_run_with_a_resume())
    assert metrics.columns == ("step", "loss", "lr") and metrics.sources == (SM_DIST_SOURCE,)
    assert metrics.column("step") == [1, 2, 3, 4, 5, 6, 7, 8]
    assert metrics.column("loss")[4] == pytest.approx(1.45)  # step 5 as the resumed run logged it
    assert metrics.resumed == (4,) and metrics.x == "step"
    assert metrics.to_dict()["lr"][-1] == 0.0005
    assert "8 logged steps" in repr(metrics) and "resumed from step 4" in repr(metrics)
    with pytest.raises(KeyError, match="columns: step, loss, lr"):
        metrics.column("accuracy")


def test_trainer_log_dicts_take_the_step_of_their_hosts_bar() -> None:
    """transformers 5 prints the quoted dict after the bar's carriage return, on the bar's line;
    an evaluation bar of another total does not move the step; the closing summary is no row."""
    lines = [
        "[algo-1]  40%|████      | 4/10 [00:00<00:00, 47.48it/s]\r{'loss': '2.5', 'grad_norm': '0.9', "
        "'learning_rate': '0.0002', 'epoch': '0.4'}",
        "[algo-1] Evaluating: 100%|██████████| 3/3 [00:00<00:00, 40.0it/s]",
        "[algo-1] {'eval_loss': 2.4, 'eval_samples_per_second': 120.5, 'epoch': 0.4}",
        "[algo-1]  80%|████████  | 8/10 [00:01<00:00, 47.48it/s]\r{'loss': 2.1, 'grad_norm': 0.8, "
        "'learning_rate': 0.0001, 'epoch': 0.8}",
        "[algo-1] {'train_runtime': 1.2, 'train_samples_per_second': 53.3, 'train_loss': 2.3, 'epoch': 1.0}",
        "[algo-2]  10%|█         | 1/10 [00:00<00:00, 47.48it/s]",  # another host's bar: not algo-1's step
    ]
    metrics = read_metrics(lines)
    assert metrics.sources == (TRAINER_SOURCE,)
    assert metrics.columns[:4] == ("step", "epoch", "loss", "lr")
    assert metrics.throughput == "eval_samples_per_second"
    assert metrics.column("step") == [4, 8] and metrics.column("lr") == [0.0002, 0.0001]
    assert metrics.column("eval_loss") == [2.4, None]


def test_a_trainer_without_a_bar_is_plotted_against_its_epoch() -> None:
    metrics = read_metrics(["{'loss': 1.0, 'learning_rate': 5e-05, 'epoch': 0.5}",
                            "{'loss': 0.8, 'learning_rate': 5e-05, 'epoch': 1.0}"])
    assert "step" not in metrics.columns and metrics.x == "epoch"


def test_nothing_logged_is_said_not_invented() -> None:
    metrics = read_metrics(["[algo-1] hello", "[algo-1] [sm_dist] resumed step=3 epoch=0"])
    assert len(metrics) == 0 and metrics.columns == () and metrics.x is None
    assert "no metrics in the logs" in metrics._repr_html_()
    with pytest.raises(ValueError, match="nothing to plot"):
        metrics.plot()


def test_the_html_table_is_escaped_and_short() -> None:
    lines = [f"[sm_dist] step={s} loss=1.0 a<b>=2" for s in range(1, 4)]  # not a metric line: names are checked
    assert len(read_metrics(lines)) == 0
    long = read_metrics([step_line(s, {"loss": 1.0}) for s in range(1, 101)])
    html = long._repr_html_()
    assert html.count("<tr") == 1 + 8 + 1 + 8 and "…" in html


def test_plot_draws_loss_and_lr_with_the_resume_marked(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    metrics = read_metrics(_run_with_a_resume())
    ax = metrics.plot(path=tmp_path / "loss.png")
    assert (tmp_path / "loss.png").stat().st_size > 1000
    panels = ax.figure.axes
    assert [p.get_ylabel() for p in panels] == ["loss", "learning rate"]
    curve = panels[0].lines[0]
    assert list(curve.get_xdata()) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert [line.get_xdata()[0] for line in panels[0].lines[1:]] == [4]  # the resume
    assert "resumed from 4" in [t.get_text() for t in panels[0].texts]
    one = metrics.plot("lr", path=tmp_path / "lr.png")
    assert [p.get_ylabel() for p in one.figure.axes] == ["learning rate"]
    constant = read_metrics([step_line(s, {"loss": 1.0 / s, "lr": 0.001}) for s in range(1, 4)])
    assert [p.get_ylabel() for p in constant.plot(path=tmp_path / "c.png").figure.axes] == ["loss"]
