"""The plan in a notebook: its printed lines as a table, the exact request one click away."""

from __future__ import annotations

from pathlib import Path

import sm_dist

REPO = Path(__file__).resolve().parents[2]
EVIL = "<script>alert('x')</script>"


def test_the_plan_shows_its_text_and_the_request_escaped() -> None:
    plan = sm_dist.plan("cnn.py", source_dir=str(REPO / "entrypoints"), instance_count=2, local=True,
                        hyperparameters={"steps": 2, "note": EVIL})
    html = plan._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "CreateTrainingJob request" in html and "<details>" in html and "PID 1" in html
    assert repr(plan).startswith(f"Plan({plan.job_name!r}, 2 × ml.g5.xlarge")
