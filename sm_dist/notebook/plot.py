"""Drawing for notebooks and files: new axes, saving, labels that do not overlap (matplotlib).

matplotlib is imported inside these functions only (`pip install 'sm_dist[plot]'`). A new figure
comes from pyplot, so a notebook shows it inline and a script's `plt.show()` finds it — except
when it only goes to a file outside a notebook: then it is a bare `Figure`, which needs no
display and leaves pyplot's global state (the backend, open figures) alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from os import PathLike
from typing import TYPE_CHECKING

from sm_dist.errors import MissingDependencyError
from sm_dist.notebook.live import in_notebook

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.text import Annotation
    from matplotlib.transforms import Bbox

StrPath = str | PathLike[str]
#: Label offsets (points) tried in turn around a point: beside it first, then further up and down,
#: then further out to the sides (a leader line joins a label set apart to its point).
LABEL_OFFSETS: tuple[tuple[float, float], ...] = tuple(
    (dx * side, dy * up) for dx in (6, 40) for dy in (5, 17, 29, 41, 53) for up in (1, -1) for side in (1, -1))
#: Points of padding kept free around a label.
LABEL_PAD = 2.0
#: How much a label over a data marker counts against a place, relative to one over another label.
MARKER_WEIGHT = 0.3
#: Half the side of the box kept around each data marker (points).
MARKER_HALF = 4.0


def new_axes(count: int, *, figsize: tuple[float, float], path: StrPath | None, feature: str) -> list[Axes]:
    """`count` side-by-side axes on a new figure (see the module's note on pyplot)."""
    try:
        if path is not None and not in_notebook():
            from matplotlib.figure import Figure

            return list(Figure(figsize=figsize, layout="constrained").subplots(1, count, squeeze=False)[0])
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingDependencyError(feature, "matplotlib", "plot") from None
    _, axes = plt.subplots(1, count, figsize=figsize, squeeze=False, layout="constrained")
    return list(axes[0])


def save(ax: Axes, path: StrPath) -> None:
    """Save the whole figure `ax` belongs to (it may sit in a SubFigure)."""
    from matplotlib.figure import Figure

    figure = ax.figure if isinstance(ax.figure, Figure) else ax.figure.figure
    figure.savefig(path, dpi=120, bbox_inches="tight")


def _overlap(a: Bbox, b: Bbox) -> float:
    width = min(a.x1, b.x1) - max(a.x0, b.x0)
    height = min(a.y1, b.y1) - max(a.y0, b.y0)
    return width * height if width > 0 and height > 0 else 0.0


def _annotate(ax: Axes, label: str, point: tuple[float, float], offset: tuple[float, float], leader: bool,
              text: dict[str, object]) -> Annotation:
    dx, dy = offset
    arrow = {"arrowprops": {"arrowstyle": "-", "color": "0.55", "lw": 0.6, "shrinkA": 0, "shrinkB": 3}} if leader else {}
    return ax.annotate(label, point, xytext=offset, textcoords="offset points", ha="left" if dx > 0 else "right",
                       va="bottom" if dy > 0 else "top", **arrow, **text)  # type: ignore[arg-type]


def place_labels(ax: Axes, points: Sequence[tuple[float, float]], labels: Sequence[str], *,
                 taken: list[Bbox] | None = None, markers: Sequence[tuple[float, float]] = (),
                 **text: object) -> list[Annotation]:
    """Label each point where its text overlaps no label placed before it (nor a box already in
    `taken`, which grows with each label: pass one list to several calls), stays inside the axes
    and, if it can, covers none of `markers` (data points); `LABEL_OFFSETS` are tried in turn,
    and where none is free the least crowded one is taken. Call once the scales and data are final."""
    from matplotlib.transforms import Bbox

    ax.autoscale_view()
    area = ax.get_window_extent()
    scale = ax.figure.dpi / 72.0
    half = MARKER_HALF * scale
    marks = [Bbox.from_extents(x - half, y - half, x + half, y + half)
             for x, y in (ax.transData.transform(markers) if len(markers) else [])]
    taken = [] if taken is None else taken
    placed = []
    for point, label in zip(points, labels):
        best: tuple[float, tuple[float, float], Bbox] | None = None
        for offset in LABEL_OFFSETS:
            trial = _annotate(ax, label, point, offset, False, text)
            box = trial.get_window_extent().padded(LABEL_PAD * scale)
            trial.remove()
            crowding = (box.width * box.height - _overlap(box, area) + sum(_overlap(box, b) for b in taken)
                        + MARKER_WEIGHT * sum(_overlap(box, m) for m in marks))
            if best is None or crowding < best[0]:
                best = (crowding, offset, box)
            if crowding == 0:
                break
        assert best is not None
        _, offset, box = best
        leader = abs(offset[0]) > LABEL_OFFSETS[0][0] or abs(offset[1]) > LABEL_OFFSETS[0][1]
        placed.append(_annotate(ax, label, point, offset, leader, text))
        taken.append(box)
    return placed


__all__ = ["LABEL_OFFSETS", "StrPath", "new_axes", "place_labels", "save"]
