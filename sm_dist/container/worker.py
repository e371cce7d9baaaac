"""Each worker's first moments: refuse to run again when PID 1 gave up; on an in-job restart,
give this host the checkpoint folder SageMaker would restore; then become the training script.

torchrun runs ``python -u -m sm_dist.container.worker SCRIPT ARGS...`` instead of the script. When
PID 1 has decided that a restart cannot help (`sm_dist.container.failure_watch`) it writes
STOP_FILE before it stops torchrun; a worker torchrun restarts in between exits at once instead of
running the script again. The folder restore is on for a script that checkpoints itself into
CheckpointConfig.LocalPath (PID 1 sets RESTORE_ENV).

SageMaker copies the checkpoint URI into every instance's folder only when the job starts
(docs/PLATFORM.md §1.4). After torchrun restarts the workers of a running job, a checkpoint that
rank 0 saved on algo-1 is therefore missing on the other hosts, and a script that resumes from
"the newest checkpoint in my folder" (Hugging Face ``Trainer``, pytorch/examples' ``snapshot.pt``)
resumes differently on each host, or not at all.

On the first start of the workers on a host this does nothing but ``exec`` the script runner
(same pid). On a later start, the host's local rank 0 runs ``python -m
sm_dist.runtime.restore.folder_restore`` (waits until this host's files are in S3, waits for
every host, then makes the folder what S3 holds; under network isolation, which forbids S3, it makes
the folder what the hosts' folders hold together, over the cluster network) while the other local
ranks wait for it; a
restore that fails is tried again, then fails the worker with its reason: a script never starts on
a folder that could not be restored. Then every rank ``exec``s ``python -u -m
sm_dist.runtime.run_script SCRIPT ARGS`` (the script as ``__main__``, then the rank's end: see that
module), which writes FINISHED_DIR's markers read by PID 1. Standard library only: the
runtime parts run after an exec or in a subprocess.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from sm_dist.container import outside_files
from sm_dist.container.outside_files import OutsideFile
from sm_dist.contract.container import NETWORK_ISOLATION_ENV, opt_ml_root, read_checkpoint_config

#: PID 1's per-host scratch folder (it is created by PID 1 and removed when it exits).
STATE_ENV = "SM_DIST_WORKER_STATE"
#: "host:port" of the rendezvous store on algo-1: the hosts meet there before restoring.
RDZV_ENDPOINT_ENV = "SM_DIST_RDZV_ENDPOINT"
#: "1": restore the checkpoint folder on restarts (a script checkpointing through CheckpointConfig).
RESTORE_ENV = "SM_DIST_RESTORE_CHECKPOINT_FOLDER"
#: This host's address for its peers (torchrun's --local-addr): under network isolation the restore
#: serves this host's folder there and fetches what it lacks from the other hosts' (docs/PLATFORM.md §1.7).
HOST_ADDR_ENV = "SM_DIST_HOST_ADDR"
#: Written by PID 1 into STATE_ENV's folder when it stops torchrun instead of letting it restart.
STOP_FILE = "stop"
#: In STATE_ENV's folder while PID 1 asks whether a restart can help (the run's checkpoint URI, seconds):
#: a worker torchrun restarts meanwhile waits for the answer (STOP_FILE or not) before it runs the script.
DECIDING_FILE = "deciding"
#: The longest a worker waits for that answer (PID 1's question gives up after 30 s).
DECIDING_WAIT_S = 60.0
#: Written by PID 1 into STATE_ENV's folder when it starts: files older than it are not the script's.
STARTED_FILE = "started"
#: In STATE_ENV's folder: `finished/<local rank>` once that rank's script finished and
#: `finished/all` once every rank of the job had (each holds its rendezvous round, `round_id`).
FINISHED_DIR = "finished"
FINISHED_ALL = "all"
#: What runs the script and ends the rank (runtime world: it may import torch).
RUN_SCRIPT_MODULE = "sm_dist.runtime.run_script"
#: How long local ranks other than 0 wait for local rank 0's restore (large checkpoints download).
RESTORE_WAIT_S = 3600.0
#: Tries of the folder restore before the worker fails with its reason (a store or S3 hiccup passes).
RESTORE_ATTEMPTS = 3
RESTORE_RETRY_S = 2.0
#: What a worker prints when it cannot start the script: PID 1's failure watch reads it as an
#: error no restart can fix (`prog: error: ...`, sm_dist.contract.worker_errors).
ERROR_PROG = "sm_dist.container.worker"
#: The restore's exit code for a state no second try changes (it says why; no retry).
RESTORE_REFUSED = 3
#: The restore's exit code when it restored the folder but the hosts' files outside it differ (a
#: split resume, which it printed): recorded in SPLIT_FILE for the ranks' end (run_script), and the
#: script is not started: PID 1's failure watch reads the split line as an error no restart
#: fixes and stops the job in seconds, instead of ranks training on from different states.
RESTORE_SPLIT = 4
SPLIT_FILE = "split"
#: Where the hosts' restores meet on the rendezvous store: `MEET_PREFIX/<round>/<host>`, each holding
#: the host's share (its files outside the synced folder, JSON) or NOT_RESTORING.
MEET_PREFIX = "sm_dist/folder_restore"
#: A host whose workers start for the first time does not restore; its local rank 0 says so at the
#: meeting (`sm_dist.runtime.run_script`, which may import torch) so that a host restoring in the same
#: round does not wait for it. Both sides can meet in one round: a rank killed while it started (before
#: this step recorded the round) leaves its host with no earlier round while the others have one.
NOT_RESTORING = "not restoring"
#: Set for run_script (and removed before the script) when local rank 0 did not restore: the round.
NOT_RESTORING_ENV = "SM_DIST_NOT_RESTORING_ROUND"
_POLL_S = 0.1


def say(message: str) -> None:
    """One `[sm_dist worker] ...` line on stderr (the host's log)."""
    print(f"[sm_dist worker] {message}", file=sys.stderr, flush=True)


def split_stop_line(host: str) -> str:
    """What a host says when the restore found a split resume: its script is not started. The restore
    prints it beside the split line, in one breath: the first host to stop ends the job, and a worker
    that waited for the restore's exit to say it was often stopped before it could (both hosts split,
    one said so)."""
    return f"[sm_dist worker] not starting the script on {host}: the hosts would resume from different states " \
           "(the split resume above)"


def round_id(env: Mapping[str, str]) -> str:
    """The rendezvous round of this worker, the same on every host: torchrun's restart counts differ
    by host, but every worker of one round shares its MASTER_PORT (docs/PLATFORM.md §2.2)."""
    return f"{env.get('TORCHELASTIC_RUN_ID', '')}-{env.get('MASTER_PORT', '')}"


def mark_finished(env: Mapping[str, str], every_rank: bool = False) -> None:
    """Record in PID 1's state folder that this rank's script finished (`every_rank`: that
    every rank of the round had)."""
    state = env.get(STATE_ENV)
    if not state:
        return
    folder = Path(state) / FINISHED_DIR
    name = FINISHED_ALL if every_rank else env.get("LOCAL_RANK", "0")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{name}.{os.getpid()}"
        tmp.write_text(round_id(env), encoding="utf-8")
        os.replace(tmp, folder / name)
    except OSError as exc:  # PID 1's folder is gone: it is ending
        say(f"cannot record the end of local rank {name}: {exc}")


def split(env: Mapping[str, str]) -> bool:
    """Whether this round's restore found the hosts' files outside the synced folder different."""
    try:
        return (Path(env.get(STATE_ENV, "")) / SPLIT_FILE).read_text(encoding="utf-8") == round_id(env)
    except OSError:
        return False


def finished(state_dir: Path, local_ranks: int) -> bool:
    """Whether every local rank's script finished in the round in which every rank of the job
    finished (PID 1's question when torchrun reports a failure after the last step)."""
    folder = state_dir / FINISHED_DIR
    try:
        every = (folder / FINISHED_ALL).read_text(encoding="utf-8")
        return all((folder / str(rank)).read_text(encoding="utf-8") == every for rank in range(local_ranks))
    except OSError:
        return False


def restore_command(env: Mapping[str, str]) -> list[str] | None:
    """The restore subprocess for this host, or None when there is nothing to restore from."""
    try:
        config = read_checkpoint_config(opt_ml_root(env))
    except ValueError:  # RuntimeEnvError: a malformed file is PID 1's to report
        return None
    if config is None or config.s3_uri is None:
        return None
    command = [
        sys.executable, "-m", "sm_dist.runtime.restore.folder_restore",
        "--folder", config.local_path, "--uri", config.s3_uri,
        "--endpoint", env.get(RDZV_ENDPOINT_ENV, ""), "--hosts", ",".join(_hosts(env)),
        "--round", round_id(env), "--host", env.get("SM_CURRENT_HOST", ""),
    ]
    if env.get(NETWORK_ISOLATION_ENV) == "1":  # no S3 in the container: from the peers' folders
        command += ["--peers", "--address", env.get(HOST_ADDR_ENV) or env.get("SM_CURRENT_HOST", ""),
                    "--state", env.get(STATE_ENV, "")]
    return command


def _hosts(env: Mapping[str, str]) -> list[str]:
    try:
        hosts = json.loads(env.get("SM_HOSTS", "[]"))
    except ValueError:
        return []
    return [str(h) for h in hosts] if isinstance(hosts, list) else []


def prepare(env: Mapping[str, str]) -> dict[str, str]:
    """Restore this host's checkpoint folder when the workers start again; on the first start, the
    variable that has run_script tell the meeting this host does not restore (returned, for the
    script's process)."""
    state = env.get(STATE_ENV)
    if not state:
        return {}
    _exit_if_stopped(Path(state))
    if env.get(RESTORE_ENV) != "1":
        return {}
    rounds = Path(state) / "rounds"
    round_key = f"{env.get('MASTER_PORT', '')}-{env.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    this_round = rounds / round_key
    ready = this_round / "ready"
    if env.get("LOCAL_RANK", "0") != "0":
        deadline = time.monotonic() + RESTORE_WAIT_S
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(_POLL_S)
        return {}
    earlier = rounds.is_dir() and any(rounds.iterdir())  # local rank 0 comes here once per start
    this_round.mkdir(parents=True, exist_ok=True)
    ready.unlink(missing_ok=True)
    command = restore_command(env)
    if command is not None and not earlier:
        _drop_interrupted(command, env)  # a save a fault cut short, restored at the job's start
        _name_restored(command, env)  # what SageMaker restored at the job's start, if anything
        ready.touch()
        return {NOT_RESTORING_ENV: round_id(env)} if len(_hosts(env)) > 1 else {}
    if command is not None:
        host = env.get("SM_CURRENT_HOST", "this host")
        say(f"workers restarted on {host}: restoring the checkpoint folder")
        outside = _outside(Path(state), Path(command[command.index("--folder") + 1]), env)
        if outside:
            say(f"{host}: the script wrote {'; '.join(f.text() for f in outside[:3])}"
                f"{f' and {len(outside) - 3} more' if len(outside) > 3 else ''} outside the checkpoint folder "
                f"{command[command.index('--folder') + 1]}, which alone SageMaker syncs: after a restart each host "
                "resumes from its own copy (or none), after a new job from none; save checkpoints under the "
                "checkpoint folder (SM_CHECKPOINT_DIR)")
        _restore([*command, "--outside", json.dumps([f.key() for f in outside])], env)
        _drop_interrupted(command, env)
        _name_restored(command, env)
        _exit_if_stopped(Path(state))  # PID 1 may have decided while this host restored
    ready.touch()
    return {}


def _exit_if_stopped(state: Path) -> None:
    """Exit 1 when PID 1 gave up (STOP_FILE), once it is no longer deciding whether to."""
    stop = state / STOP_FILE
    deadline = time.monotonic() + DECIDING_WAIT_S
    while (state / DECIDING_FILE).exists() and not stop.exists() and time.monotonic() < deadline:
        time.sleep(_POLL_S)
    if stop.is_file():
        say(f"not starting the script again: {stop.read_text(encoding='utf-8', errors='replace')}")
        raise SystemExit(1)


def _drop_interrupted(command: list[str], env: Mapping[str, str]) -> None:
    """Remove from the restored folder each checkpoint a fault cut short (`sm_dist.contract.checkpoint_whole`),
    saying which and why: the script then resumes from the newest whole one, on every host alike (each
    host judges the same restored files). Where the hosts share one folder (a Slurm job's), a host that finds
    it already gone says nothing: the host that removed it said so. Removed in place, not renamed aside
    first: a renamed folder is new files to SageMaker's uploader (and local mode's stand-in)."""
    from sm_dist.contract.checkpoint_whole import interrupted, removed_line

    folder = Path(command[command.index("--folder") + 1])
    host = env.get("SM_CURRENT_HOST", "this host")
    for found in interrupted(folder):
        path = folder / found.rel
        try:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
        except FileNotFoundError:
            continue  # another host sharing the folder removed it first: that host says so
        except OSError as exc:
            say(f"{host}: {path} was not written to its end ({found.why}) and cannot be removed ({exc}): "
                "the script may resume from it")
            continue
        say(removed_line(host, str(path), found.why))


def _name_restored(command: list[str], env: Mapping[str, str]) -> None:
    """Print the `[sm_dist] restored` line: the folder's newest checkpoint and its step (local mode's
    resumed_from for a script that prints no resumed line of sm_dist's); nothing for an empty folder."""
    from sm_dist.contract.checkpoint_names import newest_checkpoint
    from sm_dist.contract.log_lines import restored_line

    folder = Path(command[command.index("--folder") + 1])
    found = None
    with contextlib.suppress(OSError):  # a line to read, never a reason not to start the script
        found = newest_checkpoint(folder)
    if found is not None:
        print(restored_line(env.get("SM_CURRENT_HOST", "this host"), str(folder / found[0]), found[1]),
              file=sys.stderr, flush=True)


def _outside(state: Path, synced: Path, env: Mapping[str, str]) -> list[OutsideFile]:
    """The script's checkpoint-like files outside the synced folder, written since PID 1 started."""
    try:
        since = float((state / STARTED_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return outside_files.find(since, synced, skip=(state,), env=env)


def _restore(command: list[str], env: Mapping[str, str]) -> None:
    """Run the restore, again when it fails; SystemExit with its reason when it keeps failing (the
    other local ranks, waiting for `ready`, are stopped by torchrun with this one)."""
    for attempt in range(1, RESTORE_ATTEMPTS + 1):
        code, why = _run_helper(command, env)
        if code == RESTORE_SPLIT:  # the restore printed the split and split_stop_line: the script is not started
            with contextlib.suppress(OSError):
                (Path(env[STATE_ENV]) / SPLIT_FILE).write_text(round_id(env), encoding="utf-8")
            raise SystemExit(1)
        if code == 0:
            return
        if code == RESTORE_REFUSED or attempt == RESTORE_ATTEMPTS:
            break
        say(f"checkpoint folder restore failed ({why}); trying again ({attempt + 1} of {RESTORE_ATTEMPTS})")
        time.sleep(RESTORE_RETRY_S)
    print(f"{ERROR_PROG}: error: the checkpoint folder of {env.get('SM_CURRENT_HOST', 'this host')} was not "
          f"restored ({why}); not starting the script on it", file=sys.stderr, flush=True)
    raise SystemExit(1)


def _run_helper(command: list[str], env: Mapping[str, str]) -> tuple[int, str]:
    """Run a runtime helper to its end: (exit code, its one-line reason when it failed). A stop
    signal to this worker stops the helper too (it must not outlive the worker torchrun stops)."""
    with tempfile.TemporaryDirectory(prefix="sm-dist-restore-") as tmp:
        reason = Path(tmp) / "reason"
        proc = subprocess.Popen([*command, "--reason-file", str(reason)], env=dict(env))

        def stop(signum: int, _frame: object) -> None:
            proc.terminate()
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

        previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            code = proc.wait()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        try:
            why = reason.read_text(encoding="utf-8").strip()
        except OSError:
            why = ""
    return code, why or f"exit code {code}"


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        say("usage: python -m sm_dist.container.worker SCRIPT [ARGS...]")
        raise SystemExit(2)
    os.environ.update(prepare(os.environ))
    os.execv(sys.executable, [sys.executable, "-u", "-m", RUN_SCRIPT_MODULE, *args])


if __name__ == "__main__":
    main()
