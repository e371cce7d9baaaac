"""sm_dist's metric lines as TensorBoard scalars (sm_dist.runtime.tensorboard), read back with TensorBoard's own reader."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sm_dist.runtime import tensorboard
from sm_dist.runtime.metrics import log_metrics


@pytest.fixture(autouse=True)
def _fresh_writer() -> Iterator[None]:
    tensorboard.close()
    yield
    tensorboard.close()


def scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_each_metric_line_is_a_scalar_readable_before_the_writer_closes(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SM_TENSORBOARD_DIR", str(tmp_path))
    log_metrics(1, {"loss": 2.5, "lr": 0.1, "epoch": 0, "done": True}, stream=io.StringIO())
    log_metrics(2, {"loss": 1.25}, stream=io.StringIO())
    # flushed at once: TensorBoard (and SageMaker's sync) sees the steps while the job still runs
    found = scalars(tmp_path / tensorboard.RUN_NAME)
    assert found == {"loss": [(1, 2.5), (2, 1.25)], "lr": [(1, pytest.approx(0.1))], "epoch": [(1, 0.0)]}


def test_nothing_is_written_without_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SM_TENSORBOARD_DIR", raising=False)
    assert tensorboard.write_scalars(1, {"loss": 1.0}) == 0
    assert list(tmp_path.iterdir()) == []


def test_without_the_tensorboard_package_one_line_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SM_TENSORBOARD_DIR", str(tmp_path))
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails as without the package
    assert tensorboard.write_scalars(1, {"loss": 1.0}) == 0
    assert tensorboard.write_scalars(2, {"loss": 0.5}) == 0
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"[sm_dist] tensorboard: scalars not written to {tmp_path}")
    assert "pip install tensorboard" in lines[0]


@pytest.mark.slow  # no process, but importing transformers takes 3-5 s: the full run's, not the fast set's
def test_hugging_face_trainer_reads_the_variable_the_job_sets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PID 1 sets TENSORBOARD_LOGGING_DIR beside SM_TENSORBOARD_DIR: transformers' TensorBoardCallback writes there,
    and Trainer reports to nothing unless told (report_to="tensorboard"), as docs/PLATFORM.md §1.14 says."""
    pytest.importorskip("transformers")
    from transformers import TrainingArguments
    from transformers.integrations import TensorBoardCallback

    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(tmp_path))
    assert TensorBoardCallback().logging_dir == str(tmp_path)
    assert TrainingArguments(output_dir=str(tmp_path / "out")).report_to == []
    assert TrainingArguments(output_dir=str(tmp_path / "out"), report_to="tensorboard").report_to == ["tensorboard"]
