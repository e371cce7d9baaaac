"""docs/ARCHITECTURE.md stays true: every module under sm_dist/ is named in its package's entry of
the Layout section, so a newcomer finds it from the design document."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_ENTRY = re.compile(r"^(?P<indent> *)(?P<name>[A-Za-z_][\w]*)/")
_WORD = re.compile(r"[A-Za-z_]\w*")


def layout_block(text: str) -> list[str]:
    """The lines of the code block under '## Layout'."""
    section = text.split("## Layout", 1)[1]
    return section.split("```", 2)[1].splitlines()[1:]


def names_by_package(lines: list[str]) -> dict[str, set[str]]:
    """Package path ('' for sm_dist itself, 'runtime/checkpoint', ...) -> the words written in its entry.

    An entry is a line starting with `name/` (indented under its parent) and the comment lines
    that follow it; lines of other words belong to the innermost open entry."""
    words: dict[str, set[str]] = {"": set()}
    stack: list[tuple[int, str]] = []  # (indent, name) of the open entries
    for line in lines:
        match = _ENTRY.match(line)
        if match and line.strip() not in ("",) and not line.lstrip().startswith("#"):
            indent = len(match.group("indent"))
            while stack and stack[-1][0] >= indent:
                stack.pop()
            stack.append((indent, match.group("name")))
        elif line.strip() and not line.lstrip().startswith("#"):
            indent = len(line) - len(line.lstrip())
            while stack and stack[-1][0] >= indent:
                stack.pop()
        package = "/".join(name for _, name in stack if name != "sm_dist")
        words.setdefault(package, set()).update(_WORD.findall(line))
    return words


def unnamed_modules(text: str, root: Path) -> list[str]:
    words = names_by_package(layout_block(text))
    missing = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        package = "/".join(path.relative_to(root).parts[:-1])
        if path.stem not in words.get(package, set()):
            missing.append(str(path.relative_to(root.parent)))
    return missing


def test_every_module_is_named_in_the_layout() -> None:
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert unnamed_modules(text, REPO / "sm_dist") == []


def test_the_check_sees_a_module_named_only_in_another_package(tmp_path: Path) -> None:
    root = tmp_path / "sm_dist"
    for rel in ("cli.py", "local/runner.py", "local/extra.py", "cloud/job.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("")
    doc = ("## Layout\n\n```\nsm_dist/\n  cli.py\n  local/   # runner\n  cloud/   # job, and local's\n"
           "                      #   extra is named here, not under local/\n```\n")
    assert unnamed_modules(doc, root) == ["sm_dist/local/extra.py"]


def worlds_table(text: str) -> dict[str, dict[str, str]]:
    """The table under '## Import worlds': world -> its cells ('packages', 'may import', 'third-party')."""
    section = text.split("## Import worlds", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip().strip("|").split("|") for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in rows[0]]
    return {cells[0].strip(): dict(zip(header[1:], (c.strip() for c in cells[1:]))) for cells in rows[2:]}


def _third_party(cell: str, table: dict[str, dict[str, str]]) -> str:
    """A cell's text, "as plan" replaced by the plan row's."""
    return table["plan"]["third-party"] if cell.startswith("as ") else cell


def test_the_import_worlds_table_is_the_checks_table() -> None:
    """Each row of ARCHITECTURE.md's import-worlds table says what tests/test_imports.py enforces: the
    same worlds, the packages in each, what each may import, and its third-party packages."""
    from test_imports import (
        ALLOWED,
        CORE_EXCEPTIONS,
        PREFIXES,
        THIRD_PARTY_ANYWHERE,
        THIRD_PARTY_IN_FUNCTIONS,
        world_of,
    )

    table = worlds_table((REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8"))
    assert set(table) == {world.value for world in ALLOWED}
    every_package = set().union(*THIRD_PARTY_ANYWHERE.values(), *THIRD_PARTY_IN_FUNCTIONS.values(),
                                (package for _, package in CORE_EXCEPTIONS))
    for world, allowed in ALLOWED.items():
        row = table[world.value]
        assert {w.strip() for w in row["may import"].split(",")} == {w.value for w in allowed}, world
        for prefix, prefix_world in PREFIXES.items():  # every package the check places is in its row
            name = prefix if prefix.startswith("sm_dist.") else f"{prefix}/"
            if prefix_world == world and prefix != "sm_dist":
                assert f"`{name}`" in row["packages"], (world, name)
        for named in re.findall(r"`(sm_dist\.[\w.]+)`", row["packages"]):
            assert world_of(named) == world, (world, named)
        cell = _third_party(row["third-party"], table)
        wanted = THIRD_PARTY_ANYWHERE.get(world, set()) | THIRD_PARTY_IN_FUNCTIONS.get(world, set())
        wanted |= {package for _, package in CORE_EXCEPTIONS} if world.value == "core" else set()
        said = {p for p in every_package if re.search(rf"(?<![\w/]){re.escape(p)}(?![\w/])", cell)}
        assert said == wanted, (world, sorted(said), sorted(wanted))
        if THIRD_PARTY_IN_FUNCTIONS.get(world):
            assert "inside functions" in cell, world
    core = table["core"]["third-party"]
    for module, _ in CORE_EXCEPTIONS:
        assert f"`{module.removeprefix('sm_dist.').replace('.', '/')}.py`" in core, module
