"""MkDocs hooks for the site (mkdocs.yml `hooks:`): pages made from the code, and a docstring gate.

- `reference/cli.md`: every `sm-dist` command's `--help`, rendered from the argparse parsers at build time
  (`sm_dist.cli.build_parser`), so the page cannot drift from the command line.
- `quickstart.md`: the executed quickstart notebook (`docs/notebooks/quickstart.ipynb`, written by
  `python tools/docs/refresh_quickstart.py`) as a page, its outputs included.
- Every public name an API page documents (a `::: name` line), and the public methods, properties and
  attributes of the classes among them, must have a docstring: a missing one is a warning, which
  `mkdocs build --strict` turns into a failed build.
"""

from __future__ import annotations

import argparse
import html
import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.sm_dist")

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # document the checkout the site is built from, whatever sm_dist is installed
    sys.path.insert(0, str(ROOT))
NOTEBOOK = "notebooks/quickstart.ipynb"
#: Terminal width argparse formats the help with (it reads $COLUMNS): the same page everywhere, as wide as the
#: page's code blocks (no horizontal scrolling at 1280 px).
HELP_COLUMNS = "76"


# --- the CLI reference -------------------------------------------------------------------------------------------

def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    out: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            out += list(action.choices.items())
    return out


def cli_help() -> dict[str, str]:
    """`sm-dist --help` and each command's (and sub-command's) `--help` text, by command line."""
    from sm_dist import cli

    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS
    try:
        pages = {"sm-dist": cli._top_parser().format_help()}
        for command in cli.COMMANDS:
            parser = cli.build_parser(command)
            pages[parser.prog] = parser.format_help()
            for _, sub in _subparsers(parser):
                pages[sub.prog] = sub.format_help()
    finally:
        if saved is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved
    return pages


def cli_page() -> str:
    lines = [
        "# Command line",
        "",
        "Every `sm-dist` command's `--help`, generated from the parsers when the site is built "
        "(`tools/docs/hooks.py`). The guides say when to use which: "
        "[plan and estimate](../guides/estimate.md), [rehearse locally](../guides/local.md), "
        "[launch on SageMaker](../guides/launch.md), [infrastructure](../guides/infra.md).",
        "",
        "Bad input is one line naming the field, the value and the fix, and exit code 2; nothing is created.",
        "",
    ]
    for prog, text in cli_help().items():
        lines += [f"## `{prog}`", "", "```text", text.rstrip(), "```", ""]
    return "\n".join(lines)


# --- the quickstart notebook as a page ---------------------------------------------------------------------------

def _text(value: str | list[str]) -> str:
    return value if isinstance(value, str) else "".join(value)


def _output(output: dict[str, Any]) -> str:
    kind = output["output_type"]
    if kind == "stream":
        css = "nb-stderr" if output.get("name") == "stderr" else "nb-stream"
        return f'<div class="nb-output {css}"><pre>{html.escape(_text(output["text"]))}</pre></div>'
    if kind == "error":
        return f'<div class="nb-output nb-stderr"><pre>{html.escape(output["ename"] + ": " + output["evalue"])}</pre></div>'
    data = output.get("data", {})
    if "image/png" in data:
        alt = html.escape(_text(data.get("text/plain", "a figure")))
        return f'<div class="nb-output"><img alt="{alt}" src="data:image/png;base64,{_text(data["image/png"]).strip()}"></div>'
    if "text/html" in data:  # the kernel's own HTML (the tables, the live views), as Jupyter shows it
        return f'<div class="nb-output nb-html">{_text(data["text/html"])}</div>'
    return f'<div class="nb-output"><pre>{html.escape(_text(data.get("text/plain", "")))}</pre></div>'


def notebook_page(path: Path) -> str:
    """The notebook as markdown: its markdown cells as they are, code cells highlighted, outputs as HTML."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    parts = [
        "<!-- generated from docs/notebooks/quickstart.ipynb by tools/docs/hooks.py -->",
    ]
    for cell in notebook["cells"]:
        source = _text(cell["source"])
        if cell["cell_type"] == "markdown":
            parts.append(source)
            if source.startswith("# "):
                parts.append(
                    "This page is [`examples/quickstart.ipynb`](notebooks/quickstart.ipynb) as a kernel ran it "
                    "(`python tools/docs/refresh_quickstart.py`), outputs included. The notebook in "
                    "`examples/` is stored without outputs; open it in Jupyter to run it yourself."
                )
            continue
        outputs = "".join(_output(o) for o in cell.get("outputs", []))
        parts.append(f"```python\n{source}\n```")
        if outputs:
            parts.append(f'<div class="nb-outputs" markdown="0">{outputs}</div>')
    return "\n\n".join(parts) + "\n"


# --- the docstring gate ------------------------------------------------------------------------------------------

#: `::: identifier` and the options block under it (indented lines).
DIRECTIVE = re.compile(r"^:::\s+([\w.]+)((?:\n[ ]{4}.*)*)", re.M)


def _documented(docs_dir: Path) -> list[tuple[str, str, bool]]:
    """(page, identifier, whether its members are shown) of every `::: identifier` on the API pages."""
    found = []
    for page in sorted((docs_dir / "reference" / "api").glob("*.md")):
        for name, options in DIRECTIVE.findall(page.read_text(encoding="utf-8")):
            found.append((page.relative_to(docs_dir).as_posix(), name, "members: false" not in options))
    return found


def _public_members(obj: Any) -> list[Any]:
    members = []
    for name, member in obj.members.items():
        if name.startswith("_") or member.is_alias:
            continue
        # methods, nested classes and properties; a plain data field shows its type and default instead
        if member.is_function or member.is_class or (member.is_attribute and "property" in member.labels):
            members.append(member)
    return members


def undocumented(docs_dir: Path, package_name: str = "sm_dist", search_path: Path = ROOT) -> list[str]:
    """'page: name' for each documented public name (and public member of a documented class) without a docstring."""
    import griffe

    loader = griffe.GriffeLoader(search_paths=[str(search_path)])
    package = loader.load(package_name)
    loader.resolve_aliases(implicit=True, external=False)
    missing = []
    for page, name, with_members in _documented(docs_dir):
        obj = package[name.removeprefix(f"{package_name}.")]
        obj = obj.final_target if obj.is_alias else obj
        targets = [obj] + (_public_members(obj) if with_members and (obj.is_class or obj.is_module) else [])
        missing += [f"{page}: {t.path}" for t in targets if not (t.docstring and t.docstring.value.strip())]
    return missing


# --- MkDocs events -----------------------------------------------------------------------------------------------

def on_files(files: Files, config: Any) -> Files:
    """Add the generated pages."""
    docs_dir = Path(config["docs_dir"])
    files.append(File.generated(config, "reference/cli.md", content=cli_page()))
    files.append(File.generated(config, "quickstart.md", content=notebook_page(docs_dir / NOTEBOOK)))
    return files


def on_pre_build(config: Any) -> None:
    """Warn (a failed build under --strict) for every public name on an API page that has no docstring."""
    for entry in undocumented(Path(config["docs_dir"])):
        log.warning("no docstring: %s", entry)
