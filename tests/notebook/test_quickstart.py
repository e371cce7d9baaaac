"""examples/quickstart.ipynb in a real Jupyter kernel (nbclient + ipykernel): what a user sees.

The notebook runs the README's flow end to end — estimate, plan, a local fit with a rank killed
and the verify run, checkpoints, metrics, the loss curve — and the test reads the cells' outputs
as Jupyter stores them. The notebook in the repository holds no outputs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "examples" / "quickstart.ipynb"
#: The most lines of text the fit cell (a kill and a verify run) may show.
MAX_FIT_LINES = 15


def shown_text(cell: Any) -> list[str]:
    """The lines of text a cell shows: its streams and the plain text of what it displays."""
    lines: list[str] = []
    for output in cell.outputs:
        if output.output_type == "stream":
            lines += output.text.splitlines()
        elif output.output_type in ("display_data", "execute_result"):
            lines += output.data.get("text/plain", "").splitlines()
        else:
            lines += [output.get("ename", ""), output.get("evalue", "")]
    return lines


def data(cell: Any, mime: str) -> list[str]:
    return [o.data[mime] for o in cell.outputs if o.output_type in ("display_data", "execute_result") and mime in o.data]


def test_the_notebook_is_stored_without_outputs() -> None:
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert code and all(cell["outputs"] == [] and cell["execution_count"] is None for cell in code)
    assert all(not cell["metadata"] for cell in notebook["cells"])
    assert notebook["metadata"]["kernelspec"]["name"] == "python3"


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The quickstart executed in a python3 kernel of this environment; its cells by id."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(tmp_path_factory.mktemp("kernel-tmp")))  # local mode's hosts and logs
        notebook = nbformat.read(NOTEBOOK, as_version=4)
        nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                                resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    return {cell.id: cell for cell in notebook.cells}


@pytest.mark.slow
def test_the_fit_cell_is_a_live_view_not_the_logs(executed: dict[str, Any]) -> None:
    fit = executed["fit"]
    lines = shown_text(fit)
    assert len(lines) <= MAX_FIT_LINES, "\n".join(lines)
    everything = "\n".join(lines + data(fit, "text/html"))
    assert "Traceback" not in everything and "[algo-1]" not in everything  # no log line, no expected traceback
    views = data(fit, "text/html")
    assert len(views) == 2  # one display per run (the run, the verify run), updated in place
    assert all("algo-2" in view and "done" in view for view in views)
    assert "kill:3" in everything and "restarts 1" in everything


@pytest.mark.slow
def test_plan_job_estimate_and_listings_render_as_html(executed: dict[str, Any]) -> None:
    for cell_id in ("estimate", "plan", "job", "checkpoints", "metrics"):
        assert [html for html in data(executed[cell_id], "text/html") if "<table" in html], cell_id
    assert "Recommendation" in data(executed["estimate"], "text/html")[0]
    assert "CreateTrainingJob request" in data(executed["plan"], "text/html")[0]
    job = data(executed["job"], "text/html")[0]
    assert "identical to the uninterrupted run" in job and "resumed from" in job and "job.logs()" in job
    assert data(executed["verified"], "text/plain") == ["True"]
    assert "committed" in data(executed["checkpoints"], "text/html")[0]
    metrics = data(executed["metrics"], "text/html")[0]
    assert "loss" in metrics and "resumed from step 2" in metrics


@pytest.mark.slow
def test_the_plots_show_inline(executed: dict[str, Any]) -> None:
    for cell_id in ("estimate-plot", "plot"):
        assert data(executed[cell_id], "image/png"), cell_id
        assert shown_text(executed[cell_id]) == [shown_text(executed[cell_id])[0]]  # the figure's own line only
