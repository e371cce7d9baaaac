"""Real processes, real kills: crash, SIGTERM and resharding scenarios of train_script.py.

The baseline is an uninterrupted 2-rank DDP run (tests/checkpoint/conftest.py); "bit-identical"
means equal per-step losses and an equal sha256 of the final model + optimizer state.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import random
import signal
from pathlib import Path

import pytest
import torch
from _harness import wait_until

from sm_dist.contract.checkpoint import MANIFEST_NAME, step_dirname
from sm_dist.runtime.checkpoint import Checkpointer

pytestmark = pytest.mark.slow
INTERVAL = 4  # train_script.py's default --interval
EXIT_INTERRUPTED = 143  # sm_dist.jobspec.EXIT_INTERRUPTED, spelled out so a change is noticed
STEP_WAIT_S = 300.0  # hang guard for a run to reach a step (start-up on 2 loaded cores), not a speed check


def _script_module() -> object:
    path = Path(__file__).with_name("train_script.py")
    spec = importlib.util.spec_from_file_location("ckpt_train_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_kill9_of_one_rank_under_torchrun_resumes_bit_identically(kit, baseline, tmp_path):
    kill_at = random.randint(5, 19)
    logging.getLogger(__name__).info("killing rank 1 after step %d", kill_at)
    out = tmp_path / "events.jsonl"
    run = kit.torchrun(2, ["--uri", str(tmp_path / "ckpt"), "--out", str(out), "--kill-at", str(kill_at)],
                       max_restarts=2)
    assert run.wait() == [0], run.output[-4000:]
    events = kit.events(out)
    first, *restarts = kit.resumes(events)
    assert first == 0 and restarts, f"no restart after the kill at step {kill_at}: {events}"
    resumed_at = restarts[-1]
    assert kill_at - INTERVAL <= resumed_at <= kill_at, (kill_at, resumed_at)  # lost steps <= interval
    assert kit.losses(events) == kit.losses(baseline)
    assert kit.final_sha(events) == kit.final_sha(baseline)


def _wait_for_step(kit, out: Path, step: int, run) -> None:
    """Until rank 0 logged `step`; fails at once if a rank ends first, and after a hang guard."""
    wait_until(lambda: out.exists() and max(kit.losses(kit.events(out)), default=0) >= step, run,
               timeout=STEP_WAIT_S, interval=0.2, what=f"step {step} in {out.name}")


def test_sigterm_commits_exits_interrupted_and_resumes_bit_identically(kit, baseline, tmp_path):
    ckpt, out, marker = tmp_path / "ckpt", tmp_path / "events.jsonl", tmp_path / "interrupted"
    args = ["--uri", str(ckpt), "--out", str(out), "--async-checkpoint"]
    run = kit.spawn(2, [*args, "--sleep", "0.2"], env={"SM_DIST_INTERRUPT_MARKER": str(marker)})
    _wait_for_step(kit, out, 6, run)
    run.procs[1].send_signal(signal.SIGTERM)  # one rank only: the per-step vote stops both
    assert run.wait() == [EXIT_INTERRUPTED, EXIT_INTERRUPTED], run.output[-4000:]
    stopped = int(marker.read_text())
    assert 6 <= stopped < 24
    assert (ckpt / step_dirname(stopped) / MANIFEST_NAME).is_file()
    assert max(kit.losses(kit.events(out))) == stopped  # no step after the agreed stop

    again = kit.spawn(2, args)
    assert again.wait() == [0, 0], again.output[-4000:]
    events = kit.events(out)
    assert kit.resumes(events)[-1] == stopped
    assert kit.losses(events) == kit.losses(baseline)
    assert kit.final_sha(events) == kit.final_sha(baseline)


def test_sigterm_to_torchrun_reaches_the_workers_and_commits(kit, tmp_path):
    """The resume from such a checkpoint and its model are the test above's (the same checkpoint code)."""
    ckpt, out, marker = tmp_path / "ckpt", tmp_path / "events.jsonl", tmp_path / "interrupted"
    run = kit.torchrun(2, ["--uri", str(ckpt), "--out", str(out), "--sleep", "0.2"], max_restarts=0,
                       env={"SM_DIST_INTERRUPT_MARKER": str(marker)})
    _wait_for_step(kit, out, 6, run)
    run.procs[0].send_signal(signal.SIGTERM)  # what sm_dist's PID 1 forwards to torchrun
    run.wait()  # torchrun reports the signal with its own code; the marker says "committed"
    stopped = int(marker.read_text())
    assert (ckpt / step_dirname(stopped) / MANIFEST_NAME).is_file()
    assert max(kit.losses(kit.events(out))) == stopped


@pytest.mark.parametrize("fault", ["crash-in-save", "crash-in-commit"])
def test_crash_while_saving_resumes_from_previous_commit(kit, tmp_path, fault, caplog):
    ckpt = tmp_path / "ckpt"
    nprocs, victim = (2, 1) if fault == "crash-in-save" else (1, 0)  # the hook's victims
    run = kit.spawn(nprocs, ["--uri", str(ckpt), "--out", str(tmp_path / "ev.jsonl"), "--steps", "12"],
                    env={"SM_DIST_FAULT": f"{fault}:8"})
    assert run.procs[victim].wait(timeout=300) == -signal.SIGKILL, run.wait() and run.output
    run.kill()  # what torchrun does to the survivors
    torn = ckpt / step_dirname(8)
    assert not (torn / MANIFEST_NAME).exists()
    if fault == "crash-in-save":
        assert (torn / "rng" / "rank-00001.pt").is_file()  # the victim's data was written
    else:
        partial = (torn / (MANIFEST_NAME + ".tmp")).read_bytes()
        assert partial and not partial.rstrip().endswith(b"}")  # half a manifest

    script = _script_module()
    model = script.build_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    with caplog.at_level(logging.WARNING), Checkpointer(uri=str(ckpt), mode="local") as ckpt_reader:
        state = ckpt_reader.resume(model=model, optimizer=optimizer)
    assert state is not None and state.step == 4
    assert f"{step_dirname(8)}: no manifest" in caplog.text


def test_fsdp_checkpoint_saved_at_world_size_4_loads_at_2(kit, tmp_path):
    ckpt = tmp_path / "ckpt"
    args = ["--strategy", "fsdp", "--uri", str(ckpt), "--steps", "3", "--interval", "3"]
    run = kit.spawn(4, [*args, "--out", str(tmp_path / "ws4.jsonl"), "--async-checkpoint"])  # DCP in the background
    assert run.wait() == [0] * 4, run.output[-4000:]
    manifest = json.loads((ckpt / step_dirname(3) / MANIFEST_NAME).read_text())
    assert manifest["sharded"] and manifest["world_size"] == 4
    assert {f"model/__{r}_0.distcp" for r in range(4)} <= set(manifest["files"])

    run2 = kit.spawn(2, [*args, "--out", str(tmp_path / "ws2.jsonl")])
    assert run2.wait() == [0, 0], run2.output[-4000:]
    ws4, ws2 = kit.events(tmp_path / "ws4.jsonl"), kit.events(tmp_path / "ws2.jsonl")
    assert kit.resumes(ws2) == [3]
    assert kit.final_sha(ws2) == kit.final_sha(ws4)
