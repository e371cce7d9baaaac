"""--verify's choice of runs: no uninterrupted run when the interrupted one left nothing to compare."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sm_dist.local import api, verify
from sm_dist.local.progress import Progress
from sm_dist.local.run_records import Outcome, RunRecord


@pytest.mark.parametrize("status", ["Failed", "Stopped"])
def test_a_run_that_did_not_complete_is_not_run_again_to_compare(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                   status: str) -> None:
    """A failed job or a stopped chain has no final model: the ~40 s of a second run would only end in
    "cannot compare"; the answer says why at once."""
    def no_run(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("an uninterrupted run was started")

    monkeypatch.setattr(api, "one_run", no_run)
    record = RunRecord(outcome=Outcome(status=status), progress=Progress(), in_job_restarts=0, fired=["kill:3"],
                       root=tmp_path)
    checked, found = api._verify(None, tmp_path, None, record, ["algo-1"], chained=False)  # type: ignore[arg-type]
    assert checked is None and found is not None and found.result == verify.CANNOT
    assert found.detail == f"the run ended {status}: no final model to compare, so no uninterrupted run was made"
