"""The built site in headless Chromium, as a reader opens it: the pages load, log nothing to the console and ask
the server for nothing it lacks (tools/docs/screenshots.py serves and loads them the same way).

Needs Debian's chromium (`apt-get install -y chromium`, which .ci/run does); skipped with that reason where
/usr/bin/chromium is absent, and failed instead in CI (CI=true), where a skip would be a pass that loaded nothing.
Slow: it builds the site and starts a browser per page.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from _harness import skip_or_fail

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def _screenshots() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_screenshots", REPO / "tools" / "docs" / "screenshots.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


shots = _screenshots()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built strictly from this checkout into a scratch folder (what `mkdocs build --strict` does)."""
    if not Path(shots.CHROMIUM).exists():
        skip_or_fail(f"{shots.CHROMIUM} is missing (apt-get install -y chromium): the pages cannot be loaded",
                     ".ci/run installs chromium")
    pytest.importorskip("mkdocs")
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    out = tmp_path_factory.mktemp("site")
    build(load_config(str(REPO / "mkdocs.yml"), site_dir=str(out), strict=True))
    return out


@pytest.mark.parametrize("page", [*shots.PAGES, "quickstart.html"])
def test_page_loads_without_console_messages(site: Path, page: str) -> None:
    with shots.serve(site) as (base, failures):
        messages = shots.console_messages(base + page)
    assert messages == [] and failures == [], f"{page}: console {messages}, failed requests {failures}"


def test_a_broken_page_is_noticed(site: Path, tmp_path: Path) -> None:
    """The check can fail: a script error and a missing image are both caught."""
    (tmp_path / "broken.html").write_text('<script>notDefined()</script><img src="missing.png">', encoding="utf-8")
    with shots.serve(tmp_path) as (base, failures):
        messages = shots.console_messages(base + "broken.html")
    assert any("notDefined" in m for m in messages)
    assert "404 /missing.png" in failures
