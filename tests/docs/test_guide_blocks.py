"""The site's code blocks against the code: every block of the README, the landing page, Getting started and the
guides says how it is checked, on a comment line right above it, and is checked so:

    <!-- check: run -->                  executed here, in-process (python: exec; bash: each `sm-dist` command
                                         through sm_dist.cli.main); exit 0
    <!-- check: dry-run: WHY -->         each `sm-dist fit` is planned with --dry-run (nothing starts), the
                                         other `sm-dist` commands parsed; WHY names the test that runs it
    <!-- check: parse: WHY -->           each `sm-dist` command parsed by its real parser (it needs AWS)
    <!-- check: compile: WHY -->         python compiled (it needs AWS, a GPU or torchrun)
    <!-- check: same-as-readme: MARK --> the README's marked command, character for character
    <!-- check: slow: WHY -->            the block run by bash in a scratch folder (it starts processes)
    <!-- check: skip: WHY -->            not run here, for the reason given

A block of output is fenced as `text` and needs no check. A new block without a check fails the test, so the
guides cannot hold an example nobody runs or parses.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
#: The pages a user follows: the landing page, getting started and the guides (the reference pages, platform
#: facts and the maintainers' architecture, are not examples to run).
PAGES = [REPO / "README.md", DOCS / "index.md", DOCS / "getting-started.md", *sorted((DOCS / "guides").glob("*.md"))]
KINDS = {"run", "dry-run", "parse", "compile", "same-as-readme", "slow", "skip"}
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)\s*$")
CHECK = re.compile(r"^\s*<!-- check: (?P<kind>[\w-]+)(?::\s*(?P<why>.*?))?\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    code: str
    kind: str | None
    why: str
    after: str  # the next block's text (the output a `run` block shows), or ""

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def blocks() -> list[Block]:
    found: list[Block] = []
    for path in PAGES:
        lines = path.read_text(encoding="utf-8").split("\n")
        i = 0
        while i < len(lines):
            fence = FENCE.match(lines[i])
            if not fence:
                i += 1
                continue
            indent, start = len(fence["indent"]), i
            i += 1
            body = []
            while not lines[i].strip().startswith("```"):
                body.append(lines[i][indent:])
                i += 1
            i += 1
            check = _check(lines, start)
            found.append(Block(path.relative_to(REPO).as_posix().removeprefix("docs/"), start + 1, fence["lang"], "\n".join(body),
                               check["kind"] if check else None, (check["why"] or "") if check else "", ""))
    return [_with_output(b, found) for b in found]


def _check(lines: list[str], fence: int) -> re.Match[str] | None:
    """The check among the comment lines right above a fence (a README marker may stand between them)."""
    at = fence - 1
    while at >= 0 and lines[at].lstrip().startswith("<!--"):
        if match := CHECK.match(lines[at]):
            return match
        at -= 1
    return None


def _with_output(block: Block, found: list[Block]) -> Block:
    later = [b for b in found if b.page == block.page and b.line > block.line]
    after = later[0].code if later and later[0].lang == "text" else ""
    return Block(block.page, block.line, block.lang, block.code, block.kind, block.why, after)


ALL = blocks()


def commands(code: str) -> list[list[str]]:
    """The `sm-dist` command lines of a shell block, as argv after `sm-dist` (continuations joined, comments off)."""
    out = []
    code = _without_subshells(code.replace("\\\n", " "))
    for line in code.split("\n"):
        for part in line.split("&&"):
            words = shlex.split(part, comments=True)
            if words and words[0].endswith("sm-dist"):
                out.append([w for w in words[1:] if w != "..."])
    return out


def _without_subshells(code: str) -> str:
    """`$(...)` (nested parentheses too) replaced by a word: it stands for a value."""
    while (start := code.find("$(")) >= 0:
        depth, end = 0, start + 1
        for end in range(start + 1, len(code)):
            depth += {"(": 1, ")": -1}.get(code[end], 0)
            if depth == 0:
                break
        code = code[:start] + "VALUE" + code[end + 1:]
    return code


def readme_command(mark: str) -> str:
    """The command under the README's `<!-- MARK` line, as .ci/run finds it: the first line of the next block."""
    lines = (REPO / "README.md").read_text(encoding="utf-8").split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith(f"<!-- {mark}"))
    fence = next(i for i in range(at, len(lines)) if lines[i].startswith("```"))
    return lines[fence + 1]


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder to run in, with the repository's example folders where the guides name them."""
    for name in ("entrypoints", "tests"):
        (tmp_path / name).symlink_to(REPO / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("SM_DIST_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path


def _ids(kinds: set[str]) -> list[Block]:
    return [b for b in ALL if b.kind in kinds]


def test_every_block_says_how_it_is_checked() -> None:
    assert len(ALL) > 20
    unchecked = [str(b) for b in ALL if b.lang != "text" and b.kind is None]
    assert not unchecked, f"code blocks without a <!-- check: ... --> line before them: {unchecked}"
    unknown = [f"{b}: {b.kind}" for b in ALL if b.kind is not None and b.kind not in KINDS]
    assert not unknown, unknown
    unexplained = [str(b) for b in ALL if b.kind in KINDS - {"run", "same-as-readme"} and not b.why]
    assert not unexplained, f"say why these are not run: {unexplained}"
    named = [b for b in ALL if b.kind == "dry-run"]
    for b in named:  # a "the run itself is tests/..." must name a test file that exists
        path = re.search(r"tests/\S+\.py", b.why)
        assert path and (REPO / path.group(0)).is_file(), f"{b}: {b.why}"


@pytest.mark.parametrize("block", _ids({"same-as-readme"}), ids=str)
def test_the_getting_started_commands_are_the_readme_ones(block: Block) -> None:
    assert block.code == readme_command(block.why)


@pytest.mark.parametrize("block", _ids({"parse", "dry-run"}), ids=str)
def test_shell_commands_parse(block: Block) -> None:
    from sm_dist.cli import build_parser

    argvs = commands(block.code)
    assert argvs, f"{block}: no sm-dist command in the block"
    for argv in argvs:
        command, rest = argv[0], argv[1:]
        if "--" in rest:
            rest = rest[: rest.index("--")]
        build_parser(command).parse_args(rest)


@pytest.mark.parametrize("block", _ids({"dry-run"}), ids=str)
def test_local_runs_plan(block: Block, scratch: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sm_dist.cli import main

    fits = [argv for argv in commands(block.code) if argv[0] == "fit"]
    assert fits
    for argv in fits:
        assert main(["fit", "--dry-run", *argv[1:]]) == 0, capsys.readouterr().err
        assert "PID 1" in capsys.readouterr().out


@pytest.mark.parametrize("block", _ids({"compile"}), ids=str)
def test_python_compiles(block: Block) -> None:
    assert block.lang == "python", f"{block}: compile is for python blocks"
    compile(block.code, str(block), "exec")


@pytest.mark.parametrize("block", _ids({"run"}), ids=str)
def test_runnable_blocks_run(block: Block, scratch: Path, capsys: pytest.CaptureFixture[str],
                             aws_credentials: str) -> None:
    if block.lang == "python":
        namespace: dict[str, object] = {"__name__": "__docs__", **_yours(block)}
        if "moto" not in block.why:
            exec(compile(block.code, str(block), "exec"), namespace)
            return
        import boto3
        from moto import mock_aws

        with mock_aws():
            for bucket in re.findall(r"s3://([a-z0-9.-]+)/", block.code):
                boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=bucket)
            exec(compile(block.code, str(block), "exec"), namespace)
            keys = [o["Key"] for o in boto3.client("s3", region_name="us-east-1").list_objects_v2(
                Bucket=bucket)["Contents"]]
        assert any(key.endswith("manifest.json") for key in keys), f"{block}: no checkpoint was committed: {keys}"
        return
    from sm_dist.cli import main

    for argv in commands(block.code):
        assert main(argv) == 0, capsys.readouterr().err
        shown = capsys.readouterr().out
        for expected in [line for line in block.after.split("\n") if line.startswith("Recommendation")]:
            assert expected in shown, f"{block}: the page says\n{expected}\nthe command printed\n{shown}"


def _yours(block: Block) -> dict[str, object]:
    """What a block leaves to the reader ("... are yours"): a small stand-in for each name it uses."""
    torch = pytest.importorskip("torch")
    from sm_dist.runtime import ResumableDistributedSampler

    class Schedule:  # a scheduler's part the checkpointer uses: its state
        def __init__(self) -> None:
            self.steps = 0

        def step(self) -> None:
            self.steps += 1

        def state_dict(self) -> dict[str, int]:
            return {"steps": self.steps}

        def load_state_dict(self, state: dict[str, int]) -> None:
            self.steps = state["steps"]

    def train_step(model: object, opt: object, sched: Schedule) -> None:
        opt.step()  # type: ignore[attr-defined]
        sched.step()

    names: dict[str, object] = {
        "my_module": torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)),
        "build_model": lambda: torch.nn.Linear(8, 2),
        "MyModel": lambda: torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)),
        "dataset": torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randint(0, 3, (64,))),
        "epochs": 1,
        "accum": 2,
        "sampler": ResumableDistributedSampler(16),
        "sched": Schedule(),
        "total_steps": 200,  # one checkpoint at the guide's interval_steps=200
        "train_step": train_step,
    }
    return {name: value for name, value in names.items() if re.search(rf"\b{name}\b", block.code)}


@pytest.mark.slow
@pytest.mark.parametrize("block", _ids({"slow"}), ids=str)
def test_process_blocks_run(block: Block, scratch: Path) -> None:
    script = block.code.replace("sm-dist ", f"{sys.executable} -m sm_dist.cli ")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=scratch, capture_output=True, text=True,
                          env={**os.environ, "TMPDIR": str(scratch)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
