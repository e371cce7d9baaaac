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

Standard library only: it runs before torch is imported. Environment overrides (documented in
docs/ARCHITECTURE.md): SM_DIST_OPT_ML, SM_DIST_RDZV_HOST, SM_DIST_RDZV_PORT,
SM_DIST_NPROC_PER_NODE, SM_DIST_LOCAL_ADDR (see pid1_env, which builds the command).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from io import BufferedReader
from pathlib import Path
from typing import cast

from sm_dist.container import reaper, requirements, worker
from sm_dist.container.end_watch import Action, EndWatch, live_children
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
from sm_dist.container.stop_noise import StopNoise
from sm_dist.contract.container import CODE_DIR, LOCAL_LOG_ENV, opt_ml_root, read_checkpoint_config, remap
from sm_dist.contract.log_lines import restart_line
from sm_dist.contract.worker_errors import WorkerError
from sm_dist.errors import ContainerStartError
from sm_dist.jobspec import EXIT_INTERRUPTED, JOB_SPEC_FILENAME, JobSpec

_log = logging.getLogger("sm_dist.launcher")

#: Lines of torchrun's stderr kept for the failure reason.
STDERR_TAIL_LINES = 60
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: Seconds between two looks at torchrun's workers and the ranks' marks (sm_dist.container.end_watch).
WATCH_EVERY_S = 1.0


