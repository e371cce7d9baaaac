"""The hint on a checkpoint rotation that met SageMaker's upload markers, from a captured traceback."""

from __future__ import annotations

from pathlib import Path

from sm_dist.container.failure_watch import FailureWatch
from sm_dist.contract.worker_errors import MARKERS_HINT, WorkerError, errors_in

#: Accelerate's save_state with ProjectConfiguration(total_limit=2), as torchrun printed it on a local host.
ROTATION = """\
[rank0]: Traceback (most recent call last):
[rank0]:   File "/tmp/job/algo-1/opt/ml/input/data/code/train.py", line 41, in <module>
[rank0]:     accelerator.save_state()
[rank0]:   File "/usr/lib/python3.11/site-packages/accelerate/accelerator.py", line 3682, in save_state
[rank0]:     shutil.rmtree(folder)
[rank0]:   File "/usr/lib/python3.11/shutil.py", line 763, in rmtree
[rank0]:     onerror(os.rmdir, path, sys.exc_info())
[rank0]:   File "/usr/lib/python3.11/shutil.py", line 761, in rmtree
[rank0]:     os.rmdir(path, dir_fd=dir_fd)
[rank0]: OSError: [Errno 39] Directory not empty: '{path}'
"""


def _error(path: str, checkpoint_dir: str | None = None) -> WorkerError:
    [error] = errors_in("algo-1", ROTATION.format(path=path).splitlines(), checkpoint_dir)
    return error


def test_a_rotation_in_the_checkpoint_folder_names_the_markers_and_the_fix() -> None:
    error = _error("/tmp/job/algo-1/opt/ml/checkpoints/checkpoints/checkpoint_0")
    assert error.text.startswith("OSError: [Errno 39] Directory not empty")
    assert error.at == "train.py:41 in <module>" and error.hint == MARKERS_HINT
    assert ".sagemaker-uploaded" in error.line() and "total_limit" in error.line()
    assert "\n" not in error.line() and error.to_dict()["hint"] == MARKERS_HINT


def test_a_custom_checkpoint_folder_and_other_folders() -> None:
    assert _error("/data/ckpt/checkpoint_3", checkpoint_dir="/data/ckpt/").hint == MARKERS_HINT
    assert _error("/data/ckpt2/checkpoint_3", checkpoint_dir="/data/ckpt").hint is None  # a sibling, not under it
    assert _error("/tmp/scratch/run").hint is None  # not the synced folder: nothing of SageMaker's there


def test_pid1_watch_reads_it_with_its_own_checkpoint_folder(tmp_path: Path) -> None:
    watch = FailureWatch("algo-1", checkpoint_dir=tmp_path)
    for line in ROTATION.format(path=f"{tmp_path}/checkpoint_0").splitlines():
        watch.feed(line)
    error = watch.error()
    assert error is not None and error.hint == MARKERS_HINT
