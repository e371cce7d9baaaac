"""Run examples/quickstart.ipynb in a real Jupyter kernel and store it, outputs included, for the site.

    .venv/bin/python tools/docs/refresh_quickstart.py     # about 2 minutes: a local fit and its verify run

The notebook in examples/ stays without outputs (tests/notebook checks it); the executed copy is
docs/notebooks/quickstart.ipynb, which the site shows as the "Quickstart notebook" page
(tools/docs/hooks.py renders it at build time). Rerun this after changing the notebook or what
its cells print. Needs nbclient and ipykernel (`pip install -e '.[dev]'`).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "examples" / "quickstart.ipynb"
TARGET = ROOT / "docs" / "notebooks" / "quickstart.ipynb"


def main() -> int:
    import os

    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(SOURCE, as_version=4)
    with tempfile.TemporaryDirectory(prefix="sm-dist-docs-") as tmp:
        os.environ["TMPDIR"] = tmp  # local mode's hosts and logs go there, and away with it
        NotebookClient(notebook, timeout=900, kernel_name="python3",
                       resources={"metadata": {"path": str(SOURCE.parent)}}).execute()
    for cell in notebook.cells:  # the kernel's timing metadata changes every run: keep the diff to what shows
        cell.metadata.pop("execution", None)
    TARGET.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, TARGET)
    print(f"wrote {TARGET.relative_to(ROOT)} ({TARGET.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
