"""Run one local job: attempts of N host agents, checkpoint sync and chaos around them.

An attempt is what one set of SageMaker instances runs: fresh /opt/ml folders, checkpoints
restored from the URI, every host's container command started, then supervised until all first
processes exit. As on SageMaker, one host failing fails the job (the other hosts are stopped).
A spot interruption (chaos sigterm) stops every host with SIGTERM + grace and starts a new
attempt, like a managed-spot restart; nothing else restarts the whole job. SIGINT or SIGTERM to this
process stops every host, then raises `Interrupted` (`sm_dist.local.interrupt`).
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import sys
import threading
import time
from pathlib import Path

from sm_dist.contract import hang
from sm_dist.contract.checkpoint_whole import read_removed
from sm_dist.contract.container import (
    MASTER_PORT_ENV,
    RDZV_PORT_ENV,
    nproc_per_node,
)
from sm_dist.contract.faults import FAULT_ENV, hook_env_value
from sm_dist.contract.log_lines import AloneLine, FaultLine, read_line, read_restart
from sm_dist.local import interrupt, mountns, tb_sync
from sm_dist.local.agent import HostAgent
from sm_dist.local.chaos_driver import ChaosDriver
from sm_dist.local.ckpt_sync import CheckpointSync
from sm_dist.local.config import LocalJobConfig
from sm_dist.local.failure import explain_failure, failed_first
from sm_dist.local.hostenv import host_environment, host_files_env
from sm_dist.local.layout import HostRoot, create_host_root, outside_warnings, remap
from sm_dist.local.progress import Progress
from sm_dist.local.restarts import Restarts
from sm_dist.local.run_records import Outcome as Outcome  # importable from here as before
from sm_dist.local.run_records import RunSettings as RunSettings

#: SageMaker keeps only the first 1024 characters of output/failure (FailureReason, docs/PLATFORM.md §1.1).
FAILURE_CHARS = 1024
#: How often the supervisor looks at the hosts and fires due chaos.
TICK_SECONDS = 0.2
_log = logging.getLogger(__name__)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalRunner:
    """Runs a `LocalJobConfig` to the end, attempt after attempt."""

    def __init__(self, config: LocalJobConfig, settings: RunSettings) -> None:
        self.config = config
        self.settings = settings
        self.progress = Progress()
        self.chaos = ChaosDriver(settings.faults, s3_fault_switch=settings.s3_fault_switch)
        self.restarts = Restarts()
        self.chaos.group.expected_world_size = self._workers()
        self.progress.on_step(self.chaos.on_step)
        self.chaos.on_new_workers = self.progress.new_workers
        self.outcome = Outcome()
        self.agents: list[HostAgent] = []
        self.layouts: list[HostRoot] = []
        self._sync: CheckpointSync | None = None
        self._job_causes: list[str] = []  # why each whole-job restart happened
        self._fatal_hang: str | None = None
        self._fatal_hang_host: str | None = None  # the host whose PID 1 printed it: the stuck rank's
        self._removed: dict[str, dict[str, str]] = {}  # a cut-short checkpoint's path -> {host that removed it: why}
        self.stop = interrupt.StopSignals()

    def _on_line(self, host: str, line: str) -> None:
        hook = read_line(line)
        if isinstance(hook, FaultLine):  # the checkpointer's SM_DIST_FAULT hook fired (chaos crash-in-save)
            self.chaos.fired.append(hook.fault)
            self.chaos.events.append(f"{hook.fault}: the checkpointer's fault hook killed a rank on {host}")
        elif isinstance(hook, AloneLine):  # sm_dist.runtime.run_script: what the rank's process groups did
            self.chaos.group.trained_alone(host, hook.rank, hook.why)
        removed = read_removed(line) if hook is None else None
        if removed is not None:  # a worker removed a checkpoint a fault cut short: the summary says which, and why
            self._note_removed(*removed)
        restart = read_restart(line) if hook is None else None
        if restart is not None:  # a host's PID 1 let torchrun restart its workers: why
            self.restarts.add(restart, self.chaos.fired)
            self._explain_restarts()
        found = hang.hang_text(line) if hook is None else None
        if found is not None and found[1] and "not restarted" in found[0]:  # a stop is the summary's error,
            if self._fatal_hang is None:  # though the stuck rank's host be stopped before it says so
                self._fatal_hang, self._fatal_hang_host = found[0], host
        elif found is not None and found[1]:
            if f"hang: {found[0]}" not in self.outcome.warnings:  # PID 1's hang watch named a stopped rank
                self.outcome.warnings.append(f"hang: {found[0]}")
        self.progress.feed(line, host)
        self.settings.on_line(host, line)

    def _note_removed(self, host: str, path: str, why: str) -> None:
        """One warning per removed checkpoint, naming every host that removed it and, when the hosts found it cut
        short at different points (how far each host's own save got when the fault hit: one wrote its shard, the
        other nothing yet), each host's reason."""
        seen = self._removed.setdefault(path, {})
        before = self._removed_warning(path, seen) if seen else None
        seen.setdefault(host, why)
        text = self._removed_warning(path, seen)
        if before in self.outcome.warnings:
            self.outcome.warnings[self.outcome.warnings.index(before)] = text
        elif text not in self.outcome.warnings:
            self.outcome.warnings.append(text)

    @staticmethod
    def _removed_warning(path: str, seen: dict[str, str]) -> str:
        whys = set(seen.values())
        why = whys.pop() if len(whys) == 1 else "; ".join(f"{host}: {why}" for host, why in seen.items())
        return (f"{path} was not written to its end ({why}): a fault hit the save; removed on {', '.join(seen)} "
                "before the script resumed, from the newest whole checkpoint")

    def run(self) -> Outcome:
        """Run attempts until one is not interrupted; return the outcome. SIGINT or SIGTERM meanwhile: every
        host stopped (`interrupt.INTERRUPT_GRACE_S` of grace), then `interrupt.Interrupted` is raised."""
        with self.stop:
            outcome = self._run()
        if self.stop.signum is not None:
            raise interrupt.Interrupted(self.stop.signum, f"; logs: {self.settings.job_root / 'logs'}")
        return outcome

    def _run(self) -> Outcome:
        for attempt in range(self.settings.max_job_restarts + 1):
            codes, interrupted = self._attempt(attempt)
            self.outcome.exit_codes.append(codes)
            if not interrupted:
                break
            if attempt == self.settings.max_job_restarts:
                _log.error("interrupted %d times; giving up", attempt + 1)
                break
            self.outcome.job_restarts += 1
            spot = next((f for f in reversed(self.chaos.fired) if f.startswith("sigterm")), None)
            self._job_causes.append(
                f"whole-job restart {self.outcome.job_restarts}: spot interruption{f' (chaos {spot})' if spot else ''}"
                f": every host stopped (SIGTERM, {self.settings.grace_seconds:g} s of grace, SIGKILL), the job started "
                "again on new hosts from the checkpoint URI")
            self.progress.new_attempt()
            self.chaos.new_attempt()
            _log.warning("restarting the job (managed-spot restart %d)", self.outcome.job_restarts)
        self._finish()
        return self.outcome

    def _finish(self) -> None:
        last = self.outcome.exit_codes[-1] if self.outcome.exit_codes else {}
        ok = bool(last) and all(code == 0 for code in last.values())
        self.outcome.status = "Completed" if ok else ("Stopped" if self.outcome.stopped_reason else "Failed")
        for layout in self.layouts:
            if layout.failure_file.is_file():
                text = layout.failure_file.read_text(encoding="utf-8", errors="replace")
                self.outcome.failures[layout.host] = text[:FAILURE_CHARS]
        if not ok and not self.outcome.failures:
            self.outcome.failures = {h: f"exit code {c}" for h, c in last.items() if c != 0}
        if not ok:
            logs = {layout.host: self.log_path(layout.host) for layout in self.layouts}
            explain_failure(self.outcome, logs, last)
        self._explain_stop()
        self._explain_restarts()
        self.outcome.ended = time.time()

    def _explain_restarts(self) -> None:
        """`outcome.restart_causes` from the restart lines so far and the restarts /proc showed."""
        self.outcome.restart_causes = self.restarts.explained(self.chaos.in_job_restarts) + self._job_causes

    def _explain_stop(self) -> None:
        """The summary's error when the script did not fail: its MaxRuntime, or a hang PID 1 stopped."""
        if self.outcome.stopped_reason == "MaxRuntimeExceeded":
            if self.outcome.status == "Completed":  # every host ended well as the limit came: nothing went wrong
                return
            self.outcome.error = (f"stopped at its MaxRuntime (MaxRuntimeInSeconds={self.settings.max_runtime_s:g} "
                                  "reached): status Stopped, MaxRuntimeExceeded, as SageMaker reports it")
            return
        hangs = sorted((not text.startswith(hang.FAILURE_PREFIX), host, text)
                       for host, text in self.outcome.failures.items()
                       if text.startswith((hang.FAILURE_PREFIX, hang.FAILURE_WAITING_PREFIX)))
        if hangs:  # PID 1 stopped the job on a hang: the rank it named first (its log's place aside)
            self.outcome.error = hangs[0][2].splitlines()[0].split(". logs: ", 1)[0]
        elif self._fatal_hang is not None and self.outcome.status == "Failed":
            # the stuck rank's PID 1 gave up on the hang, but another host's peer error ended the job first
            # (gloo's `Connection closed by peer` as the stuck rank was killed): the hang is still the cause
            self.outcome.error = own = hang.FAILURE_PREFIX + self._fatal_hang
            host = self._fatal_hang_host
            if host is not None:  # and the stuck rank's host has it as its own reason, not only "stopped after algo-1"
                before = self.outcome.host_outcomes.get(host)
                self.outcome.host_outcomes[host] = f"{own}; then {before}" if before and before != "done" else own
                failure = self.outcome.failures.get(host, "")
                if not failure.startswith(hang.FAILURE_PREFIX):
                    self.outcome.failures[host] = own if not failure or failure.startswith("stopped") else f"{own}\n{failure}"

    def _attempt(self, attempt: int) -> tuple[dict[str, int], bool]:
        hosts_dir = self.settings.job_root / "hosts"
        uri = self.config.checkpoint_uri
        self.layouts = [create_host_root(self.config, h, hosts_dir / h, uri) for h in self.config.hosts]
        started = time.time()
        sync = self._sync = self._start_sync(attempt)
        tb = tb_sync.start(self.settings.tensorboard_store, self.layouts, self.settings.sync_interval) \
            if self.settings.tensorboard_store is not None else None
        self.agents = self._make_agents(attempt)
        self.chaos.attach(self.agents, {lay.host: lay.container_path(self.config.checkpoint_local_path)
                                        for lay in self.layouts})
        try:
            for agent in self.agents:
                agent.start()
            interrupted = self._supervise()
        finally:
            self.chaos.detach()
            codes = self._stop_all(self.stop.grace(self.settings.grace_seconds))
            shutil.rmtree(self.settings.job_root / "tmp", ignore_errors=True)  # the hosts' /tmp (hostenv)
            for each in (sync, tb):
                if each is not None:
                    if each is tb:
                        self.outcome.tensorboard_uploads_running += each.uploads
                    each.stop(flush=True)
                    self.outcome.warnings.extend(w for w in each.problems() if w not in self.outcome.warnings)
            self.outcome.warnings.extend(w for w in outside_warnings(self.config, self.layouts, started) if w not in self.outcome.warnings)
        _log.debug("attempt %d ended: %s%s", attempt, codes, " (interrupted)" if interrupted else "")
        return codes, interrupted

    def _start_sync(self, attempt: int) -> CheckpointSync | None:
        if self.settings.store is None:
            self.outcome.restored_files.append(0)
            return None
        folders = {lay.host: lay.container_path(self.config.checkpoint_local_path) for lay in self.layouts}
        sync = CheckpointSync(self.settings.store, folders, self.settings.sync_interval)
        self.outcome.restored_files.append(sync.restore())
        sync.start()
        return sync

    def _make_agents(self, attempt: int) -> list[HostAgent]:
        extra = {"PYTHONUNBUFFERED": "1", **self.settings.extra_env}
        if "OMP_NUM_THREADS" not in os.environ:
            # N emulated instances share this machine's cores: one intra-op pool per worker would
            # oversubscribe them (torchrun itself sets 1 only when a host runs several workers)
            extra["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // self._workers()))
        if any(f.kind == "hang" for f in self.settings.faults):  # chaos hang:STEP: the ranks arm its handler
            extra[hang.CHAOS_HANG_ENV] = "1"
        hook = hook_env_value(self.settings.faults)
        if hook and attempt == 0:
            extra[FAULT_ENV] = hook
        # SageMaker's fixed ports (29400, 7777) may be taken on this machine: free ones, the same for every host
        ports = {RDZV_PORT_ENV: free_port(), MASTER_PORT_ENV: free_port()}
        # one choice for the whole job: every host by name in its own /opt/ml, or every host remapped
        private = self.settings.private_opt_ml and mountns.unshare_prefix() is not None
        self.outcome.shared_opt_ml = not private
        hosts_file = self._hosts_file() if private else None
        agents = []
        for layout in self.layouts:
            env = host_environment(self.config, layout, ports, private=private, extra=extra)
            env.update(host_files_env(self.settings.job_root / "tmp" / layout.host, self.log_path(layout.host)))
            # the container's python3 is this interpreter here: same torch, same sm_dist
            argv = [sys.executable if a in ("python", "python3") else a if private else remap(a, layout.root)
                    for a in self.config.container_command]
            # (a command that is not there starts unwrapped: its error is then Popen's, at once)
            if private and shutil.which(argv[0]) is not None:
                argv = mountns.command(layout.root, argv, hosts_file) or argv
            code_dir = layout.channel_dir("code")
            cwd = code_dir if code_dir.is_dir() else layout.root
            agents.append(HostAgent(layout.host, argv, env, cwd=cwd, log_path=self.log_path(layout.host),
                                    on_line=self._on_line))
        return agents

    def _hosts_file(self) -> Path:
        """The job's /etc/hosts: this machine's, plus algo-1 ... algo-N (sm_dist.local.mountns)."""
        path = self.settings.job_root / "etc-hosts"
        try:
            machine = Path(mountns.ETC_HOSTS).read_text(encoding="utf-8")
        except OSError:
            machine = "127.0.0.1\tlocalhost\n"
        path.write_text(mountns.hosts_file_text(self.config.hosts, machine), encoding="utf-8")
        return path

    def log_path(self, host: str) -> Path:
        """Where a host's output goes (every attempt appends)."""
        return self.settings.job_root / "logs" / f"{host}.log"

    def _workers(self) -> int:
        return self.config.instance_count * nproc_per_node(self.settings.extra_env, self.settings.nproc_per_host)

    def _supervise(self) -> bool:
        """Wait for every host; True if chaos interrupted the job (spot)."""
        while True:
            if self._sync is not None:
                self._sync.ensure_running()  # uploads never stop silently
            if self.chaos.tick(self.agents):
                return True
            self._explain_restarts()  # the restart count may come after a host's line
            if self.settings.on_tick is not None:
                self.settings.on_tick(self)
            codes = [agent.poll() for agent in self.agents]
            if all(code is not None for code in codes):
                return False
            if any(code not in (None, 0) for code in codes):
                self.outcome.first_failed, self.outcome.stopped_hosts = failed_first([a.host for a in self.agents], codes)
                return False
            if self.stop.signum is not None:  # SIGINT/SIGTERM to local mode: the attempt stops every host
                return False
            limit = self.settings.max_runtime_s
            if limit is not None and time.time() - self.outcome.started > limit:
                _log.error("MaxRuntimeInSeconds=%d exceeded; stopping the job", limit)
                self.outcome.stopped_reason = "MaxRuntimeExceeded"
                return False
            # a tick, or less when a host ends: its exit is seen at once, not up to a tick later
            next(a for a, code in zip(self.agents, codes) if code is None).wait_exit(TICK_SECONDS)

    def _stop_all(self, grace: float) -> dict[str, int]:
        """Stop every host in parallel (SIGTERM, grace, SIGKILL); exit codes by host."""
        codes: dict[str, int] = {}

        def stop(agent: HostAgent) -> None:
            codes[agent.host] = agent.stop(grace)

        threads = [threading.Thread(target=stop, args=(a,)) for a in self.agents if a.pid is not None]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                thread.join()
        except BaseException:  # a second stop signal (interrupt.Interrupted): no more grace
            for agent in self.agents:
                agent.teardown()
            raise
        return {a.host: codes[a.host] for a in self.agents if a.host in codes}
