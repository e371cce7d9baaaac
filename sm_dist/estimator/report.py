"""Render an Estimate as a text table (CLI) or an HTML table (notebooks)."""

from __future__ import annotations

from sm_dist._records import TYPE_CHECKING
from sm_dist.estimator.goodput import GOODPUT_FLOOR
from sm_dist.estimator.grid import Row
from sm_dist.estimator.recommend import LABELS
from sm_dist.estimator.record import EstimateRecord

if TYPE_CHECKING:
    from typing import Any

_GB = 1e9
HEADERS = ("instance", "n", "GPUs", "strategy", "recompute/mb", "mem/GPU GB", "step s", "hours", "SageMaker $", "EC2 $",
           "spot $", "note")
#: Columns of figures (aligned right, in text and HTML).
_NUMERIC = frozenset(range(1, 3)) | frozenset(range(5, 11))


def _money(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.2f}"


def _cells(row: Row, chosen: bool) -> list[str]:
    name = row.instance_type.removeprefix("ml.")
    head = [name, str(row.instance_count), str(row.gpus), LABELS[row.strategy]]
    if not row.runnable or row.memory is None:
        return head + ["-"] * 7 + [f"cannot run: {row.reason}"]
    head.append(f"{row.checkpointing}/{row.micro_batch}" if row.checkpointing else "-")
    mem = f"{row.memory.total / _GB:.1f}/{row.usable_bytes / _GB:.0f}"
    if row.step is None or row.hours is None or row.cost is None:
        return head + [mem] + ["-"] * 5 + ["does not fit"]
    note = "<- recommended" if chosen else ""
    return head + [mem, f"{row.step.total:.2f}", f"{row.hours:,.1f}", _money(row.cost.sagemaker),
                   _money(row.cost.ec2), _money(row.cost.spot), note]


def ordered(est: EstimateRecord) -> list[Row]:
    """Rows that fit, cheapest first, then those that do not fit, then those that cannot run."""
    return ordered_rows(list(est.rows), est.spot)


def _grid(rows: list[list[str]]) -> list[str]:
    """The rows in aligned columns: one format string for every row (a row at a time in C, not a cell at a time in
    Python: the table's share of `estimate-cost` start-up, tests/bench/bench_cli_startup.py)."""
    widths = [max(map(len, column)) for column in zip(*rows)]
    line = "  ".join(f"{{:{'>' if i in _NUMERIC else '<'}{w}}}" for i, w in enumerate(widths))
    return [line.format(*cells).rstrip() for cells in rows]


def best_per_pair(est: EstimateRecord) -> list[Row]:
    """One row per (instance type, count): its cheapest plan that fits, else the runnable plan
    needing the least memory (shown as not fitting), else the first row (cannot run). One pass over the
    rows, each pair keeping the first of its best so far (the table's share of estimate-cost's start-up)."""
    spot = est.spot
    best: dict[tuple[str, int], tuple[tuple[int, object], Row]] = {}
    for row in est.rows:
        if row.runnable and row.fits:
            rank: tuple[int, object] = (0, _order(row, spot))
        elif row.runnable and row.memory is not None:
            rank = (1, row.memory.total)
        else:
            rank = (2, 0)  # cannot run: the first row of the pair stays
        key = (row.instance_type, row.instance_count)
        kept = best.get(key)
        if kept is None or rank < kept[0]:  # the first element decides between kinds
            best[key] = (rank, row)
    return [row for _, row in best.values()]


def _order(row: Row, spot: bool) -> tuple[int, float]:
    if not row.runnable or row.memory is None:
        return (2, 0.0)
    if row.cost is None:
        return (1, row.memory.total)
    return (0, row.cost.spot if spot else row.cost.sagemaker)


def ordered_rows(rows: list[Row], spot: bool) -> list[Row]:
    return sorted(rows, key=lambda r: _order(r, spot))


