"""A job's logged metrics as a table — step, loss, learning rate, throughput — read from its logs.

Two kinds of line are read, each by the module that defines it: sm_dist's metric line
(`[sm_dist] step=12 loss=0.4312 lr=0.001`, `contract.log_lines.parse_metrics`; its `resumed` line
marks where a run restarted) and Hugging Face Trainer's log dict, whose step is the position of the
Trainer's tqdm bar on that host (`contract.third_party_lines`). `LocalJob.metrics()` reads the
hosts' log files, the cloud `Job.metrics()` CloudWatch Logs (the lines SageMaker's metric
definitions scrape). A step logged twice — a resumed run repeats the steps after its checkpoint —
keeps its last values. Nothing is made up: a column a job never logged is absent, a cell it did
not log is None.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sm_dist.contract.log_lines import PREFIX, ResumedLine, parse_metrics, read_line
from sm_dist.contract.third_party_lines import tqdm_position, trainer_log
from sm_dist.markup import escape, table

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from sm_dist.notebook.plot import StrPath

#: Columns shown first, in this order; the learning rate is "lr" whatever the logger named it.
FIRST = ("step", "epoch", "loss", "lr")
ALIASES = {"learning_rate": "lr"}
#: A throughput's name: samples, tokens or steps per second.
THROUGHPUT_RE = re.compile(r"(_per_s|_per_sec|_per_second|/s|throughput)$")
#: Rows an HTML table shows at each end of a long run.
HTML_EDGE_ROWS = 8
_HOST_RE = re.compile(r"^\[(algo-\d+)\] ")
SM_DIST_SOURCE = "sm_dist metric lines"
TRAINER_SOURCE = "Hugging Face Trainer log dicts"


@dataclass(frozen=True)
class Metrics:
    """What `job.metrics()` returns: one row per logged step, `columns` naming the cells."""

    columns: tuple[str, ...]
    rows: tuple[tuple[float | None, ...], ...]
    resumed: tuple[int, ...] = ()
    """Steps a restarted run resumed from (its checkpoint's step), in the order they happened."""
    sources: tuple[str, ...] = ()
    """Which lines the rows came from (SM_DIST_SOURCE, TRAINER_SOURCE); empty when none were logged."""

    def __len__(self) -> int:
        return len(self.rows)

    def column(self, name: str) -> list[float | None]:
        """The values of one column, row by row (KeyError for a column never logged)."""
        index = self.columns.index(name) if name in self.columns else -1
        if index < 0:
            raise KeyError(f"{name!r} was never logged; columns: {', '.join(self.columns) or 'none'}")
        return [row[index] for row in self.rows]

    @property
    def throughput(self) -> str | None:
        """The name of the first throughput column, if the job logged one."""
        return next((c for c in self.columns if THROUGHPUT_RE.search(c)), None)

    @property
    def x(self) -> str | None:
        """The column to plot against: step when every row has one, else epoch."""
        for name in ("step", "epoch"):
            if name in self.columns and all(v is not None for v in self.column(name)):
                return name
        return None

    def to_dict(self) -> dict[str, list[float | None]]:
        """Column name -> values (what `pandas.DataFrame` takes as it is)."""
        return {name: self.column(name) for name in self.columns}

    def plot(self, *names: str, path: StrPath | None = None, ax: Axes | None = None) -> Axes:
        """Draw `names` (default: the loss, the learning rate when it changes, the throughput: those
        logged) against the step, one panel each, resumes marked; saved to `path` when given
        (matplotlib: pip install 'sm_dist[plot]'). Returns the first panel's axes."""
        return draw_metrics(self, names, path=path, ax=ax)

    def summary(self) -> str:
        """One line: how many steps, which columns, where the loss went, the resumes."""
        if not self.rows:
            return "no metrics in the logs (no [sm_dist] metric line, no Trainer log dict)"
        text = f"{len(self.rows)} logged steps ({', '.join(self.sources)}): {', '.join(self.columns)}"
        losses = [v for v in self.column("loss") if v is not None] if "loss" in self.columns else []
        if losses:
            text += f"; loss {_cell(losses[0])} → {_cell(losses[-1])}"
        if self.resumed:
            text += "; resumed from step " + ", ".join(str(s) for s in self.resumed)
        return text

    def __repr__(self) -> str:
        return f"Metrics({self.summary()})"

    def _repr_html_(self) -> str:
        rows: list[Sequence[object]] = [[_cell(v) for v in row] for row in self.rows]
        if len(rows) > 2 * HTML_EDGE_ROWS + 1:
            rows = [*rows[:HTML_EDGE_ROWS], ["…"] * len(self.columns), *rows[-HTML_EDGE_ROWS:]]
        body = table(self.columns, rows, caption=self.summary(), numeric=range(len(self.columns))) if self.rows \
            else f"<p>{escape(self.summary())}</p>"
        return f'<div class="sm-dist">{body}</div>'


def _cell(value: float | None) -> str:
    if value is None:
        return ""
    if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}"


