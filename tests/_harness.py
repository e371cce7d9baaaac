"""The suite's one multi-process harness: free ports, clean child environments, launching ranks.

Every test that starts real ranks (tests/runtime, tests/checkpoint, tests/workloads) goes through
here, so a port, a leaked launcher variable or a hung group is handled in one place. Timeouts only
guard against a hang; they never assert speed (speed is measured in tests/bench/, side by side).

Run as a script, this file is the child side of `call_in_ranks`:
`python _harness.py MODULE:FUNCTION ARGS_JSON OUT_JSON WORKER_DIR` imports MODULE from WORKER_DIR,
calls FUNCTION(**ARGS) and writes its JSON result to OUT_JSON.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

#: Guard against a hung process group: far above what a torch start-up takes on a loaded 2-core machine.
HANG_GUARD_S = 600
#: Output kept per process in a failure message.
TAIL_CHARS = 4000
#: What a launcher (torchrun, Slurm, SageMaker) sets to tell a process who it is. A child gets none of
#: these from the test process; it gets exactly the ones its test passes.
LAUNCHER_VARS = re.compile(
    r"^(SM_(?!DIST_).*|SAGEMAKER_.*|TRAINING_JOB_.*|SLURM_.*|TORCHELASTIC_.*|PET_.*|RANK|LOCAL_RANK|WORLD_SIZE|"
    r"LOCAL_WORLD_SIZE|GROUP_RANK|GROUP_WORLD_SIZE|ROLE_RANK|ROLE_WORLD_SIZE|ROLE_NAME|MASTER_ADDR|MASTER_PORT)$"
)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (never assume 29500 or 29400 is)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test's environment without launcher variables, one thread per process, plus `extra`.

    One thread each: two cores are shared by every rank of every test running at once.
    """
    env = {key: value for key, value in os.environ.items() if not LAUNCHER_VARS.match(key)}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.update(extra or {})
    return env


def rank_env(rank: int, world: int, port: int, nodes: int = 1) -> dict[str, str]:
    """torchrun's variables for `rank` of `world` processes spread evenly over `nodes` hosts."""
    per_node = world // nodes
    return {
        "RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank % per_node),
        "LOCAL_WORLD_SIZE": str(per_node), "GROUP_RANK": str(rank // per_node),
        "GROUP_WORLD_SIZE": str(nodes), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
    }


def torchrun_argv(port: int, nproc: int, script: str | Path, *args: str, max_restarts: int | None = None,
                  monitor_interval: float | None = None) -> list[str]:
    """`python -m torch.distributed.run` with c10d rendezvous on 127.0.0.1:`port`, one node."""
    flags = ["--nnodes=1", f"--nproc-per-node={nproc}", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}"]
    if max_restarts is not None:
        flags.append(f"--max-restarts={max_restarts}")
    if monitor_interval is not None:
        flags.append(f"--monitor-interval={monitor_interval}")
    return [sys.executable, "-m", "torch.distributed.run", *flags, str(script), *args]


class Group:
    """Processes started together. Output goes to files (a full pipe cannot stall a rank)."""

    def __init__(self, argvs: Sequence[Sequence[str]], envs: Sequence[Mapping[str, str]],
                 cwd: str | Path | None = None) -> None:
        self.procs: list[subprocess.Popen] = []
        self._logs: list[tuple[IO[bytes], IO[bytes]]] = []
        self._texts: list[str] | None = None  # the outputs, once every process has ended
        self.output = ""
        for argv, env in zip(argvs, envs, strict=True):
            # open as long as the group: closed by _finish() once the processes have ended
            out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()  # noqa: SIM115
            self._logs.append((out, err))
            self.procs.append(subprocess.Popen(list(argv), env=dict(env), cwd=cwd, stdout=out, stderr=err))

    def wait(self, timeout: float = HANG_GUARD_S) -> list[int]:
        """Exit codes by process; `output` then holds what they printed (stdout, then stderr, each)."""
        try:
            codes = [proc.wait(timeout=timeout) for proc in self.procs]
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"process group hung for {timeout} s (killed)\n{self.report()}") from None
        self._finish()
        return codes

    def outputs(self) -> list[str]:
        """What each process printed (so far): its stdout, then its stderr."""
        if self._texts is not None:
            return self._texts
        return ["".join(_read(handle) for handle in pair) for pair in self._logs]

    def _finish(self) -> None:
        self._texts = self.outputs()
        self.output = "".join(self._texts)
        for pair in self._logs:
            for handle in pair:
                handle.close()

    def report(self) -> str:
        """Exit code and output tail of every process, for an assertion message."""
        parts = []
        for index, (proc, text) in enumerate(zip(self.procs, self.outputs(), strict=True)):
            parts.append(f"--- process {index} exit {proc.poll()}\n{text[-TAIL_CHARS:]}")
        return "\n".join(parts)

    def kill(self) -> None:
        """SIGKILL whatever still runs, and reap it."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.wait()
        if self._texts is None:
            self._finish()


def _read(handle: IO[bytes]) -> str:
    """The file's content so far, read without moving the offset a running child writes at."""
    fd = handle.fileno()
    return os.pread(fd, os.fstat(fd).st_size, 0).decode("utf-8", "replace")