def text(est: EstimateRecord, all_rows: bool = False) -> str:
    """The CLI table (the best plan per instance type and count, or every row), the
    recommendation, then every assumption."""
    chosen = est.recommendation.row if est.recommendation else None
    shown = ordered(est) if all_rows else best_per_pair(est)
    m = est.model
    lines = [f"{m['name']}: {m['params'] / 1e9:.3g}B params, {m['tokens']:.3g} tokens, seq {m['seq_len']}, "
             f"global batch {m['global_batch']}, micro-batch {est.assumptions['micro_batch']}, "
             f"{est.assumptions['precision']}, {est.assumptions['optimizer']}, activation checkpointing "
             f"{est.assumptions['activation_checkpointing']}",
             "" if all_rows else "Best strategy per instance type and count (--all: every combination):"]
    lines += _grid([list(HEADERS)] + [_cells(r, r is chosen) for r in shown])
    lines.append("")
    lines.append("Recommendation: " + (est.recommendation.reason if est.recommendation else _none(est)))
    if goodput := goodput_line(est):
        lines.append(goodput)
    lines += ["", "Assumptions:"] + [f"  {line}" for line in assumption_lines(est)]
    if est.warnings:
        lines += ["", "Warnings:"] + [f"  {w}" for w in est.warnings]
    return "\n".join(lines)


def _none(est: EstimateRecord) -> str:
    """"none", with the computed smallest change that would fit when there is one (recommend.smallest_change)."""
    change = next((w for w in est.warnings if w.startswith("no plan fits")), "")
    return f"none: {change}" if change else "none"


def _data_text(data: dict[str, Any] | None) -> str:
    """The data channels' share of the start-up, as the estimate counted it."""
    if data is None:
        return "; data channels not counted (sizes not given)"
    gb = 1e9
    parts = []
    if data["replicated_bytes"] or data["sharded_bytes"]:
        rate = ", ".join(f"{k.removeprefix('ml.')} {v:g}" for k, v in data["download_gbps"].items())
        parts.append(f"+ File-mode download per instance: {data['replicated_bytes'] / gb:,.1f} GB replicated + "
                     f"{data['sharded_bytes'] / gb:,.1f} GB sharded ÷ instances, at Gb/s {rate} (instance network, "
                     f"at most {data['s3_max_gbps']:g} from S3, × {data['efficiency']:.0%})")
    if data["streamed_bytes"]:
        parts.append(f"{data['streamed_bytes'] / gb:,.1f} GB FastFile streams while training (nothing up front)")
    if data["unknown_channels"]:
        parts.append(f"size unknown, not counted: {', '.join(data['unknown_channels'])}")
    return "; " + "; ".join(parts) if parts else ""


def assumption_lines(est: EstimateRecord) -> list[str]:
    """One line per assumption the numbers rest on."""
    a = est.assumptions
    mfu = ", ".join(f"{k.removeprefix('ml.')} {v:.2f}" for k, v in a["mfu"].items())
    sources = sorted({(p["date"], p["source"]) for p in a["prices"].values()})
    spot = a["spot_discount"]
    spot_text = (", ".join(f"{k.removeprefix('ml.')} {v:.0%}" for k, v in spot.items()) if isinstance(spot, dict)
                 else f"{spot:.0%} off on-demand")
    lines = [f"MFU: {mfu} ({a['mfu_source']}); FLOPs per token {a['flops_per_token']}"]
    lines += [f"prices {date}: {source}" for date, source in sources]
    lines += [
        f"start-up billed per job: {a['startup_seconds'] / 60:.0f} min (instances, image, code){_data_text(a.get('data'))}",
        f"spot: {spot_text}; {a['spot_interruptions_per_instance_hour']} interruptions per instance-hour on top of "
        "the hardware's (goodput below)",
        _failures_text(a["failures"]),
        f"memory: {a['memory_safety_margin']:.0%} of GPU memory kept free; CUDA context "
        f"{a['cuda_context_bytes'] / 2**30:.1f} GiB; activations {a['activations']}",
        f"communication: ring collectives, hierarchical (NVLink/PCIe inside, network between); {a['overlap']}",
    ]
    return lines