class _Reader:
    """Rows by step (or in order, for Trainer logs without a bar), resumes, per-host bars."""

    def __init__(self) -> None:
        self.by_step: dict[float, dict[str, float]] = {}
        self.unstepped: list[dict[str, float]] = []
        self.resumed: list[int] = []
        self.sources: list[str] = []
        self.bars: dict[str, tuple[int, int]] = {}
        """Host -> (step, total) of its training bar: the first bar total it showed."""

    def add(self, values: dict[str, float], source: str) -> None:
        row = {ALIASES.get(k, k): v for k, v in values.items()}
        if source not in self.sources:
            self.sources.append(source)
        step = row.get("step")
        if step is None:
            self.unstepped.append(row)
        else:
            self.by_step[step] = {**self.by_step.get(step, {}), **row} if source == TRAINER_SOURCE else row

    def feed(self, raw: str) -> None:
        at = raw.find(PREFIX)
        if at >= 0:
            ours = parse_metrics(raw[at:])
            if ours is not None:
                self.add(ours, SM_DIST_SOURCE)
                return
            marker = read_line(raw)
            if isinstance(marker, ResumedLine):
                self.resumed.append(marker.step)
            return
        host = match.group(1) if (match := _HOST_RE.match(raw)) else ""
        bar = tqdm_position(raw)  # before the dict: the Trainer prints it after the bar, on its line
        if bar is not None and self.bars.get(host, bar)[1] == bar[1]:
            self.bars[host] = bar
        logged = trainer_log(raw)
        if logged is None or not ("loss" in logged or any(k.startswith("eval_") for k in logged)):
            return  # the run's closing summary (train_runtime, ...) is no step's row
        if host in self.bars:
            logged["step"] = float(self.bars[host][0])
        self.add(logged, TRAINER_SOURCE)

    def metrics(self) -> Metrics:
        rows = [self.by_step[s] for s in sorted(self.by_step)] + self.unstepped
        seen = list(dict.fromkeys(name for row in rows for name in row))
        columns = [c for c in FIRST if c in seen]
        columns += [c for c in seen if c not in columns and THROUGHPUT_RE.search(c)]
        columns += [c for c in seen if c not in columns]
        return Metrics(columns=tuple(columns), rows=tuple(tuple(row.get(c) for c in columns) for row in rows),
                       resumed=tuple(self.resumed), sources=tuple(self.sources))


def read_metrics(lines: Iterable[str]) -> Metrics:
    """The metrics in a job's log lines (each may carry a "[algo-N] " host prefix)."""
    reader = _Reader()
    for line in lines:
        reader.feed(line)
    return reader.metrics()


def draw_metrics(metrics: Metrics, names: Sequence[str] = (), *, path: StrPath | None = None,
                 ax: Axes | None = None) -> Axes:
    """`names` (default: the loss, the learning rate when it changes and the throughput, those
    logged) against the step, one panel each (all on `ax` when given), each resume a dashed line;
    saved to `path` when given."""
    from sm_dist.notebook.plot import new_axes, save  # matplotlib: only when drawing

    x_name = metrics.x
    if x_name is None or not metrics.rows:
        raise ValueError(f"nothing to plot: {metrics.summary()}")
    changes = "lr" in metrics.columns and len({v for v in metrics.column("lr") if v is not None}) > 1
    default = [n for n in ("loss", "lr" if changes else None, metrics.throughput) if n is not None and n in metrics.columns]
    wanted = list(names) or default or [c for c in metrics.columns if c != x_name][:1]
    for name in wanted:
        metrics.column(name)  # KeyError naming the columns logged
    axes = [ax] * len(wanted) if ax is not None else new_axes(
        len(wanted), figsize=(4.4 * len(wanted), 3.2), path=path, feature="job.plot()")
    xs = metrics.column(x_name)
    for panel, name in zip(axes, wanted):
        pairs = [(x, y) for x, y in zip(xs, metrics.column(name)) if x is not None and y is not None]
        panel.plot([x for x, _ in pairs], [y for _, y in pairs], marker="." if len(pairs) < 40 else None,
                   label={"lr": "learning rate"}.get(name, name))
        for step in metrics.resumed if x_name == "step" else ():
            panel.axvline(step, color="0.5", ls="--", lw=1)
            panel.annotate(f"resumed from {step}", (step, 1.0), xycoords=("data", "axes fraction"),
                           xytext=(3, -3), textcoords="offset points", va="top", fontsize="x-small", color="0.35")
        panel.set_xlabel(x_name)
        panel.set_ylabel({"lr": "learning rate"}.get(name, name))
        if name == "lr":
            panel.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    if ax is not None and len(wanted) > 1:
        ax.legend(fontsize="small")
    if path is not None:
        save(axes[0], path)
    return axes[0]


__all__ = ["Metrics", "draw_metrics", "read_metrics"]
