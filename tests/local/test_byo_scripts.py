"""Scripts nobody on the project wrote, under `sm-dist fit SCRIPT --source-dir DIR --local --instance-count 2`:
pytorch/examples-style DDP, Hugging Face Trainer, Lightning, Accelerate, FSDP2 with DCP, and small ones.

The scripts in tests/local/byo/ are written as their communities write them: no sm_dist import,
no sm_dist log line. Kept tiny (a few epochs of a 2-layer net) for 2 shared cores.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
BYO = Path(__file__).with_name("byo")


def fit(tmp_path: Path, script: str, *flags: str, text: str | None = None) -> tuple[int, dict, str]:
    """Run `sm-dist fit --local --json` on tests/local/byo/SCRIPT (or `text`); (exit code, summary, stderr)."""
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    if text is None:
        shutil.copy(BYO / script, src / script)
    else:
        (src / script).write_text(text)
    argv = [sys.executable, "-m", "sm_dist.cli", "fit", script, "--source-dir", str(src), "--local",
            "--instance-count", "2", "--instance-type", "ml.g5.xlarge", "--grace-seconds", "30",
            "--local-root", str(tmp_path / "root"), "--json", *flags]
    out = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, check=False)
    try:
        summary = json.loads(out.stdout)
    except ValueError:
        pytest.fail(f"no JSON summary (exit {out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
    return out.returncode, summary, out.stderr


def left_running(root: Path) -> list[int]:
    """Processes still carrying an emulated host's /opt/ml of this job in their environment."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            env = (entry / "environ").read_bytes() if entry.name.isdigit() else b""
        except OSError:
            continue
        if f"SM_DIST_OPT_ML={root}".encode() in env:
            found.append(int(entry.name))
    return found


def removed_line_of(rel: str, removed: list[str]) -> str:
    """`removed`'s one warning when it says /opt/ml/checkpoints/REL was cut short by a fault and removed
    on every host before the script resumed, else a line that matches no warning."""
    pattern = (re.escape(f"/opt/ml/checkpoints/{rel}") + r" was not written to its end \(.+\): a fault hit the save; "
               r"removed on (algo-1, algo-2|algo-2, algo-1) before the script resumed, from the newest whole checkpoint")
    return removed[0] if len(removed) == 1 and re.fullmatch(pattern, removed[0]) else f"(no warning: {rel} removed)"


def host_log(tmp_path: Path, host: str) -> str:
    return (tmp_path / "root" / "run" / "logs" / f"{host}.log").read_text(errors="replace")


def test_ddp_snapshot_script_resumes_after_a_kill_and_a_spot_interruption(tmp_path: Path) -> None:
    """kill:3 then sigterm:6 (its tqdm bar over the epochs: snapshots were saved, whatever the machine's
    load). The kill: torchrun restarts the workers in the running job; the script saves snapshot.pt on
    rank 0 only, into the hard-coded /opt/ml/checkpoints (each host's own, through its private mount
    namespace), so before the restart algo-2 gets algo-1's snapshot from the URI and both hosts resume
    from the same epoch. The spot interruption: the job restarts on fresh hosts with the checkpoint
    folder restored and the script resumes from its own snapshot again. --verify compares the
    model.pt of this run and of an uninterrupted one."""
    code, s, err = fit(tmp_path, "ddp_snapshot.py", "--chaos", "kill:3", "--chaos", "sigterm:6", "--verify",
                       "--", "--total-epochs", "9", "--epoch-sleep", "0.3")
    assert code == 0, (s, err[-4000:])
    assert sorted(s["chaos_fired"]) == ["kill:3", "sigterm:6"] and s["in_job_restarts"] >= 1, s
    assert s["job_restarts"] == 1 and s["verify_result"] == "identical" and "algo-1" in s["verify_detail"], s
    assert s["restart_causes"][-1].startswith("whole-job restart 1: spot interruption (chaos sigterm:6): every host "
                                              "stopped (SIGTERM, 30 s of grace, SIGKILL)"), s
    assert s["steps"] == 9 and s["model_sha256"] is None  # the bar's epochs; no sm_dist hash: unknown, not 0
    # every worker was seen in the process group; and no fault can cut a save short: the script writes
    # snapshot.pt.tmp and os.replace()s it, so snapshot.pt is whole whenever a kill or the SIGTERM lands
    assert s["warnings"] == []
    # each restore named snapshot.pt, its step from its EPOCHS_RUN: the epoch the script itself resumed from
    assert set(s["resumed_checkpoints"]) == {"/opt/ml/checkpoints/snapshot.pt"} and len(s["resumed_from"]) >= 2, s
    assert s["resumed_from"][0] >= 3 and s["resumed_from"][-1] >= 6, s
    for host in ("algo-1", "algo-2"):
        log = host_log(tmp_path, host)
        for epoch in s["resumed_from"]:
            assert f"Resuming training from snapshot at Epoch {epoch}\n" in log, (host, epoch, log[-3000:])
    assert "checkpoint folder restored" in host_log(tmp_path, "algo-2")
    # the machine's own /opt/ml was never written: the snapshots are in the hosts' folders
    assert (tmp_path / "root" / "run" / "hosts" / "algo-1" / "checkpoints" / "snapshot.pt").is_file()
    assert left_running(tmp_path / "root" / "run") == []


