"""The site's generated parts (tools/docs/hooks.py), without building it: the CLI reference is each command's
`--help`, the quickstart page holds the executed notebook's outputs, and the docstring gate names what lacks one.

`mkdocs build --strict` (the README's test command) builds the site itself; tests/docs/test_site_pages.py loads it.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def hooks() -> ModuleType:
    pytest.importorskip("mkdocs")
    spec = importlib.util.spec_from_file_location("docs_hooks", REPO / "tools" / "docs" / "hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_is_every_commands_help(hooks: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from sm_dist.cli import COMMANDS, main

    page = hooks.cli_page()
    monkeypatch.setenv("COLUMNS", hooks.HELP_COLUMNS)
    for command in ["fit", "estimate-cost", "infra"]:
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert capsys.readouterr().out.rstrip() in page
    assert all(f"## `sm-dist {command}`" in page for command in COMMANDS)
    assert "## `sm-dist infra deploy`" in page  # sub-commands too


def test_the_quickstart_page_shows_the_executed_notebook(hooks: ModuleType) -> None:
    stored = REPO / "docs" / hooks.NOTEBOOK
    notebook = json.loads(stored.read_text(encoding="utf-8"))
    source = json.loads((REPO / "examples" / "quickstart.ipynb").read_text(encoding="utf-8"))
    sources = [c["source"] for c in notebook["cells"]]
    assert sources == [c["source"] for c in source["cells"]], \
        "docs/notebooks/quickstart.ipynb is older than examples/quickstart.ipynb: python tools/docs/refresh_quickstart.py"
    page = hooks.notebook_page(stored)
    assert page.count("data:image/png;base64,") == 2  # the estimate's plot and the loss curve
    assert "verified" in page and "<table" in page and "Recommendation" in page


@pytest.mark.slow  # griffe's loader asks git about the package (a process)
def test_the_docstring_gate(hooks: ModuleType, tmp_path: Path) -> None:
    assert hooks.undocumented(REPO / "docs") == []
    package = tmp_path / "src" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('''"""A package."""

class Handle:
    """Documented."""

    def status(self) -> str:
        return "ok"

    def _private(self) -> None:
        pass


def documented() -> None:
    """Documented."""
''', encoding="utf-8")
    page = tmp_path / "docs" / "reference" / "api" / "x.md"
    page.parent.mkdir(parents=True)
    page.write_text("::: pkg.documented\n\n::: pkg.Handle\n", encoding="utf-8")
    assert hooks.undocumented(tmp_path / "docs", "pkg", tmp_path / "src") == ["reference/api/x.md: pkg.Handle.status"]
    page.write_text("::: pkg.Handle\n    options:\n      members: false\n", encoding="utf-8")
    assert hooks.undocumented(tmp_path / "docs", "pkg", tmp_path / "src") == []