def _failures_text(f: dict[str, Any]) -> str:
    """How failures, checkpoints and restarts enter every row's hours (goodput.py)."""
    rates = ", ".join(f"{k.removeprefix('ml.')} {v * 1000:.3f}" for k, v in f["interruptions_per_gpu_hour"].items())
    sources = "; ".join(f"{k}: {v}" for k, v in f["sources"].items())
    how = ("async (training waits for the copy to host memory)" if f["async_checkpoint"] else "sync (training waits)")
    where = (f"uploaded to S3 by {f['s3_connections_per_rank']} connections per rank at "
             f"{f['s3_bytes_per_s_per_connection'] / 1e6:.0f} MB/s each" if f["checkpoint_storage"] == "s3"
             else "written to the instance's disk (SageMaker uploads it)")
    return (f"failures: interruptions per 1,000 GPU-hours {rates} ({sources}); each costs {f['detect_seconds'] / 60:.0f} min to "
            f"notice + the start-up + reading the checkpoint + half an interval of work; checkpoints {how}, {where}, "
            f"every {f['interval']}; a planned restart every {f['planned_restart_every_hours'] / 24:.0f} days")


def goodput_line(est: EstimateRecord) -> str:
    """The recommended plan's failures, checkpoints and goodput, in one line ("" without one)."""
    row = est.recommendation.row if est.recommendation else None
    g = row.goodput if row is not None else None
    if row is None or g is None or row.step is None:
        return ""
    spot = " on spot" if est.spot else ""
    restarts = f", {g.planned_restarts} planned restart{'s' if g.planned_restarts > 1 else ''} (one per 28-day job)" if g.planned_restarts else ""
    line = (f"Goodput{spot}: {g.goodput:.3f} of the billed time trains — {g.interruptions:,.1f} interruptions expected "
            f"(MTBF {g.mtbf_hours:,.2f} h){restarts}; a checkpoint of {g.checkpoint_bytes / 1e9:,.2f} GB per rank stalls "
            f"{g.checkpoint_save_s:,.1f} s, every {g.checkpoint_interval_s / 60:,.1f} min "
            f"({g.interval_steps(row.step.total):,} steps, Young/Daly); a restart costs {g.restart_s / 60:,.1f} min")
    if g.goodput <= GOODPUT_FLOOR:
        line += (f". This plan cannot get ahead of its interruptions (a restart and half an interval exceed the "
                 f"{g.mtbf_hours * 60:,.1f} min MTBF): its hours are the floor of {GOODPUT_FLOOR:.0%} goodput, not a "
                 "forecast; use fewer instances" + (" or on-demand" if est.spot else ""))
    return line


def html(est: EstimateRecord) -> str:
    """A notebook table (the same content as the text table), every string escaped."""
    from sm_dist.markup import escape, table  # notebooks only: estimate-cost never loads html

    chosen = est.recommendation.row if est.recommendation else None
    rows = best_per_pair(est)
    rec = escape(est.recommendation.reason) if est.recommendation else escape(_none(est))
    items = "".join(f"<li>{escape(line)}</li>" for line in assumption_lines(est))
    warns = "".join(f"<li>{escape(w)}</li>" for w in est.warnings)
    parts = [
        f'<div class="sm-dist"><p><b>{escape(est.model["name"])}</b>: {est.model["params"]:,} params</p>',
        table(HEADERS, [_cells(r, r is chosen) for r in rows], numeric=_NUMERIC,
              bold=[i for i, r in enumerate(rows) if r is chosen]),
        f"<p><b>Recommendation:</b> {rec}</p>",
        f"<p>{escape(goodput)}</p>" if (goodput := goodput_line(est)) else "",
        f"<p>Assumptions:</p><ul>{items}</ul>",
        f"<p>Warnings:</p><ul>{warns}</ul>" if warns else "",
        "</div>",
    ]
    return "".join(parts)


__all__ = ["text", "html", "ordered", "best_per_pair", "assumption_lines", "goodput_line"]