def wait_until(predicate: Callable[[], object], procs: Sequence[subprocess.Popen] | Group = (), timeout: float = 60.0,
               interval: float = 0.1, what: str = "") -> object:
    """Poll `predicate` until it returns something truthy (returned), with a deadline.

    Fails at once, naming `what` and the exit code, when one of `procs` ends first (the condition
    can no longer come true), and after `timeout` seconds (a hang guard, never a speed check).
    """
    members = procs.procs if isinstance(procs, Group) else list(procs)
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        ended = [(proc.args, proc.returncode) for proc in members if proc.poll() is not None]
        if ended:
            detail = procs.report() if isinstance(procs, Group) else ""
            raise AssertionError(f"waiting for {what or 'a condition'}: a process ended first {ended}\n{detail}")
        if time.monotonic() > deadline:
            raise AssertionError(f"waiting for {what or 'a condition'}: not true after {timeout} s")
        time.sleep(interval)


def start(argv: Sequence[str], env: Mapping[str, str], cwd: str | Path | None = None) -> Group:
    """One process (e.g. torchrun, which starts the ranks itself)."""
    return Group([argv], [env], cwd)


def start_ranks(argv: Sequence[str], envs: Sequence[Mapping[str, str]], cwd: str | Path | None = None) -> Group:
    """The same command once per rank, rank i with envs[i] (no torchrun agent)."""
    return Group([argv] * len(envs), envs, cwd)


def call_in_ranks(target: str, args: Mapping[str, Any], envs: Sequence[Mapping[str, str]], worker_dir: Path,
                  cwd: str | Path | None = None) -> list[Any]:
    """Run `target` ("module:function", module in `worker_dir`) in one process per env; results by rank.

    A failing rank fails the test with every rank's exit code and output tail.
    """
    with tempfile.TemporaryDirectory() as tmp:
        outs = [Path(tmp) / f"rank{rank}.json" for rank in range(len(envs))]
        argvs = [[sys.executable, __file__, target, json.dumps(args), str(out), str(worker_dir)] for out in outs]
        group = Group(argvs, envs, cwd)
        codes = group.wait()
        assert codes == [0] * len(codes), group.report()
        return [json.loads(out.read_text()) for out in outs]


def _main() -> None:
    target, args, out, worker_dir = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
    sys.path.insert(0, worker_dir)
    module_name, func = target.split(":")
    result = getattr(importlib.import_module(module_name), func)(**args)
    Path(out).write_text(json.dumps(result))


if __name__ == "__main__":
    _main()


def skip_or_fail(reason: str, installed_by: str) -> None:
    """A test whose system package or privilege is missing: skipped here, failed in CI (CI=true), where a skip
    would be a pass that tested nothing. `installed_by` names what provides it there (.ci/run's apt-get)."""
    import pytest  # imported here: this file is also the ranks' child script

    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: a test may not skip; {installed_by})")
    pytest.skip(reason)
