"""PID 1 of an sm_dist training container: start torchrun, forward signals, report the outcome.

Run as ``python3 -m sm_dist.container.pid1`` with the code channel on PYTHONPATH. SageMaker's
own entrypoint (``bash -c … sm_train.sh``) was seen to drop SIGTERM, so the training script
never hears a stop or a spot interruption (docs/PLATFORM.md §1.3). PID 1 instead:

1. reads ``input/config/resourceconfig.json`` under $SM_DIST_OPT_ML (default /opt/ml; local
   mode remaps it) with the hosts in SageMaker's order (sorted as text, docs/PLATFORM.md §1.8), and
   computes the script's SageMaker variables as ModelTrainer's container does (`script_env`);
2. starts ``python -m torch.distributed.run`` with c10d rendezvous on the first host (which
   explicitly hosts the store: ``is_host``), ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` and
   ``--max-restarts`` from the job spec (docs/PLATFORM.md §2.3: the restart setup that recovered);
3. forwards SIGTERM/SIGINT to torchrun, which relays them to the workers, and waits for the orphans it
   adopts (a killed rank's DataLoader workers) so none stays a zombie (`reaper`);
4. writes ``output/failure`` (≤ 1024 chars, SageMaker's FailureReason: `failure_text`, the script's
   own error first) on error and exits with torchrun's code — 1 when it stopped torchrun after the
   script's error, whatever signal then ended torchrun — or with EXIT_INTERRUPTED when the run
   stopped on a signal after the runtime committed a checkpoint (each host's local rank 0 writes the
   file named by $SM_DIST_INTERRUPT_MARKER);
5. once it has sent torchrun a signal, leaves torchrun's own `SignalException` traceback out of the
   log (`stop_noise`).

Torchrun itself, as this process's child, is `sm_dist.container.torchrun`'s Supervisor.

Standard library only: it runs before torch is imported. Environment overrides (documented in
docs/ARCHITECTURE.md): SM_DIST_OPT_ML, SM_DIST_RDZV_HOST, SM_DIST_RDZV_PORT,
SM_DIST_NPROC_PER_NODE, SM_DIST_LOCAL_ADDR (see pid1_env, which builds the command).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from sm_dist.container import reaper, requirements, warm_cache, worker
from sm_dist.container.end_watch import EndWatch
from sm_dist.container.failure_text import FAILURE_MAX_CHARS, compose, where_logs_are
from sm_dist.container.failure_watch import FailureWatch, shared_view
from sm_dist.container.hang_watch import HangWatch
from sm_dist.container.pid1_env import (
    check_torch,
    count_gpus,
    installed_torch,
    read_topology,
    torchrun_argv,
    wait_for_host,
    wait_for_store,
    worker_env,
)
from sm_dist.container.torchrun import FORWARDED_SIGNALS, Supervisor
from sm_dist.contract.container import CODE_DIR, LOCAL_LOG_ENV, opt_ml_root, read_checkpoint_config, remap
from sm_dist.contract.worker_errors import WorkerError
from sm_dist.errors import ContainerStartError
from sm_dist.jobspec import EXIT_INTERRUPTED, JOB_SPEC_FILENAME, JobSpec

_log = logging.getLogger("sm_dist.pid1")


def write_failure(root: Path, message: str) -> None:
    """output/failure: SageMaker shows its first 1024 characters as FailureReason."""
    text = message if len(message) <= FAILURE_MAX_CHARS else "…" + message[-(FAILURE_MAX_CHARS - 1):]
    path = root / "output" / "failure"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        _log.error("cannot write %s: %s", path, exc)


def outcome(code: int, signals: list[int], marker: Path, host: str, tail: list[str],
            error: WorkerError | None = None, gave_up: str | None = None, job: str = "<job>",
            finished: bool = False, local_log: str | None = None) -> tuple[int, str | None]:
    """Exit code of PID 1 and the failure message (None when not a failure): the worker's
    own error first (`error`, or the verdict that stopped the restarts; before a stop signal that
    came after it), then where the logs are (`local_log`: local mode's file), then the script's
    traceback (`failure_text`). `finished`: every rank's script finished (whatever torchrun said
    after that, the job is done). A PID 1 that stopped torchrun after the script's error
    exits 1 as torchrun would have, not with the signal that ended torchrun."""
    if finished:
        return 0, None
    if signals and marker.exists() and gave_up is None:
        return EXIT_INTERRUPTED, None
    if code == 0 and gave_up is None:
        return 0, None
    exit_code = 1 if gave_up else code if code > 0 else (128 - code if code < 0 else 1)
    error = None if error is not None and error.torchruns else error  # its ChildFailedError says nothing
    own = error if error is not None and not error.collateral else None
    if gave_up:
        why = gave_up.replace("; not restarted: ", "\nnot restarted: ", 1)
    elif signals:
        stop = f"stopped by {signal.Signals(signals[0]).name} before a checkpoint was committed"
        why = f"{own.line()}\nthen {stop}" if own else stop
    else:
        why = f"{error.line()}\ntorchrun exited with code {code}" if error else f"torchrun exited with code {code}"
    return exit_code, compose(why, where_logs_are(job, host, local_log), host, error, tail)


def run(env: Mapping[str, str] | None = None) -> int:
    """Run the job on this host; returns the process exit code."""
    env = dict(os.environ if env is None else env)
    root = Path(opt_ml_root(env))
    code_dir = Path(remap(CODE_DIR, root))
    try:
        newer_torch = check_torch(installed_torch())
        if newer_torch:
            _log.warning("%s", newer_torch)
        spec = JobSpec.from_json((code_dir / JOB_SPEC_FILENAME).read_text(encoding="utf-8"))
        topo = read_topology(root, env, spec, int(env.get("SM_NUM_GPUS") or count_gpus()))
        # on a warm pool: pip's, HF's and torch.compile's caches in the persistent cache (warm_cache)
        env = warm_cache.apply(env, env.get("TRAINING_JOB_NAME") or spec.job_name or "sm_dist", topo.current_host)
        requirements.install(code_dir, env)
        if topo.node_rank != 0:
            wait_for_host(topo.rdzv_host)
            wait_for_store(topo.rdzv_host, topo.rdzv_port)
        argv = torchrun_argv(topo, spec, code_dir, env.get("TRAINING_JOB_NAME") or spec.job_name or "sm_dist")
    except (OSError, ValueError, ContainerStartError) as exc:  # ConfigError is a ValueError
        write_failure(root, f"sm_dist launcher: {exc}")
        _log.error("sm_dist launcher: %s", exc)
        return 2
    marker = root / "output" / "sm_dist_interrupted"
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.unlink(missing_ok=True)
    _log.info("host %s (%d/%d): %s", topo.current_host, topo.node_rank, topo.nnodes, " ".join(argv))
    state_dir = Path(tempfile.mkdtemp(prefix="sm-dist-worker-"))  # this host's own: /tmp of its container
    (state_dir / worker.STARTED_FILE).write_text(repr(time.time()), encoding="utf-8")
    try:
        watch = FailureWatch(topo.current_host, checkpoint_folder(root, spec), work_dir=code_dir,
                             max_restarts=spec.max_restarts, shared=shared_view(root, env, topo.nnodes),
                             deciding=state_dir / worker.DECIDING_FILE)
        ends = EndWatch(state_dir, topo.nproc_per_node)
        hangs = HangWatch(state_dir, topo.current_host, spec.hang_timeout_s)
        sup = Supervisor(argv, worker_env(env, topo, root, code_dir, marker, state_dir, spec), code_dir, watch,
                         stop_file=state_dir / worker.STOP_FILE, ends=ends, reap=True, hangs=hangs)
        code = sup.run()
        for sig in FORWARDED_SIGNALS:  # torchrun is gone: a stop now would only replace this host's own exit code
            signal.signal(sig, signal.SIG_IGN)  # (ignored, not reset to the default at interpreter exit)
        if code != 0 and not sup.signals and sup.gave_up is None:  # torchrun gave up after a hang: say so
            sup.gave_up = hangs.last_verdict
        finished = ends.finished
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)
    if finished and code != 0:
        _log.info("host %s: torchrun exited with code %d after every rank finished its script", topo.current_host,
                  code)
    exit_code, failure = outcome(code, sup.signals, marker, topo.current_host, list(sup.tail), watch.error(),
                                 sup.gave_up, env.get("TRAINING_JOB_NAME") or spec.job_name or "<job>", finished,
                                 env.get(LOCAL_LOG_ENV))
    if failure:
        write_failure(root, failure)
    _log.info("host %s: exit code %d", topo.current_host, exit_code)
    return exit_code


def checkpoint_folder(root: Path, spec: JobSpec) -> Path | None:
    """This host's checkpoint folder, when checkpoints are written to one (CheckpointConfig.LocalPath,
    or the job spec's local path); None when they go straight to S3."""
    try:
        config = read_checkpoint_config(root)
    except ValueError:  # RuntimeEnvError: unreadable config, reported elsewhere
        config = None
    if config is not None:
        return Path(config.local_path)
    local = spec.checkpoint.local_path
    return Path(remap(str(local), root)) if local else None


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # before torchrun runs there is nothing to save


def main() -> None:
    # As PID 1, a signal left at its default disposition is dropped by the kernel (docs/PLATFORM.md §1.3).
    for sig in FORWARDED_SIGNALS:
        signal.signal(sig, _exit_on_signal)
    logging.basicConfig(level=logging.INFO, format="[sm_dist launcher] %(message)s", stream=sys.stderr)
    # PID 1 of a container adopts every orphan; elsewhere (local mode) adopt those of our own tree
    reaper.become_subreaper()
    sys.exit(run())


if __name__ == "__main__":
    main()
