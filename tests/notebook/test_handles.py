"""What a notebook shows of a job's records without print: escaped HTML tables and short reprs."""

from __future__ import annotations

import pytest

from sm_dist.contract.job import CheckpointInfo, CheckpointList
from sm_dist.local.cost import LocalCost
from sm_dist.local.summary import LocalSummary
from sm_dist.markup import table, text_table

EVIL = "<script>alert('x')</script>"


def test_text_table_keeps_the_text_renderings_layout_and_escapes() -> None:
    html = text_table(f"title {EVIL}\nsteps           24\ncost\n  MaxRuntime   3600 s\n    kill:3: {EVIL} on algo-1\n"
                      "  WARNING         x  y\n  verified        NO — differs")
    assert "<script>" not in html and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert html.count("<tr>") == 6 and "<caption" in html
    assert ">steps</th>" in html and ">24</td>" in html and ">x  y</td>" in html  # split at the first gap only
    assert 'colspan="2" style="text-align:left;vertical-align:top;padding:1px 0.8em 1px 0;padding-left:2.4em">kill:3:' \
        in html  # a note under its heading, nested
    assert ";color:#c2410c" in html and ";color:#dc2626" in html  # a warning, a failed verification
    assert "&lt;b&gt;" in table(["a"], [["<b>"]], caption="<i>") and "&lt;i&gt;" in table(["a"], [], caption="<i>")


def _summary(**kw: object) -> LocalSummary:
    cost = LocalCost(local_usd=0.0, instance_type="ml.g5.xlarge", instance_count=2, billable_seconds=60.0,
                     usd_per_hour=1.408, sagemaker_usd=0.0235, price_date="2025-06", price_source=None)
    fields = dict(job_name=f"job-{EVIL}", status="Completed", hosts=2, processes_per_host=1, wall_seconds=30.0,
                  steps=12, chaos=("kill:6",), chaos_fired=("kill:6",), chaos_events=(f"kill:6: {EVIL}",), restarts=1,
                  in_job_restarts=1, resumed_from=(4,), verified=True, verify_result="identical", cost=cost,
                  checkpoint_uri="s3://sm-dist-local/j/run/checkpoints", warnings=(f"careful {EVIL}",))
    fields.update(kw)
    return LocalSummary(**fields)  # type: ignore[arg-type]


def test_the_local_summary_is_its_printed_lines_as_a_table() -> None:
    summary = _summary()
    html = summary._repr_html_()
    assert "<script>" not in html and html.count("<tr>") == len(str(summary).splitlines()) - 1
    assert "resumed from" in html and "#16a34a" in html  # verified: yes, in green
    assert repr(summary) == f"LocalSummary({'job-' + EVIL!r}, Completed, steps=12, restarts=1, verified=True)"
    failed = _summary(status="Failed", verified=None, verify_result=None, error=f"ValueError: {EVIL}  (algo-2, rank 1)")
    assert "&lt;script&gt;" in failed._repr_html_() and "<script>" not in failed._repr_html_()


def test_a_checkpoint_listing_is_a_table() -> None:
    listing = CheckpointList([
        CheckpointInfo(step=8, uri="s3://b/p/step-000000008/", committed=True, total_bytes=3 * 2**20, files=4,
                       world_size=2, strategy="ddp", created_unix=0.0),
        CheckpointInfo(step=6, uri=f"s3://b/{EVIL}/", committed=False, files=1)])
    assert listing == [listing[0], listing[1]] and isinstance(listing, list)
    lines = repr(listing).splitlines()
    assert lines[0].split()[:3] == ["step", "committed", "MiB"] and "1970-01-01 00:00:00" in lines[1]
    html = listing._repr_html_()
    assert "2 checkpoints, 1 committed" in html and "3.00" in html and "<script>" not in html
    assert repr(CheckpointList()) == "no checkpoints"


def test_a_local_job_shows_its_summary_metrics_and_where_to_look(tmp_path) -> None:
    from sm_dist.contract.log_lines import step_line
    from sm_dist.local.config import LocalJobConfig
    from sm_dist.local.job import LocalJob
    from sm_dist.local.progress import Progress
    from sm_dist.local.run_records import RunRecord
    from sm_dist.local.runner import Outcome

    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "algo-1.log").write_text("\n".join(step_line(s, {"loss": 1 / s}) for s in (1, 2, 3)) + "\n")
    (tmp_path / "logs" / "algo-2.log").write_text(f"{EVIL}\n")
    progress = Progress()
    progress.feed("[sm_dist] step=3 loss=0.33", "algo-1")
    job = LocalJob(config=LocalJobConfig(job_name="j", container_command=("python3",), instance_count=2),
                   run=RunRecord(Outcome(status="Completed", ended=Outcome().started + 3), progress, 0, [], tmp_path))
    assert repr(job) == "LocalJob('j', Completed, 2 hosts, steps=3, restarts=0, verified=None)"
    html = job._repr_html_()
    assert "local job j: Completed" in html and "job.logs()" in html and "not checked (use --verify)" in html
    assert job.metrics().column("loss") == [1.0, 0.5, pytest.approx(1 / 3, rel=1e-5)]
    assert isinstance(job.checkpoints(), CheckpointList) and repr(job.checkpoints()) == "no checkpoints"
