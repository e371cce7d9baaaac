"""PID 1 of an sm_dist training container: start torchrun, forward signals, report the outcome.

Run as ``python3 -m sm_dist.runtime.launcher`` with the code channel on PYTHONPATH. SageMaker's
own entrypoint (``bash -c … sm_train.sh``) was seen to drop SIGTERM, so the training script
never hears a stop or a spot interruption (FACTS.md §1.3). This launcher instead:

1. reads ``input/config/resourceconfig.json`` under $SM_DIST_OPT_ML (default /opt/ml; local
   mode remaps it) and sorts the hosts naturally (algo-2 before algo-10);
2. starts ``python -m torch.distributed.run`` with c10d rendezvous on the first host (which
   explicitly hosts the store: ``is_host``), ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` and
   ``--max-restarts`` from the job spec (FACTS.md §2.3: the restart setup that recovered);
3. forwards SIGTERM/SIGINT to torchrun, which relays them to the workers;
4. writes ``output/failure`` (≤ 1024 chars, SageMaker's FailureReason) on error and exits with
   torchrun's code — or with EXIT_INTERRUPTED when the run stopped on a signal after the
   runtime committed a checkpoint (rank 0 writes the file named by $SM_DIST_INTERRUPT_MARKER).

Standard library only: it runs before torch is imported. Environment overrides (documented in
docs/ARCHITECTURE.md): SM_DIST_OPT_ML, SM_DIST_RDZV_HOST, SM_DIST_RDZV_PORT,
SM_DIST_NPROC_PER_NODE.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sm_dist._resources import resource_dir
from sm_dist.jobspec import EXIT_INTERRUPTED, INTERRUPT_MARKER_ENV, JOB_SPEC_ENV, JOB_SPEC_FILENAME, JobSpec
from sm_dist.jobspec import entry_is_function

_log = logging.getLogger("sm_dist.launcher")

DEFAULT_OPT_ML = "/opt/ml"
#: torchrun's own default port for c10d rendezvous (torch/distributed/run.py docs).
DEFAULT_RDZV_PORT = 29400
#: SageMaker sends SIGKILL 120 s after SIGTERM (FACTS.md §1.3); torchrun waits this long for
#: the workers to commit their checkpoint before it kills them, leaving 20 s for the rest.
SHUTDOWN_TIMEOUT_S = 100
#: SageMaker keeps the first 1024 characters of output/failure as FailureReason (FACTS.md §1.1).
FAILURE_MAX_CHARS = 1024
#: "Hostname information may not be immediately available" (FACTS.md §1.1): retry resolution.
HOST_RESOLVE_TIMEOUT_S = 600
HOST_RESOLVE_INTERVAL_S = 2.0
#: Lines of torchrun's stderr kept for the failure reason.
STDERR_TAIL_LINES = 60
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class LaunchFailure(Exception):
    """The container is not set up as the launcher expects (reported via output/failure)."""


@dataclass(frozen=True)
class Topology:
    """This host's place in the job, from resourceconfig.json and the overrides."""

    hosts: tuple[str, ...]
    current_host: str
    node_rank: int
    rdzv_host: str
    rdzv_port: int
    nproc_per_node: int
    num_gpus: int

    @property
    def nnodes(self) -> int:
        return len(self.hosts)


