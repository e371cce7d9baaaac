"""The site opened from the file system (file://.../site/index.html, as the README says) has its search box: Material's
offline plugin inlines the search index into a script, and the Web Worker runs through the iframe-worker shim the
site serves itself (mkdocs.yml). Slow: it builds the site (~10 s); tests/docs/test_site_pages.py loads its pages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def test_the_built_site_searches_offline_and_loads_nothing_from_another_host(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    build(load_config(str(REPO / "mkdocs.yml"), site_dir=str(tmp_path), strict=True))
    index = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert 'class="md-search"' in index  # the search box
    assert '<script src="assets/iframe-worker/shim.js">' in index  # the worker's shim, from the site
    assert (tmp_path / "assets" / "iframe-worker" / "shim.js").is_file()
    assert (tmp_path / "search" / "search_index.js").read_text(encoding="utf-8").startswith("var __index = {")
    nested = (tmp_path / "guides" / "local.html").read_text(encoding="utf-8")
    assert '<script src="../assets/iframe-worker/shim.js">' in nested  # relative: file:// has no site root
    remote = re.findall(r'<(?:script|link)[^>]*(?:src|href)="(https?://[^"]+)"', index)
    assert remote == [], remote
