"""`EstimateRecord`: the fields of an estimate, the floor its renderers stand on.

`result.Estimate` (what `sm_dist.estimate` returns) is this record plus how it is built and
shown; the renderers (report.py: text and HTML, plot.py: hours vs dollars) read the record
only. So result imports its renderers, and they import nothing above this module.
"""

from __future__ import annotations

from sm_dist._records import TYPE_CHECKING, Record
from sm_dist.estimator.grid import Row
from sm_dist.estimator.recommend import Recommendation

if TYPE_CHECKING:
    from typing import Any


# A NamedTuple (immutable) rather than a frozen dataclass: see sm_dist/catalog/__init__.py.
class EstimateRecord(Record):
    """Every combination asked for, the recommendation, and what the numbers rest on."""

    rows: tuple[Row, ...]
    recommendation: Recommendation | None
    assumptions: dict[str, Any]  #: the --json "assumptions" object (JSON values)
    warnings: tuple[str, ...]
    model: dict[str, Any]  #: the --json "model" object (JSON values)
    spot: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The --json object: rows, recommendation, assumptions, warnings (and the model)."""
        return {
            "model": self.model,
            "rows": [r.to_dict() for r in self.rows],
            "recommendation": None if self.recommendation is None else self.recommendation.to_dict(),
            "assumptions": self.assumptions,
            "warnings": list(self.warnings),
        }

    def to_json(self, indent: int | None = 2) -> str:
        import json  # only here: the text table's path imports no json

        return json.dumps(self.to_dict(), indent=indent)


__all__ = ["EstimateRecord"]