def natural_key(name: str) -> tuple[object, ...]:
    """Sort key ordering embedded numbers numerically: algo-2 < algo-10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def count_gpus() -> int:
    """GPUs on this host, counted as SageMaker's own driver does (`nvidia-smi --list-gpus`)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return 0
    try:
        out = subprocess.run([exe, "--list-gpus"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.strip().startswith("GPU"))


def read_topology(root: Path, env: Mapping[str, str], spec: JobSpec, num_gpus: int) -> Topology:
    """Hosts, rank and rendezvous endpoint of this host."""
    path = root / "input" / "config" / "resourceconfig.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
        hosts = tuple(sorted(config["hosts"], key=natural_key))
        current = config["current_host"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LaunchFailure(f"cannot read {path}: {exc}") from None
    if current not in hosts:
        raise LaunchFailure(f"current_host {current!r} is not in hosts {list(hosts)} ({path})")
    nproc = env.get("SM_DIST_NPROC_PER_NODE") or spec.nproc_per_node or num_gpus or 1
    return Topology(
        hosts=hosts,
        current_host=current,
        node_rank=hosts.index(current),
        rdzv_host=env.get("SM_DIST_RDZV_HOST") or hosts[0],
        rdzv_port=int(env.get("SM_DIST_RDZV_PORT") or DEFAULT_RDZV_PORT),
        nproc_per_node=int(nproc),
        num_gpus=num_gpus,
    )


def script_argv(spec: JobSpec, code_dir: Path) -> list[str]:
    """The training script and its arguments: the entry, then `--key value` per hyperparameter."""
    if entry_is_function(spec.entry):
        runner = code_dir / "sm_dist" / "_entrypoints" / "run_function.py"
        if not runner.is_file():  # editable install / source checkout
            runner = resource_dir("entrypoints") / "run_function.py"
        argv = [str(runner), spec.entry]
    else:
        script = code_dir / spec.entry
        if not script.is_file():
            raise LaunchFailure(f"entry script {spec.entry!r} not found in the code dir {code_dir}")
        argv = [str(script)]
    for key, value in spec.hyperparameters.items():
        argv += [f"--{key}", value]
    return argv


def torchrun_argv(topo: Topology, spec: JobSpec, code_dir: Path, run_id: str) -> list[str]:
    """`python -m torch.distributed.run …` for this host."""
    return [
        sys.executable, "-m", "torch.distributed.run",
        f"--nnodes={topo.nnodes}",
        f"--nproc-per-node={topo.nproc_per_node}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={topo.rdzv_host}:{topo.rdzv_port}",
        f"--rdzv-id={run_id}",
        # Name the store host explicitly: hostname matching fails when every host is 127.0.0.1.
        f"--rdzv-conf=is_host={'true' if topo.node_rank == 0 else 'false'}",
        f"--max-restarts={spec.max_restarts}",
        *script_argv(spec, code_dir),
    ]


def worker_env(env: Mapping[str, str], topo: Topology, root: Path, code_dir: Path, marker: Path) -> dict[str, str]:
    """torchrun's environment: the container's plus sm_dist's and SageMaker-style variables."""
    out = dict(env)
    out[JOB_SPEC_ENV] = str(code_dir / JOB_SPEC_FILENAME)
    out[INTERRUPT_MARKER_ENV] = str(marker)
    out["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    out.setdefault("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", str(SHUTDOWN_TIMEOUT_S))
    out.setdefault("PYTHONUNBUFFERED", "1")
    out["PYTHONPATH"] = os.pathsep.join(p for p in (str(code_dir), env.get("PYTHONPATH", "")) if p)
    # Scripts written for SageMaker read these; its own driver (not used here) would set them.
    compat = {
        "SM_HOSTS": json.dumps(list(topo.hosts)),
        "SM_CURRENT_HOST": topo.current_host,
        "SM_HOST_COUNT": str(topo.nnodes),
        "SM_CURRENT_HOST_RANK": str(topo.node_rank),
        "SM_NUM_GPUS": str(topo.num_gpus),
        "SM_MODEL_DIR": str(root / "model"),
        "SM_OUTPUT_DIR": str(root / "output"),
        "SM_OUTPUT_DATA_DIR": str(root / "output" / "data"),
        "SM_INPUT_DIR": str(root / "input"),
        "SM_INPUT_CONFIG_DIR": str(root / "input" / "config"),
    }
    channels = _channels(root)
    compat["SM_CHANNELS"] = json.dumps(channels)
    compat.update({f"SM_CHANNEL_{c.upper()}": str(root / "input" / "data" / c) for c in channels})
    for key, value in compat.items():
        out.setdefault(key, value)
    return out


def _channels(root: Path) -> list[str]:
    try:
        data = json.loads((root / "input" / "config" / "inputdataconfig.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return sorted(data) if isinstance(data, dict) else []


def wait_for_host(host: str, timeout: float = HOST_RESOLVE_TIMEOUT_S) -> None:
    """Block until `host` resolves: SageMaker hosts may not be resolvable at start."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.getaddrinfo(host, None)
            return
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise LaunchFailure(f"rendezvous host {host!r} did not resolve in {timeout:.0f} s: {exc}") from None
            _log.info("waiting for %s to resolve (%s)", host, exc)
            time.sleep(HOST_RESOLVE_INTERVAL_S)


class Supervisor:
    """Runs torchrun in its own process group, relays signals, keeps the tail of its stderr."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.argv, self.env, self.cwd = argv, env, cwd
        self.signals: list[int] = []
        self.tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._proc: subprocess.Popen[bytes] | None = None
        self._forwarded = False  # torchrun handles one signal; a second would cut its shutdown short

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.signals.append(signum)
        _log.info("received %s, forwarding to torchrun", signal.Signals(signum).name)
        self._forward(signum)

    def _forward(self, signum: int) -> None:
        if self._proc is None or self._proc.poll() is not None or self._forwarded:
            return  # not started yet (run() forwards it then), already gone, or already told
        self._forwarded = True
        try:
            os.killpg(self._proc.pid, signum)
        except ProcessLookupError:
            pass

    def _pump(self, stream: object) -> None:
        for raw in iter(stream.readline, b""):  # type: ignore[attr-defined]
            sys.stderr.buffer.write(raw)
            sys.stderr.buffer.flush()
            self.tail.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def run(self) -> int:
        """Start torchrun, wait for it, return its exit code (negative: killed by a signal)."""
        previous = {s: signal.signal(s, self._on_signal) for s in FORWARDED_SIGNALS}
        try:
            self._proc = subprocess.Popen(
                self.argv, env=self.env, cwd=self.cwd, stderr=subprocess.PIPE, start_new_session=True
            )
            if self.signals:  # a signal that arrived while torchrun was being started
                self._forward(self.signals[0])
            pump = threading.Thread(target=self._pump, args=(self._proc.stderr,), daemon=True)
            pump.start()
            code = self._proc.wait()
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


_GLOG_LINE = re.compile(r"^[IWEF]\d{4} ")  # torchrun's own log lines: "W1121 21:54:47.678000 …"


def useful_lines(lines: list[str]) -> list[str]:
    """stderr minus torchrun's noise (its log lines, its own traceback frames, separators)."""
    out: list[str] = []
    in_torch_frame = False
    for line in lines:
        stripped = line.strip()
        if stripped.startswith('File "'):
            in_torch_frame = "torch/distributed/" in stripped or "<frozen runpy>" in stripped
            if in_torch_frame:
                continue
        elif in_torch_frame and line.startswith("    "):
            continue
        else:
            in_torch_frame = False
        if not stripped or _GLOG_LINE.match(line) or set(stripped) <= set("^~=-"):
            continue
        out.append(line)
    return out


def outcome(code: int, signals: list[int], marker: Path, host: str, tail: list[str]) -> tuple[int, str | None]:
    """Exit code of the launcher and the failure message (None when not a failure)."""
    if signals and marker.exists():
        return EXIT_INTERRUPTED, None
    if code == 0:
        return 0, None
    exit_code = code if code > 0 else 128 - code
    if signals:
        why = f"stopped by {signal.Signals(signals[0]).name} before a checkpoint was committed"
    else:
        why = f"torchrun exited with code {code}"
    head = f"sm_dist launcher on {host}: {why}. Last output:\n"
    body = "\n".join(useful_lines(tail))
    room = FAILURE_MAX_CHARS - len(head)
    return exit_code, head + (body if len(body) <= room else "…" + body[-(room - 1):])


def launch(env: Mapping[str, str] | None = None) -> int:
    """Run the job on this host; returns the process exit code."""
    env = dict(os.environ if env is None else env)
    root = Path(env.get("SM_DIST_OPT_ML") or DEFAULT_OPT_ML)
    code_dir = root / "input" / "data" / "code"
    try:
        spec = JobSpec.from_json((code_dir / JOB_SPEC_FILENAME).read_text(encoding="utf-8"))
        topo = read_topology(root, env, spec, int(env.get("SM_NUM_GPUS") or count_gpus()))
        if topo.node_rank != 0:
            wait_for_host(topo.rdzv_host)
        argv = torchrun_argv(topo, spec, code_dir, env.get("TRAINING_JOB_NAME") or spec.job_name or "sm_dist")
    except (OSError, ValueError, LaunchFailure) as exc:  # ConfigError is a ValueError
        write_failure(root, f"sm_dist launcher: {exc}")
        _log.error("sm_dist launcher: %s", exc)
        return 2
    marker = root / "output" / "sm_dist_interrupted"
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.unlink(missing_ok=True)
    _log.info("host %s (%d/%d): %s", topo.current_host, topo.node_rank, topo.nnodes, " ".join(argv))
    sup = Supervisor(argv, worker_env(env, topo, root, code_dir, marker), code_dir)
    code = sup.run()
    exit_code, failure = outcome(code, sup.signals, marker, topo.current_host, list(sup.tail))
    if failure:
        write_failure(root, failure)
    _log.info("host %s: exit code %d", topo.current_host, exit_code)
    return exit_code


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # before torchrun runs there is nothing to save


def main() -> None:
    # As PID 1, a signal left at its default disposition is dropped by the kernel (FACTS.md §1.3).
    for sig in FORWARDED_SIGNALS:
        signal.signal(sig, _exit_on_signal)
    logging.basicConfig(level=logging.INFO, format="[sm_dist launcher] %(message)s", stream=sys.stderr)
    sys.exit(launch())


if __name__ == "__main__":
    main()