def test_hugging_face_trainer_resumes_from_its_last_whole_checkpoint_after_a_kill_inside_a_save(tmp_path: Path) -> None:
    """An unmodified HF Trainer script (output_dir="/opt/ml/checkpoints", get_last_checkpoint), every
    worker killed as Trainer writes checkpoint-40 (kill-in-save:2, its second save): the sync uploads
    the half-written folder, as SageMaker's does, and the restore on each host removes it and says why
    (no trainer_state.json, which Trainer writes last), so every host resumes from checkpoint-20 with
    the model and optimizer files rank 0 wrote on algo-1 (was: `Can't find a valid checkpoint at
    /opt/ml/checkpoints/checkpoint-40`, the job failed); --verify compares model.safetensors."""
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    code, s, err = fit(tmp_path, "hf_trainer.py", "--chaos", "kill-in-save:2", "--verify",
                       "--", "--max_steps", "45", "--save_steps", "20")
    assert code == 0, (s, err[-4000:])
    assert s["chaos_fired"] == ["kill-in-save:2"] and s["in_job_restarts"] == 1, s
    assert re.fullmatch(r"kill-in-save:2: SIGKILL to every worker \(ranks 0, 1\) as save 2 began: "
                        r"checkpoint-40/\S+ on algo-[12]", s["chaos_events"][0]), s
    assert len(s["restart_causes"]) == 1, s  # one kill of every host: one restart
    assert s["verify_result"] == "identical", s
    assert s["steps"] == 45  # Trainer's bar read
    # the one warning: the checkpoint removed on both hosts (both workers were in one process group)
    [removed] = s["warnings"]
    assert re.fullmatch(r"/opt/ml/checkpoints/checkpoint-40 was not written to its end \(no trainer_state\.json "
                        r"\(Hugging Face Trainer writes it last\)\): a fault hit the save; removed on "
                        r"(algo-1, algo-2|algo-2, algo-1) before the script resumed, from the newest whole checkpoint",
                        removed), removed
    # the restore named checkpoint-20 (its step from its name) on both hosts: where each resumed
    assert s["resumed_from"] == [20] and s["resumed_checkpoints"] == ["/opt/ml/checkpoints/checkpoint-20"], s
    for host in ("algo-1", "algo-2"):
        log = host_log(tmp_path, host)
        assert (f"[sm_dist worker] {host}: /opt/ml/checkpoints/checkpoint-40 was not written to its end (no "
                "trainer_state.json (Hugging Face Trainer writes it last)): a fault hit the save; removed") in log, host
        assert "resuming from /opt/ml/checkpoints/checkpoint-20\n" in log, host
    assert left_running(tmp_path / "root" / "run") == []


