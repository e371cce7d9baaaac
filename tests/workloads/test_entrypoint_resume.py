"""A lost instance through the entrypoints under torchrun: kill -9 of every process mid-run, then the
same command again; the final model equals an uninterrupted run's, bit for bit (dropout, a cosine
schedule and epochs crossed on the way).

A stop or spot interruption (SIGTERM to torchrun, forwarded to the workers, a final checkpoint, the
same model after the resume) is tests/checkpoint/test_runs.py's at the checkpointer and, through
cnn.py's shared loop, tests/local/test_cnn_local.py's spot test and tests/container/test_bundle_runs.py's stop.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from .conftest import (
    ENTRYPOINTS,
    HANG_GUARD_S,
    Run,
    parse_run,
    torchrun_argv,
    worker_env,
)

pytestmark = pytest.mark.slow

#: Steps of every run; 512 samples / (2 ranks x 16) = 16 steps per epoch, so runs cross epochs.
STEPS = 40
#: The interruption is sent when rank 0 prints this step (well before STEPS).
INTERRUPT_AT = 10
ARGS = ("--steps", str(STEPS), "--batch-size", "16", "--dataset-size", "512", "--dropout", "0.2",
        "--save-every", "4", "--seed", "3", "--lr-schedule", "cosine", "--warmup-steps", "5")


def _killed(port: int, ckpt: Path, model_dir: Path) -> Run:
    """Start cnn.py, kill -9 every process when step INTERRUPT_AT is printed, wait, return the run."""
    argv = torchrun_argv(port, 2, ENTRYPOINTS / "cnn.py", *ARGS, "--checkpoint-dir", str(ckpt),
                         "--model-dir", str(model_dir))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=worker_env(),
                            start_new_session=True)
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if line.startswith(f"[sm_dist] step={INTERRUPT_AT} "):
            # torchrun starts each worker in a session of its own: a lost instance is every process
            for pid in [*_descendants(proc.pid), proc.pid]:
                os.kill(pid, signal.SIGKILL)
            break
    lines += proc.stdout.readlines()
    proc.wait(timeout=HANG_GUARD_S)
    return parse_run(proc.returncode, "".join(lines))


def _descendants(pid: int) -> list[int]:
    """Every process below `pid`, from /proc (Linux)."""
    parent_of = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue  # exited meanwhile
        parent_of[int(stat.parent.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        children = [child for child, parent in parent_of.items() if parent in frontier]
        found += children
        frontier = children
    return found


def _committed_steps(ckpt: Path) -> list[int]:
    return sorted(int(p.parent.name.split("-")[1]) for p in ckpt.glob("step-*/manifest.json"))


@pytest.fixture(scope="module")
def reference_sha(tmp_path_factory, port_factory_module) -> str:
    folder = tmp_path_factory.mktemp("reference")
    argv = torchrun_argv(port_factory_module(), 2, ENTRYPOINTS / "cnn.py", *ARGS, "--no-checkpoint",
                         "--model-dir", str(folder / "m"))
    proc = subprocess.run(argv, capture_output=True, text=True, env=worker_env(), timeout=HANG_GUARD_S, check=False)
    run = parse_run(proc.returncode, proc.stdout + proc.stderr)
    assert run.returncode == 0 and run.step == STEPS, run.out[-3000:]
    return run.sha


def test_a_lost_instance_then_resume_gives_the_uninterrupted_model(torchrun, tmp_path: Path, reference_sha: str,
                                                                  port_factory) -> None:
    ckpt, model_dir = tmp_path / "ck", tmp_path / "m"
    first = _killed(port_factory(), ckpt, model_dir)
    assert first.returncode != 0 and first.sha is None, first.out[-3000:]
    committed = _committed_steps(ckpt)
    assert committed and max(committed) < STEPS
    second = torchrun("cnn.py", *ARGS, "--checkpoint-dir", str(ckpt), "--model-dir", str(model_dir))
    assert second.returncode == 0, second.out[-3000:]
    assert f"[sm_dist] resumed step={max(committed)} " in second.out
    assert (second.step, second.sha) == (STEPS, reference_sha)
