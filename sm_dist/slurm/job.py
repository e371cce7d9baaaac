"""`SlurmJob`: the handle of a job sm_dist submitted to a Slurm cluster (a `JobHandle`).

It is rebuilt from the job's folder on the shared file system (`attach(name)` reads its record,
`sm_dist.contract.slurm_layout.RECORD_FILE`), so `sm-dist status|logs|stop|checkpoints NAME`
work from any shell that sees that folder. Its status is what Slurm says now (`cluster.job_record`:
scontrol, else sacct), mapped by `cluster.STATES`; once Slurm has forgotten the job, what the
batch script left in `exits`. Its logs are the nodes' files; its checkpoints the shared folder's
step folders with the contract's "committed".
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from sm_dist.contract import log_lines
from sm_dist.contract.chain import ChainPolicy
from sm_dist.contract.checkpoint import MANIFEST_NAME, committed_manifest, parse_step
from sm_dist.contract.job import CheckpointList, JobStatus, checkpoint_info, tensorboard_command
from sm_dist.contract.slurm_layout import (
    ATTEMPT_RE,
    BATCH_LOG,
    EXITS_FILE,
    HOSTS_FOLDER,
    LOGS_FOLDER,
    RECORD_FILE,
    first_failure,
    read_links,
    read_policy_record,
)
from sm_dist.errors import ConfigError
from sm_dist.jobspec import EXIT_INTERRUPTED
from sm_dist.notebook.metrics import Metrics, read_metrics
from sm_dist.slurm import cluster, debug
from sm_dist.slurm.options import SlurmOptions

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from sm_dist.notebook.plot import StrPath
    from sm_dist.slurm.view import SlurmView

#: What `stop()` writes in the exits file (the batch script, cancelled with its nodes, writes nothing).
STOPPED = "stopped"
#: How often a waiting client asks Slurm and reads the logs.
POLL_S = 1.0


@dataclass(frozen=True)
class SlurmCost:
    """Node-hours on the cluster; a Slurm cluster's price is its owner's (None here)."""

    node_hours: float
    usd: float | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.node_hours:,.4f} node-hours on the Slurm cluster (its price is the cluster owner's)"


@dataclass(frozen=True)
class SlurmSummary:
    """Status, steps, restarts, requeues, chaos and verification of a Slurm job."""

    name: str
    job_id: str
    status: str
    secondary: str
    failure_reason: str | None
    last_step: int | None
    restarts: int
    """Worker restarts torchrun made inside the job ("[sm_dist] restart on ..." lines)."""
    attempts: int
    """Times the batch script ran (1 + requeues)."""
    model_sha256: str | None
    chaos: tuple[str, ...] = ()
    verified: bool | None = None
    verification: str | None = None
    chain: str | None = None
    """The chain's last decision, taken after an attempt: why the run went on as the next link, or why it ended
    (`sm_dist.container.slurm_chain`); None before the first attempt ended."""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def __str__(self) -> str:
        text = (f"{self.name} (Slurm job {self.job_id}): {self.status} / {self.secondary}; last step "
                f"{self.last_step if self.last_step is not None else '-'}, {self.restarts} worker restarts, "
                f"{self.attempts} attempts")
        if self.failure_reason:
            text += f"\n  failure: {self.failure_reason}"
        if self.chaos:
            text += f"\n  chaos: {', '.join(self.chaos)}"
        if self.verification:
            text += f"\n  verify: {self.verification}"
        if self.chain:
            text += f"\n  chain: {self.chain}"
        return text

    def _repr_html_(self) -> str:
        """A notebook shows the printed summary, line for line, as a table (as a local job's)."""
        from sm_dist.markup import text_table

        return text_table(str(self))


@dataclass
class LogTail:
    """New lines of the job's node logs since the last read (offsets per file)."""

    logs: Path
    offsets: dict[Path, int] = field(default_factory=dict)

    def new_lines(self) -> Iterator[tuple[str, str]]:
        for path in sorted(self.logs.glob("*.log")):
            start = self.offsets.get(path, 0)
            try:
                with path.open("rb") as handle:
                    handle.seek(start)
                    data = handle.read()
            except OSError:
                continue
            complete = data.rfind(b"\n") + 1
            self.offsets[path] = start + complete
            for line in data[:complete].decode(errors="replace").splitlines():
                yield path.stem, line


class SlurmJob:
    """A job on a Slurm cluster, by its folder (`job_dir`) and Slurm job id."""

    def __init__(self, name: str, job_dir: Path, job_id: str, *, nodes: int, checkpoint_uri: str | None,
                 submitted_unix: float | None = None) -> None:
        self._name = name
        self.job_dir = job_dir
        self.job_id = job_id
        self.nodes = nodes
        self.checkpoint_uri = checkpoint_uri
        self.submitted_unix = submitted_unix if submitted_unix is not None else time.time()
        self.chaos: tuple[str, ...] = ()
        self.verified: bool | None = None
        self.verification: str | None = None

    @property
    def name(self) -> str:
        return self._name

    # -- the record on the shared file system --------------------------------------------------------
    def save(self) -> None:
        record = {"name": self.name, "job_id": self.job_id, "nodes": self.nodes,
                  "checkpoint_uri": self.checkpoint_uri, "submitted_unix": self.submitted_unix}
        (self.job_dir / RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, job_dir: Path) -> SlurmJob:
        record = json.loads((job_dir / RECORD_FILE).read_text(encoding="utf-8"))
        return cls(str(record["name"]), job_dir, str(record["job_id"]), nodes=int(record["nodes"]),
                   checkpoint_uri=record.get("checkpoint_uri"), submitted_unix=record.get("submitted_unix"))

    # -- JobHandle --------------------------------------------------------------------------------------
    def status(self) -> JobStatus:
        """What Slurm says of the job now, in the handle's words (cluster.STATES), with the chain's word: which link
        runs, or why the run ended (the batch script's decision after each attempt, `sm_dist.container.slurm_chain`)."""
        return self._with_chain(self._slurm_status())

    def _slurm_status(self) -> JobStatus:
        record = cluster.job_record(self.job_id)
        if record is None:
            return self._status_from_exits()
        state = record.get("JobState", "UNKNOWN").split()[0].rstrip("+")
        status, secondary, meaning = cluster.STATES.get(state, ("InProgress", state.title(), state))
        message = meaning
        reason = record.get("Reason", "None")
        if state == "PENDING" and reason not in ("None", ""):
            message = f"waiting for nodes: {reason} (squeue's reason)"
        failure = None
        if status == "Failed":
            failure = self._host_failure() or f"{meaning} (ExitCode={record.get('ExitCode', '?')})"
        return JobStatus(name=self.name, status=status, secondary=secondary, message=message, failure_reason=failure)

    def _with_chain(self, status: JobStatus) -> JobStatus:
        links = read_links(self.job_dir)
        last = links[-1] if links else None
        attempt = self._attempt()
        if status.done:
            if last is None or last.get("attempt") != attempt or status.status == "Stopped" and \
                    status.secondary == "Stopped":
                return status  # the last attempt took no decision (sm-dist stop, a node failure Slurm did not requeue)
            note = f"chain: {last['reason']}"
            if last.get("action") == "stop" and last.get("exit_code") == EXIT_INTERRUPTED:
                # the run ended at a time limit's saved stop: what a cloud chain's last link says
                return dataclasses.replace(status, status="Stopped", secondary="MaxRuntimeExceeded", message=note,
                                           failure_reason=None)
            return dataclasses.replace(status, message=f"{status.message}; {note}" if status.message else note)
        most = self._max_links()
        note = f"link {attempt + 1}" + (f" of at most {most}" if most else "")
        if last is not None and last.get("action") == "next":
            note += f" (after link {last.get('link')}: {last['reason']})"
        return dataclasses.replace(status, message=f"{status.message}; {note}" if status.message else note)

    def _attempt(self) -> int:
        """The newest attempt's restart count (the batch script's first line each time it runs)."""
        try:
            text = (self.job_dir / BATCH_LOG).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return 0
        return max((int(m.group(2)) for line in text.splitlines() if (m := ATTEMPT_RE.match(line))), default=0)

    def _max_links(self) -> int | None:
        try:
            return int(ChainPolicy.from_tag(str(read_policy_record(self.job_dir)["policy"])).max_links)
        except (OSError, ValueError, KeyError):
            return None

    def _exits(self) -> list[tuple[int, int]]:
        """(restart count, exit code) per attempt the batch script recorded."""
        return [(int(a), int(b)) for a, b in self._exit_lines() if a.isdigit()]

    def _exit_lines(self) -> list[list[str]]:
        try:
            text = (self.job_dir / EXITS_FILE).read_text(encoding="utf-8")
        except OSError:
            return []
        return [line.split() for line in text.splitlines() if len(line.split()) == 2]

    def _status_from_exits(self) -> JobStatus:
        if any(a == STOPPED for a, _ in self._exit_lines()):
            return JobStatus(name=self.name, status="Stopped", secondary="Stopped", message="stopped (sm-dist stop)")
        exits = self._exits()
        if not exits:
            return JobStatus(name=self.name, status="Failed", secondary="Unknown",
                             message=f"Slurm no longer knows job {self.job_id} and it left no exit record",
                             failure_reason=self._host_failure())
        code = exits[-1][1]
        if code == 0:
            return JobStatus(name=self.name, status="Completed", secondary="Completed")
        return JobStatus(name=self.name, status="Failed", secondary="Failed", message=f"exit code {code}",
                         failure_reason=self._host_failure() or f"a node's task exited with code {code}")

    def _host_failure(self) -> str | None:
        """The first node's output/failure (PID 1's FailureReason), as the cloud shows it."""
        found = first_failure(self.job_dir)
        return f"{found[0]}: {found[1]}" if found else None

    def wait(self, out: TextIO | None = None, on_line: Callable[[str, str], None] | None = None,
             on_tick: Callable[[], None] | None = None, view: SlurmView | None = None,
             sleep: Callable[[float], None] = time.sleep) -> JobStatus:
        """Block until the job is done; `out`: echo each node's lines there, prefixed by node; `on_line(node, line)`
        for each line, `on_tick()` once per poll (a timed chaos kill); `view`: the live view, fed each line and
        shown once per poll (`sm_dist.slurm.view`)."""
        tail = LogTail(self.job_dir / LOGS_FOLDER)
        if view is not None:
            view.start()
        while True:
            status = self.status()
            for node, line in tail.new_lines():
                if out is not None:
                    print(f"[{node}] {line}", file=out, flush=True)
                if on_line is not None:
                    on_line(node, line)
                if view is not None:
                    view.line(node, line)
            if on_tick is not None and not status.done:
                on_tick()
            if status.done:
                for node, line in tail.new_lines():
                    if out is not None:
                        print(f"[{node}] {line}", file=out, flush=True)
                    if view is not None:
                        view.line(node, line)
            if view is not None:
                view.show(status)
            if status.done:
                return status
            sleep(POLL_S)

    def logs(self, follow: bool = False) -> Iterator[str]:
        """Every node's lines, each prefixed "[node] " (the batch script's as "[batch] ")."""
        tail = LogTail(self.job_dir / LOGS_FOLDER)
        while True:
            for node, line in tail.new_lines():
                yield f"[{node}] {line}"
            if not follow or self.status().done:
                if follow:
                    for node, line in tail.new_lines():
                        yield f"[{node}] {line}"
                return
            time.sleep(POLL_S)

    def stop(self) -> JobStatus:
        """scancel: SIGTERM to every node's PID 1 (the ranks may commit a checkpoint), SIGKILL after the
        cluster's KillWait; returns once Slurm says the job ended."""
        if not self.status().done:
            cluster.cancel(self.job_id)
            # the batch script is ended with its nodes and writes no exit record: say it was stopped, for when
            # Slurm has forgotten the job (MinJobAge)
            with (self.job_dir / EXITS_FILE).open("a", encoding="utf-8") as exits:
                exits.write(f"{STOPPED} {STOPPED}\n")
        while True:
            status = self.status()
            if status.done:
                return status
            time.sleep(POLL_S)

    def checkpoints(self) -> CheckpointList:
        """Step folders in the job's checkpoint folder, newest first (committed: the manifest parses)."""
        uri = self.checkpoint_uri
        if uri is None:
            return CheckpointList()
        if uri.startswith("s3://"):
            raise ConfigError("checkpoint_uri", uri, "list it with `aws s3 ls`: the Slurm handle lists shared folders")
        folder = Path(uri)
        infos = []
        for step_dir in sorted(folder.iterdir()) if folder.is_dir() else []:
            step = parse_step(step_dir.name)
            if step is None or not step_dir.is_dir():
                continue
            files = [p for p in step_dir.rglob("*") if p.is_file()]
            manifest = step_dir / MANIFEST_NAME
            text = manifest.read_bytes() if manifest.is_file() else None
            infos.append(checkpoint_info(step, f"{folder}/{step_dir.name}/",
                                         committed_manifest(text, where=str(manifest)),
                                         total_bytes=sum(p.stat().st_size for p in files), files=len(files)))
        return CheckpointList(sorted(infos, key=lambda info: info.step, reverse=True))

    def cost(self) -> SlurmCost:
        """Node-hours since submission (the cluster's own price is not sm_dist's to know)."""
        return SlurmCost(node_hours=round(self.nodes * (time.time() - self.submitted_unix) / 3600, 4))

    def debug(self, host: str = "algo-1", command: str | None = None, start: bool = False) -> int:
        """A shell on `host`'s node beside the running job (`srun --overlap`: `sm_dist.slurm.debug`), its /opt/ml
        folder and the script's variables; `command`: run that there instead. `start` is the cloud's (SSM)."""
        return debug.shell(self, host, command)

    def stacks(self) -> int:
        """Print every running rank's Python stack, per node."""
        return debug.stacks(self)

    def lines(self) -> list[tuple[str, str]]:
        return list(LogTail(self.job_dir / LOGS_FOLDER).new_lines())

    def summary(self) -> SlurmSummary:
        status = self.status()
        last_step = final = None
        restarts = 0
        started: set[str] = set()
        for node, line in self.lines():
            if node == "batch" and (match := ATTEMPT_RE.match(line)):
                started.add(match.group(2))
            parsed = log_lines.read_line(line)
            if isinstance(parsed, log_lines.StepLine):
                last_step = parsed.step
            elif isinstance(parsed, log_lines.FinalLine):
                final = parsed.model_sha256
                last_step = parsed.step
            elif log_lines.read_restart(line) is not None:
                restarts += 1
        attempts = len(started)
        links = read_links(self.job_dir)
        return SlurmSummary(name=self.name, job_id=self.job_id, status=status.status, secondary=status.secondary,
                            failure_reason=status.failure_reason, last_step=last_step, restarts=restarts,
                            attempts=max(len(self._exits()), attempts, 1), model_sha256=final, chaos=self.chaos,
                            verified=self.verified, verification=self.verification,
                            chain=str(links[-1]["reason"]) if links else None)

    def model_sha256(self) -> str | None:
        return self.summary().model_sha256

    def metrics(self) -> Metrics:
        """The job's logged metrics (step, loss, learning rate, ...), read from its nodes' logs: sm_dist's metric
        lines or Hugging Face Trainer's log dicts, as a local job's. A table in a notebook."""
        return read_metrics(self.logs())

    def plot(self, *names: str, path: StrPath | None = None, ax: Axes | None = None) -> Axes:
        """The loss curve (and learning rate, throughput) of the job so far, resumes marked; `names` picks the
        metrics. Inline in a notebook (matplotlib: pip install 'sm_dist[plot]')."""
        return self.metrics().plot(*names, path=path, ax=ax)

    def _repr_html_(self) -> str:
        """A notebook shows the summary as a table (Slurm asked now), and where to look next."""
        from sm_dist.markup import escape, text_table

        try:
            summary = self.summary()
        except Exception as exc:  # noqa: BLE001 - showing a job must not raise; say why it shows less
            return f"<p>{escape(repr(self))}: status unavailable ({escape(exc)})</p>"
        more = (f'<p style="font-size:0.9em;opacity:0.75">logs in {escape(self.job_dir / LOGS_FOLDER)}: '
                "<code>job.logs()</code> · metrics: <code>job.metrics()</code>, <code>job.plot()</code> · "
                "<code>job.checkpoints()</code></p>")
        return text_table(str(summary), extra=more)

    def tensorboard(self, start: bool = False, port: int = 6006) -> str:
        """`tensorboard --logdir` on the nodes' TensorBoard folders."""
        return tensorboard_command(str(self.job_dir / HOSTS_FOLDER), start=start, port=port)

    def __repr__(self) -> str:
        return f"SlurmJob({self.name!r}, job {self.job_id}, {self.job_dir})"


def attach(name: str, options: SlurmOptions | None = None) -> SlurmJob | None:
    """The Slurm job `name` staged under the options' root (default: $SM_DIST_SLURM_ROOT, ./sm-dist-slurm);
    None when there is none."""
    job_dir = (options or SlurmOptions()).job_root(name)
    return SlurmJob.load(job_dir) if (job_dir / RECORD_FILE).is_file() else None


def find(name: str, region: str | None = None) -> SlurmJob | str:
    """`sm_dist.launch.attach`'s finder: the Slurm job `name` under the default root, else where it looked.
    `region` is not asked for: a Slurm job has none."""
    return attach(name) or f"on Slurm (no job of that name under {SlurmOptions().job_root(name).parent})"


__all__ = ["SlurmCost", "SlurmJob", "SlurmSummary", "attach", "find"]