def test_a_timed_kill_fires_without_step_lines_and_one_that_never_fired_fails_the_run(tmp_path: Path) -> None:
    """kill:3s on a script that prints no step: torchrun restarts the killed host's workers; kill:900s
    comes after the end: the job completed, but the run proves nothing about that fault and fails."""
    code, s, _ = fit(tmp_path, "trains_alone.py", "--hp", "steps=60", "--chaos", "kill:3s", "--chaos", "kill:900s")
    assert s["chaos_fired"] == ["kill:3s"] and "SIGKILL to rank" in s["chaos_events"][0], s
    assert s["in_job_restarts"] >= 1 and s["steps"] is None
    assert code == 1 and s["status"] == "Completed" and s["chaos_missed"] == ["kill:900s"], s
    # it never initialised a process group: the summary says so
    assert any("trained alone" in w for w in s["warnings"]), s["warnings"]


@pytest.mark.parametrize(("script", "flags", "text", "at", "runs"), [
    # an exception at step 3 before any checkpoint: a restart would replay the same steps, so none
    ("raises_at_step.py", (), "ValueError: loss went NaN at step 3", "raises_at_step.py:19 in main", 1),
    # no restart can fix a missing module (nor a bad flag: argparse's usage error, read from torchrun's real
    # lines in tests/container/test_failure_watch.py): torchrun is stopped at the first failure
    ("needs_torchvision.py", (), "ModuleNotFoundError: No module named 'torchvision_not_installed_here'",
     "needs_torchvision.py:4 in <module>", 1),
])
def test_the_real_error_once(tmp_path: Path, script: str, flags: tuple[str, ...], text: str, at: str | None,
                             runs: int) -> None:
    """The error, where it happened in the script and where the logs are, in the summary and in
    output/failure; the script runs `runs` times on the failing host (a worker torchrun starts again
    after PID 1 gave up exits before the script: sm_dist.container.worker)."""
    code, s, _ = fit(tmp_path, script, *flags)
    assert code != 0 and s["status"] == "Failed"
    host = s["error_detail"]["host"]  # every rank fails on a bad flag or import, only rank 1 (algo-2) raises
    assert s["error"].startswith(text + (f"  at {at}" if at else "") + "  ("), s["error"]
    if script == "raises_at_step.py" and not flags:
        assert s["error"].endswith("  (algo-2, rank 1)") and s["host_outcomes"]["algo-1"] == "stopped after algo-2 failed"
    assert s["logs"] == str(tmp_path / "root" / "run" / "logs")
    own_lines = re.compile(r"^(\[rank\d+\]:\s?)?" + re.escape(text) + "$", re.MULTILINE)
    assert len(own_lines.findall(host_log(tmp_path, host))) == runs, host_log(tmp_path, host)[-3000:]
    # what the SageMaker console would show (output/failure of the failing host) starts with the cause too,
    # and a local job's names its log file, not CloudWatch
    failing = s["failures"][host]
    assert failing.startswith(text) and "\nnot restarted: " in failing, failing
    assert f"logs: {tmp_path / 'root' / 'run' / 'logs' / host}.log" in failing and "CloudWatch" not in failing
    assert s["host_outcomes"][host].startswith(f"exit 1: {text}"), s["host_outcomes"]
    assert "SignalException" not in "".join(s["failures"].values())
    assert left_running(tmp_path / "root" / "run") == []
    assert os.path.isdir(s["logs"])


def test_the_scripts_own_arguments_arrive_verbatim(tmp_path: Path) -> None:
    """`sm-dist fit script.py [options] -- 3 1 --batch_size 8`: positionals and a store_true flag
    (`--hp dummy=` gives a bare --dummy), exactly as the script's argparse expects them."""
    code, summary, err = fit(tmp_path, "positional_args.py", "--hp", "dummy=", "--", "3", "1", "--batch_size", "8")
    assert code == 0, err[-3000:]
    got = json.loads(next((tmp_path / "root").rglob("model/args.json")).read_text())
    assert got == {"total_epochs": 3, "save_every": 1, "batch_size": 8, "dummy": True, "sum_over_ranks": 6}


