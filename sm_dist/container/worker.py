"""Each worker's first moments: refuse to run again when the launcher gave up; on an in-job restart,
give this host the checkpoint folder SageMaker would restore; then become the training script.

torchrun runs ``python -u -m sm_dist.container.worker SCRIPT ARGS...`` instead of the script. When
the launcher has decided that a restart cannot help (`sm_dist.container.failure_watch`) it writes
STOP_FILE before it stops torchrun; a worker torchrun restarts in between exits at once instead of
running the script again. The folder restore is on for a script that checkpoints itself into
CheckpointConfig.LocalPath (the launcher sets RESTORE_ENV).

SageMaker copies the checkpoint URI into every instance's folder only when the job starts
(docs/PLATFORM.md §1.4). After torchrun restarts the workers of a running job, a checkpoint that
rank 0 saved on algo-1 is therefore missing on the other hosts, and a script that resumes from
"the newest checkpoint in my folder" (Hugging Face ``Trainer``, pytorch/examples' ``snapshot.pt``)
resumes differently on each host, or not at all.

On the first start of the workers on a host this does nothing but ``exec`` the script (same pid,
same argv as torchrun would give it). On a later start, the host's local rank 0 runs
``python -m sm_dist.runtime.checkpoint.folder_restore`` (waits until this host's files are in S3, waits for
every host, then makes the folder what S3 holds) while the other local ranks wait for it; then
every rank ``exec``s the script. Standard library only: the runtime part runs in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from sm_dist.contract.container import opt_ml_root, read_checkpoint_config

#: The launcher's per-host scratch folder (it is created by the launcher and removed when it exits).
STATE_ENV = "SM_DIST_WORKER_STATE"
#: "host:port" of the rendezvous store on algo-1: the hosts meet there before restoring.
RDZV_ENDPOINT_ENV = "SM_DIST_RDZV_ENDPOINT"
#: "1": restore the checkpoint folder on restarts (a script checkpointing through CheckpointConfig).
RESTORE_ENV = "SM_DIST_RESTORE_CHECKPOINT_FOLDER"
#: Written by the launcher into STATE_ENV's folder when it stops torchrun instead of letting it restart.
STOP_FILE = "stop"
#: How long local ranks other than 0 wait for local rank 0's restore (large checkpoints download).
RESTORE_WAIT_S = 3600.0
_POLL_S = 0.1


def _say(message: str) -> None:
    print(f"[sm_dist worker] {message}", file=sys.stderr, flush=True)


def restore_command(env: Mapping[str, str]) -> list[str] | None:
    """The restore subprocess for this host, or None when there is nothing to restore from."""
    try:
        config = read_checkpoint_config(opt_ml_root(env))
    except ValueError:  # RuntimeEnvError: a malformed file is the launcher's to report
        return None
    if config is None or config.s3_uri is None:
        return None
    return [
        sys.executable, "-m", "sm_dist.runtime.checkpoint.folder_restore",
        "--folder", config.local_path, "--uri", config.s3_uri,
        "--endpoint", env.get(RDZV_ENDPOINT_ENV, ""), "--hosts", str(_host_count(env)),
        # every host's workers of one rendezvous round share its MASTER_PORT (restart counts differ by host)
        "--round", f"{env.get('TORCHELASTIC_RUN_ID', '')}-{env.get('MASTER_PORT', '')}",
        "--host", env.get("SM_CURRENT_HOST", ""),
    ]


def _host_count(env: Mapping[str, str]) -> int:
    try:
        return len(json.loads(env.get("SM_HOSTS", "[]"))) or 1
    except ValueError:
        return 1


def prepare(env: Mapping[str, str]) -> None:
    """Restore this host's checkpoint folder when the workers start again; no-op on the first start."""
    state = env.get(STATE_ENV)
    if not state:
        return
    stop = Path(state) / STOP_FILE
    if stop.is_file():
        _say(f"not starting the script again: {stop.read_text(encoding='utf-8', errors='replace')}")
        raise SystemExit(1)
    if env.get(RESTORE_ENV) != "1":
        return
    rounds = Path(state) / "rounds"
    round_key = f"{env.get('MASTER_PORT', '')}-{env.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    this_round = rounds / round_key
    ready = this_round / "ready"
    if env.get("LOCAL_RANK", "0") != "0":
        deadline = time.monotonic() + RESTORE_WAIT_S
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(_POLL_S)
        return
    earlier = rounds.is_dir() and any(rounds.iterdir())  # local rank 0 comes here once per start
    this_round.mkdir(parents=True, exist_ok=True)
    ready.unlink(missing_ok=True)
    command = restore_command(env) if earlier else None
    if command is not None:
        _say(f"workers restarted on {env.get('SM_CURRENT_HOST', 'this host')}: restoring the checkpoint folder")
        code = subprocess.call(command, env=dict(env))
        if code != 0:
            _say(f"checkpoint folder restore failed (exit code {code}); starting the script on what is there")
    ready.touch()


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        _say("usage: python -m sm_dist.container.worker SCRIPT [ARGS...]")
        raise SystemExit(2)
    prepare(os.environ)
    os.execv(sys.executable, [sys.executable, "-u", *args])


if __name__ == "__main__":
    main()
