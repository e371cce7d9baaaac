"""The decision plot: hours vs dollars, one point per plan that fits, the Pareto front drawn.

A user trades time for money: a plan is worth a look only if no other plan is both faster and
cheaper (the Pareto front). The recommendation is marked; spot plans are a second set of points
(their expected hours include interruptions). matplotlib is imported only when drawing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sm_dist.errors import SmDistError
from sm_dist.estimator.grid import Row
from sm_dist.estimator.record import EstimateRecord

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from sm_dist.estimator.inputs import StrPath


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats on both axes (lower is better on each), sorted
    by the first axis. Ties: equal points are all kept."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1]))
    front: list[int] = []
    best = float("inf")
    for i in order:
        if points[i][1] < best or (front and points[i] == points[front[-1]]):
            front.append(i)
            best = min(best, points[i][1])
    return front


def _label(row: Row) -> str:
    return f"{row.strategy.value} {row.instance_count}× {row.instance_type.removeprefix('ml.')}"


def draw(est: EstimateRecord, path: StrPath | None = None, ax: Axes | None = None) -> Axes:
    """Draw `est` on `ax` (a new figure when None) and save it to `path` when given; returns ax."""
    try:
        import matplotlib

        if ax is None and path is not None:
            matplotlib.use("Agg")  # a file only: no display needed
        import matplotlib.pyplot as plt
        from matplotlib.figure import Figure
    except ImportError:
        raise SmDistError("Estimate.plot() needs matplotlib: pip install 'sm_dist[plot]'") from None
    rows = [r for r in est.rows if r.runnable and r.fits and r.cost is not None and r.hours is not None]
    if not rows:
        raise SmDistError("nothing to plot: no plan fits (see the estimate's warnings for what would)")
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 5))
    on_demand = [(r.hours or 0.0, r.cost.sagemaker) for r in rows if r.cost is not None]
    spot = [(r.cost.spot_hours, r.cost.spot) for r in rows if r.cost is not None]
    ax.scatter([h for h, _ in on_demand], [d for _, d in on_demand], s=18, color="tab:blue", alpha=0.5,
               label="on-demand plans")
    ax.scatter([h for h, _ in spot], [d for _, d in spot], s=18, color="tab:orange", alpha=0.4, marker="^",
               label="spot (expected)")
    front = pareto_front(on_demand)
    ax.plot([on_demand[i][0] for i in front], [on_demand[i][1] for i in front], color="tab:blue", lw=1.5,
            label="Pareto front (on-demand)")
    for i in front[:8]:
        ax.annotate(_label(rows[i]), on_demand[i], fontsize="x-small", xytext=(4, 4), textcoords="offset points")
    if est.recommendation is not None:
        chosen = est.recommendation.row
        assert chosen.cost is not None and chosen.hours is not None
        point = (chosen.cost.spot_hours, chosen.cost.spot) if est.spot else (chosen.hours, chosen.cost.sagemaker)
        ax.scatter(*point, s=140, facecolors="none", edgecolors="red", linewidths=2, label="recommended")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("hours")
    ax.set_ylabel("dollars")
    ax.set_title(f"{est.model['name']}: time vs money of the plans that fit")
    ax.legend(fontsize="small")
    if path is not None:  # the axes may sit in a SubFigure: save the figure it belongs to
        figure = ax.figure if isinstance(ax.figure, Figure) else ax.figure.figure
        figure.savefig(path, dpi=120, bbox_inches="tight")
    return ax


__all__ = ["draw", "pareto_front"]