def test_a_requirement_this_environment_lacks_stops_the_run_before_anything_starts(tmp_path: Path) -> None:
    """requirements.txt is pip-installed in the cloud; locally the hosts run in this environment,
    so what it lacks is one line and exit 2, with no host folder created."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(BYO / "needs_torchvision.py", src / "needs_torchvision.py")
    (src / "requirements.txt").write_text("torchvision_not_installed_here>=0.20\ntorch>=2.10\n")
    out = subprocess.run([sys.executable, "-m", "sm_dist.cli", "fit", "needs_torchvision.py", "--source-dir", str(src),
                          "--local", "--instance-count", "2", "--local-root", str(tmp_path / "root")],
                         capture_output=True, text=True, cwd=tmp_path, check=False)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "sm-dist fit: error: requirements.txt='torchvision_not_installed_here>=0.20 (not installed)': the local hosts "
        f"run in this Python environment; pip install -r {src / 'requirements.txt'}"]
    assert not (tmp_path / "root").exists()


def test_lightning_script_resumes_on_every_host_after_a_timed_kill(tmp_path: Path) -> None:
    """A Lightning Trainer (strategy="ddp", num_nodes=2, ModelCheckpoint(save_last) in /opt/ml/checkpoints,
    fit(ckpt_path="last")): after kill:10 (epoch 2, step 2 of 4 by its progress bar: two last.ckpt
    written, whatever the machine's load) algo-2 has algo-1's last.ckpt too, both resume from it,
    and --verify compares the model.pt (and reads model.ckpt's tensors)."""
    pytest.importorskip("lightning")
    code, s, err = fit(tmp_path, "lightning_ddp.py", "--chaos", "kill:10", "--verify",
                       "--", "--epochs", "5", "--epoch-sleep", "0.4")
    assert code == 0, (s, err[-4000:])
    assert s["chaos_fired"] == ["kill:10"] and s["in_job_restarts"] >= 1
    assert s["verify_result"] == "identical", s
    assert s["steps"] == 20  # the epoch bar: 5 epochs of 4 steps
    # ModelCheckpoint keeps epoch=1-step=8.ckpt beside last.ckpt: the restore names it, its step from its name.
    # The kill is sent as the step-10 line is read; epoch 2's save (epoch=2-step=12.ckpt, then last.ckpt, each
    # copied into place, not renamed: the host's tmp is another mount) begins 2 batches and 0.4 s later, so a
    # driver slower than that under load lands in it: the file it cut short is the one warning (removed), else none
    removed = [w for w in s["warnings"] if " was not written to its end (" in w]
    assert s["warnings"] == removed and len(removed) <= 1, s  # every worker was in the process group
    log = host_log(tmp_path, "algo-1")
    if s["resumed_checkpoints"][0] == "/opt/ml/checkpoints/epoch=1-step=8.ckpt":  # the kill came before that save
        assert s["resumed_from"][0] == 8, s
        assert removed in ([], [removed_line_of("epoch=2-step=12.ckpt", removed)]), s  # or cut its first file short
    else:  # the kill landed after epoch=2-step=12.ckpt was written whole (and step 8's removed by ModelCheckpoint)
        assert s["resumed_checkpoints"][0] == "/opt/ml/checkpoints/epoch=2-step=12.ckpt", s
        assert removed in ([], [removed_line_of("last.ckpt", removed)]), s
    if removed and "/last.ckpt " in removed[0]:  # no last.ckpt left: Lightning's ckpt_path="last" starts afresh
        assert 'ckpt_path="last") is set, but there is no last checkpoint available' in log, log[-3000:]
    else:
        assert "Restoring states from the checkpoint path at /opt/ml/checkpoints/last.ckpt" in log, log[-3000:]
    assert (tmp_path / "root" / "run" / "hosts" / "algo-2" / "checkpoints" / "last.ckpt").is_file()
    assert left_running(tmp_path / "root" / "run") == []


def test_accelerate_script_resumes_from_its_newest_save_after_a_kill(tmp_path: Path) -> None:
    """Accelerate's save_state()/load_state() with automatic checkpoint naming (checkpoints/checkpoint_N,
    N its saves from 0), on the CPU as its examples' --cpu: after kill:7 (saves at steps 3 and 6 by its
    bar, whatever the machine's load) algo-2 gets what rank 0 saved on algo-1 (model, optimizer,
    random_states_0) beside its own random_states_1, and both resume from the same save. Its name holds
    a save number, not a step: resumed_from claims none, the restore names the save, and the script's
    own line says the step that save stands for."""
    pytest.importorskip("accelerate")
    code, s, err = fit(tmp_path, "accelerate_ckpt.py", "--chaos", "kill:7",
                       "--", "--cpu", "--steps", "12", "--save-every", "3", "--step-sleep", "0.2")
    assert code == 0, (s, err[-4000:])
    assert s["chaos_fired"] == ["kill:7"] and s["in_job_restarts"] >= 1, s
    assert s["steps"] == 12  # its tqdm bar
    saved = re.fullmatch(r"/opt/ml/checkpoints/checkpoints/checkpoint_(\d+)", s["resumed_checkpoints"][0])
    assert saved and int(saved.group(1)) >= 1 and s["resumed_from"] == [], s
    save = int(saved.group(1))
    # both workers in one process group. The kill is sent as the step-7 line is read and save 2 begins 2 steps
    # (0.4 s) later: a driver slower than that under load lands in it, and the save it cut short (the one after
    # the save resumed from) is then the one warning, removed (save_state writes into checkpoint_N in place)
    removed = [w for w in s["warnings"] if " was not written to its end (" in w]
    assert s["warnings"] == removed and removed in ([], [removed_line_of(f"checkpoints/checkpoint_{save + 1}", removed)]), s
    for host in ("algo-1", "algo-2"):  # the save each host's restore named is the one its script loaded
        log = host_log(tmp_path, host)
        assert f"[sm_dist] restored on {host}: {saved.group(0)}\n" in log, (host, log[-3000:])
        assert f"Resumed from save {save} at step {3 * (save + 1)}\n" in log, (host, log[-3000:])
    kept = tmp_path / "root" / "run" / "hosts" / "algo-2" / "checkpoints" / "checkpoints" / f"checkpoint_{save}"
    assert (kept / "model.safetensors").is_file() and (kept / "random_states_1.pkl").is_file()
    assert left_running(tmp_path / "root" / "run") == []


def test_dcp_script_resumes_from_its_last_whole_step_folder_after_a_kill_inside_a_save(tmp_path: Path) -> None:
    """FSDP2 (fully_shard) with torch.distributed.checkpoint, as PyTorch's DCP recipe writes it: each
    rank saves its shard into step_N (__0_0.distcp and .metadata on algo-1, __1_0.distcp on algo-2).
    Every worker killed as step_4's first shard is written (kill-in-save:2): each host's folder gets
    the other's shards from the URI, and the restore removes step_4 (no .metadata: DCP writes it
    last), so the restore names step_2, its step from its name, both ranks dcp.load it, and --verify
    compares model.pt with an uninterrupted run's."""
    code, s, err = fit(tmp_path, "dcp_fsdp.py", "--chaos", "kill-in-save:2", "--verify",
                       "--", "--steps", "8", "--save-every", "2", "--step-sleep", "0.1")
    assert code == 0, (s, err[-4000:])
    assert s["chaos_fired"] == ["kill-in-save:2"] and s["in_job_restarts"] == 1, s
    assert "as save 2 began: step_4/__" in s["chaos_events"][0], s
    assert s["steps"] == 8 and s["verify_result"] == "identical", s
    assert len(s["warnings"]) == 1 and s["warnings"][0].startswith("/opt/ml/checkpoints/step_4 was not written"), s
    assert s["resumed_from"] == [2] and s["resumed_checkpoints"] == ["/opt/ml/checkpoints/step_2"], s
    for host in ("algo-1", "algo-2"):  # every rank prints where it resumed
        log = host_log(tmp_path, host)
        assert f"[sm_dist worker] {host}: /opt/ml/checkpoints/step_4 was not written to its end (" in log, host
        assert "Resumed from /opt/ml/checkpoints/step_2 at step 2\n" in log, host
    assert (tmp_path / "root" / "run" / "hosts" / "algo-2" / "checkpoints" / "step_2" / "__0_0.distcp").is_file()
    assert left_running(tmp_path / "root" / "run") == []


@pytest.mark.parametrize("how", ["kill", "abort"])
def test_a_rank_that_ends_badly_after_the_last_step_ends_the_job_in_seconds(tmp_path: Path, how: str) -> None:
    """kill: rank 1 is killed after its last collective while rank 0 has finished: the finished
    host is still in the round (its rank waits for every rank), so the restart brings both back
    and the job completes, instead of algo-1 sitting 300 s in torchrun's exit barrier and the
    restart failing with a rendezvous error. abort: rank 1 aborts at exit after every rank
    finished: PID 1 knows the script's own end, so no restart and no exit barrier wait."""
    code, s, err = fit(tmp_path, "ends_badly.py", "--hp", f"how={how}")
    assert code == 0 and s["status"] == "Completed", (s, err[-4000:])
    assert s["in_job_restarts"] == (1 if how == "kill" else 0), s
    assert s["wall_seconds"] < 240, s  # a hang guard (the stall was 336 s); a normal end takes seconds
    log = host_log(tmp_path, "algo-2")
    if how == "abort":
        assert "after every rank had finished its script; not restarted" in log, log[-3000:]
    for host in ("algo-1", "algo-2"):  # a finished job's logs end without torchrun's traceback after its stop
        text = host_log(tmp_path, host)
        assert "SignalException" not in text and "--- Logging error ---" not in text, text[-3000:]
        assert text.splitlines()[-1] == f"[sm_dist launcher] host {host}: exit code 0", text[-3000:]
    assert left_running(tmp_path / "root" / "run") == []


def test_a_syntax_error_stops_at_once_with_its_own_line(tmp_path: Path) -> None:
    """Python prints a syntax error in the script without a Traceback header: still the worker's own
    error, with the file and line, and no restart can fix it (the first failure stops torchrun)."""
    code, s, _ = fit(tmp_path, "syntax_error.py", text="import torch\n\n\ndef f(:\n    pass\n")
    assert code != 0 and s["status"] == "Failed" and s["in_job_restarts"] == 0, s
    assert s["error"].startswith("SyntaxError: invalid syntax (syntax_error.py, line 4)  (algo-"), s["error"]
    failing = next(f for f in s["failures"].values() if "not restarted" in f)
    assert failing.startswith("SyntaxError: invalid syntax (syntax_error.py, line 4)"), failing


def test_a_snapshot_outside_the_checkpoint_folder_is_named_when_the_hosts_split(tmp_path: Path) -> None:
    """pytorch/examples' multinode.py as published saves snapshot.pt in its working directory (the
    code dir), which SageMaker does not sync. After a kill, algo-1 resumes from its copy and algo-2
    from none: the hosts desynchronise. The job fails in seconds, its error the split resume (which
    file, where, what to do) instead of a rendezvous error after minutes."""
    code, s, err = fit(tmp_path, "ddp_snapshot.py", "--chaos", "kill:4",
                       "--", "--total-epochs", "12", "--checkpoint-dir", ".")
    assert code != 0 and s["status"] == "Failed", (s, err[-4000:])
    assert s["error"].startswith("split resume: algo-1 has the working directory: snapshot.pt, algo-2 has not"), s
    assert any("/opt/ml/input/data/code/snapshot.pt outside the checkpoint folder" in w for w in s["warnings"]), s
    assert s["wall_seconds"] < 240, s  # a hang guard (the stall was 331 s)
    for host in ("algo-1", "algo-2"):  # stopped at the restore: no rank trained on from its own state
        log = host_log(tmp_path, host)
        after = log[log.index("[sm_dist worker] split resume: "):]
        assert "not starting the script" in after and "Resuming training from snapshot" not in after, (host, after)
    assert left_running(tmp_path / "root" / "run") == []