class Supervisor:
    """Runs torchrun in its own process group, relays signals, keeps the tail of its stderr, and
    stops it when `watch` says a restart cannot help or `ends` that the job is done or torchrun
    lost the stop signal (`sm_dist.container.end_watch`); `hangs` reads its output (stdout too: the
    step lines) and, when the ranks stop making progress, restarts or stops them (`hang_watch`)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, watch: FailureWatch | None = None,
                 stop_file: Path | None = None, ends: EndWatch | None = None, reap: bool = False,
                 hangs: HangWatch | None = None) -> None:
        self.argv, self.env, self.cwd = argv, env, cwd
        self.hangs = hangs
        self.reap = reap  # wait for adopted orphans while torchrun runs (sm_dist.container.reaper)
        self.stop_file = stop_file  # tells workers torchrun starts again not to run the script
        self.signals: list[int] = []
        self.tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self.watch = watch
        self.ends = ends
        self.gave_up: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._forwarded = False  # torchrun handles one signal; a second would cut its shutdown short
        self._noise: StopNoise | None = None  # from the first signal sent to torchrun (stop_noise)
        self._raw_pending = 0  # bytes of the unfinished output line already written as they came
        self._lock = threading.Lock()

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.signals.append(signum)
        _log.info("received %s, forwarding to torchrun", signal.Signals(signum).name)
        self._forward(signum)

    def _forward(self, signum: int) -> None:
        if self._proc is None or self._proc.poll() is not None or self._forwarded:
            return  # not started yet (run() forwards it then), already gone, or already told
        self._forwarded = True
        self._send(signum)
        if self.ends is not None:
            self.ends.signalled()

    def _send(self, signum: int) -> None:
        assert self._proc is not None  # only called once started
        if self._noise is None:
            self._noise = StopNoise()
        try:
            os.killpg(self._proc.pid, signum)
        except ProcessLookupError:
            pass

    def _stop(self, why: str) -> None:
        """Stop torchrun for good: workers it starts meanwhile exit before the script."""
        if self.stop_file is not None:  # first: torchrun may restart the workers before the signal lands
            with contextlib.suppress(OSError):
                self.stop_file.write_text(why, encoding="utf-8")
        self._forward(signal.SIGTERM)

    def _act(self, action: Action) -> None:
        with self._lock:
            if action.kind == "done":
                _log.info("%s; stopping torchrun", action.why)
                self._stop(action.why)
            elif action.kind == "term":
                _log.warning("%s", action.why)
                self._send(signal.SIGTERM)
            else:
                (_log.info if self.ends is not None and self.ends.done else _log.error)("%s; killing torchrun",
                                                                                         action.why)
                if self.stop_file is not None:
                    with contextlib.suppress(OSError):
                        self.stop_file.write_text(action.why, encoding="utf-8")
                self._send(signal.SIGKILL)

    def _pump(self, stream: BufferedReader) -> None:
        """Pass torchrun's stderr on as it comes (a progress bar redraws its line after a carriage
        return: waiting for a newline would hold every redraw until the bar ends) and read it line by line."""
        pending = b""
        progress = self.hangs.reader() if self.hangs is not None else None
        for chunk in iter(lambda: stream.read1(65536), b""):
            if progress is not None:
                progress(chunk)
            *lines, pending = (pending + chunk).split(b"\n")
            self._write(chunk, lines, pending)
            for raw in lines:
                self._line(raw.decode("utf-8", "replace"))
        if pending:
            self._line(pending.decode("utf-8", "replace"))
        if self._noise is not None:
            self._write(b"", [pending] if pending else [], b"", flush=True)

    def _write(self, chunk: bytes, lines: list[bytes], pending: bytes, flush: bool = False) -> None:
        """Pass torchrun's output on: as it comes until torchrun got a signal, then whole lines less
        torchrun's own traceback (`stop_noise`; the line begun before the switch is finished as it is)."""
        noise = self._noise
        if noise is None:
            out, self._raw_pending = chunk, len(pending)
        else:
            kept: list[str] = []
            for index, raw in enumerate(lines):
                if index == 0 and self._raw_pending:
                    kept.append(raw[self._raw_pending:].decode("utf-8", "surrogateescape"))
                    self._raw_pending = 0
                    continue
                kept.extend(noise.feed(raw.decode("utf-8", "surrogateescape")))
            if flush:
                kept.extend(noise.flush())
            out = "".join(line + "\n" for line in kept).encode("utf-8", "surrogateescape")
        if out:
            sys.stderr.buffer.write(out)
            sys.stderr.buffer.flush()

    def _line(self, line: str) -> None:
        self.tail.append(line)
        action = self.ends.feed(line) if self.ends is not None else None
        if action is not None:
            self._act(action)
        verdict = self.watch.feed(line) if self.watch is not None else None
        if verdict is not None and self.gave_up is None and (self.ends is None or self.ends.done is None):
            self.gave_up = verdict
            _log.error("%s; stopping torchrun", verdict)
            with self._lock:
                self._stop(verdict)
        while self.watch is not None and self.watch.restarts:  # the cause of a restart, where the user looks
            why = self.watch.restarts.pop(0)
            if self.gave_up is None and not self.signals and (self.ends is None or self.ends.done is None):
                print(restart_line(self.watch.host, why), file=sys.stderr, flush=True)

    def _pump_stdout(self, stream: BufferedReader) -> None:
        """torchrun's stdout (rank 0's step lines) passed on as it comes, read by the hang watch."""
        assert self.hangs is not None  # piped for it only
        progress = self.hangs.reader()
        for chunk in iter(lambda: stream.read1(65536), b""):
            sys.stdout.buffer.write(chunk)
            sys.stdout.buffer.flush()
            progress(chunk)

    def _watchdog(self) -> None:
        assert self._proc is not None and self.ends is not None
        while self._proc.poll() is None:
            time.sleep(WATCH_EVERY_S)
            action = self.ends.tick(live_children(self._proc.pid))
            if action is not None and self._proc.poll() is None:
                self._act(action)
            hung = self.hangs.check() if self.hangs is not None and self._proc.poll() is None else None
            if hung is not None and self.hangs is not None:
                if hung.give_up and self.gave_up is None:  # the stop file first: restarted workers must not run
                    self.gave_up = hung.verdict
                    with self._lock:
                        self._stop(hung.verdict)
                elif self.watch is not None:  # the failure the kill causes is this hang
                    self.watch.hung(hung.verdict.split("; restarting the workers", 1)[0].split("\n", 1)[0])
                self.hangs.kill()

    def run(self) -> int:
        """Start torchrun, wait for it, return its exit code (negative: killed by a signal)."""
        previous = {s: signal.signal(s, self._on_signal) for s in FORWARDED_SIGNALS}
        try:
            self._proc = subprocess.Popen(
                self.argv, env=self.env, cwd=self.cwd, stderr=subprocess.PIPE, start_new_session=True,
                stdout=subprocess.PIPE if self.hangs is not None else None,
            )
            if self.signals:  # a signal that arrived while torchrun was being started
                self._forward(self.signals[0])
            pump = threading.Thread(target=self._pump, args=(cast(BufferedReader, self._proc.stderr),), daemon=True)
            pump.start()
            if self.hangs is not None:
                threading.Thread(target=self._pump_stdout, args=(cast(BufferedReader, self._proc.stdout),),
                                 daemon=True).start()
            if self.ends is not None:
                threading.Thread(target=self._watchdog, daemon=True).start()
            # never torchrun: its exit status is this wait's
            orphans = reaper.Reaper(keep={self._proc.pid}).start() if self.reap else None
            code = self._proc.wait()
            if orphans is not None:
                orphans.stop()
            pump.join(timeout=10)
            return code
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


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
    """Exit code of the launcher and the failure message (None when not a failure): the worker's
    own error first (`error`, or the verdict that stopped the restarts; before a stop signal that
    came after it), then where the logs are (`local_log`: local mode's file), then the script's
    traceback (`failure_text`). `finished`: every rank's script finished (whatever torchrun said
    after that, the job is done). The launcher that stopped torchrun after the script's error
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
