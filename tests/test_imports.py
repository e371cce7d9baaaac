"""The import worlds (docs/ARCHITECTURE.md: the core imports only the standard library), checked over every
import statement.

Every module under sm_dist/ and entrypoints/ is parsed; every import it contains (module level, inside
a function, or `importlib.import_module("literal")`) is an edge from the importer's world to the
imported module's world. Worlds come from package prefixes, so a new module is checked without
editing this file. One fresh interpreter then checks what the static walk cannot: what `import
sm_dist` and `sm-dist estimate-cost` really load.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("sm_dist", "entrypoints")


class World(StrEnum):
    CORE = "core"  # sm_dist's top-level modules, catalog, estimator, contract: the standard library only
    CONTAINER = "container"  # the stdlib PID-1 code the training container runs first
    PLAN = "plan"  # the user's machine: the plan layer and `sm-dist infra`
    CLOUD = "cloud"  # the cloud backend: a plan becomes a SageMaker job
    LOCAL = "local"  # the local backend: a plan runs on this machine
    SLURM = "slurm"  # the Slurm backend: a plan runs on a Slurm cluster (HyperPod's or another)
    FACADE = "facade"  # sm_dist.plan/fit and `sm-dist fit`: the only world that sees both backends
    RUNTIME = "runtime"  # inside the training job: torch
    TOOLS = "tools"  # tools that measure or compare (measure-memory, selfcheck, weights_compare): torch + the runtime


#: Longest matching prefix wins; anything else under sm_dist is core (the strictest world).
PREFIXES = {
    "sm_dist": World.CORE,
    "sm_dist.container": World.CONTAINER,
    "sm_dist.planning": World.PLAN,
    "sm_dist.provision": World.PLAN,
    "sm_dist.cloud": World.CLOUD,
    "sm_dist.local": World.LOCAL,
    "sm_dist.slurm": World.SLURM,
    "sm_dist.launch": World.FACADE,
    "sm_dist.runtime": World.RUNTIME,
    "sm_dist.tools": World.TOOLS,
    "entrypoints": World.RUNTIME,
}

#: Which worlds a world may import. The backends are peers: neither imports the other nor the
#: facade above them. Nothing on the user's machine imports the runtime, nor the runtime them.
ALLOWED = {
    World.CORE: {World.CORE},
    World.CONTAINER: {World.CORE, World.CONTAINER},
    World.PLAN: {World.CORE, World.PLAN},
    World.CLOUD: {World.CORE, World.PLAN, World.CLOUD},
    World.LOCAL: {World.CORE, World.PLAN, World.LOCAL},
    World.SLURM: {World.CORE, World.PLAN, World.SLURM},
    World.FACADE: {World.CORE, World.PLAN, World.CLOUD, World.LOCAL, World.SLURM, World.FACADE},
    World.RUNTIME: {World.CORE, World.CONTAINER, World.RUNTIME},
    World.TOOLS: {World.CORE, World.RUNTIME, World.TOOLS},
}
#: Third-party packages a world may import anywhere.
THIRD_PARTY_ANYWHERE = {World.RUNTIME: {"torch", "numpy"}, World.TOOLS: {"torch", "numpy"}}
#: Third-party packages a world may import only inside a function (never at import time).
_USER_MACHINE = {"boto3", "botocore", "sagemaker", "moto", "yaml", "pathspec", "packaging"}
THIRD_PARTY_IN_FUNCTIONS = {
    World.PLAN: _USER_MACHINE,
    World.CLOUD: _USER_MACHINE,
    World.LOCAL: _USER_MACHINE,
    World.SLURM: _USER_MACHINE,
    World.FACADE: _USER_MACHINE,
    World.RUNTIME: {"boto3", "botocore", "mlflow"},  # the S3 checkpoint storage; mlflow= (runtime/mlflow_log.py)
}
#: The core's only third-party imports, each inside a function of one module, each optional:
#: `estimate-cost --prices live` asks the AWS Pricing API; `Estimate.plot()` and `job.plot()` draw
#: with matplotlib (sm_dist.notebook.plot); the live view updates a notebook's display through
#: IPython, imported only inside a kernel, which has loaded it already.
#: (The estimator reads an nn.Module by duck typing, so it never imports torch.)
CORE_EXCEPTIONS = {
    ("sm_dist.estimator.prices_live", "boto3"),
    ("sm_dist.estimator.prices_live", "botocore"),
    ("sm_dist.notebook.plot", "matplotlib"),
    ("sm_dist.notebook.live", "IPython"),
}
#: The package itself (sm_dist/__init__.py) names its lazy exports from every world under
#: `if TYPE_CHECKING:`, for type checkers only (tests/test_public_types.py keeps them equal to
#: `_LAZY`); at run time each loads on first access. No other module gets this.
PUBLIC_FACE = "sm_dist"


@dataclass(frozen=True, kw_only=True)
class Edge:
    """One import in one module."""

    importer: str
    imported: str
    line: int
    in_function: bool  # inside a def (or under `if TYPE_CHECKING:`): not run at import time
    type_only: bool = False  # under `if TYPE_CHECKING:`: never run at all


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_modules() -> dict[str, Path]:
    """Every module of the package and the entrypoints, by dotted name."""
    found = {}
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            found[module_name(path)] = path
    return found


def world_of(module: str) -> World | None:
    """The world of an sm_dist or entrypoints module; None for anything else."""
    matches = [prefix for prefix in PREFIXES if module == prefix or module.startswith(prefix + ".")]
    return PREFIXES[max(matches, key=len)] if matches else None


class _Collector(ast.NodeVisitor):
    """Collects the imports of one module, noting which run only when a function is called."""

    def __init__(self, module: str, is_package: bool, known: Mapping[str, object]) -> None:
        self.module, self.package = module, module if is_package else module.rpartition(".")[0]
        self.known = known
        self.depth = 0
        self.type_checking = 0
        self.edges: list[Edge] = []

    def _add(self, imported: str, node: ast.stmt | ast.expr) -> None:
        self.edges.append(Edge(importer=self.module, imported=imported, line=node.lineno, in_function=self.depth > 0,
                               type_only=self.type_checking > 0))

    def _deferred(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _deferred

    def visit_If(self, node: ast.If) -> None:
        if "TYPE_CHECKING" in ast.unparse(node.test):
            self.type_checking += 1
            self._deferred(node)
            self.type_checking -= 1
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            anchor = self.package.split(".")[: len(self.package.split(".")) - (node.level - 1)]
            base = ".".join([*anchor, *([node.module] if node.module else [])])
        for alias in node.names:  # `from sm_dist import runtime` imports the module sm_dist.runtime
            self._add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in self.known else base, node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        first = node.args[0] if node.args else None
        if name == "import_module" and isinstance(first, ast.Constant) and isinstance(first.value, str):
            self._add(first.value, node)
        self.generic_visit(node)


def imports_of(module: str, source: str, known: Mapping[str, object], *, is_package: bool = False) -> list[Edge]:
    collector = _Collector(module, is_package, known)
    collector.visit(ast.parse(source))
    return collector.edges


def problem(edge: Edge) -> str | None:
    """Why `edge` breaks the rule, or None."""
    world = world_of(edge.importer)
    assert world is not None, edge.importer
    if edge.type_only and edge.importer == PUBLIC_FACE:
        return None
    target = world_of(edge.imported)
    if target is not None:
        if target in ALLOWED[world]:
            return None
        allowed = ", ".join(sorted(ALLOWED[world]))
        return f"{world} module imports {edge.imported} ({target} world); {world} may import {allowed}"
    top = edge.imported.split(".")[0]
    if top in sys.stdlib_module_names:
        return None
    if edge.type_only:  # annotations only (boto3's stubs, IPython's printer): never imported at run time
        return None
    if top in THIRD_PARTY_ANYWHERE.get(world, set()):
        return None
    if edge.in_function and (top in THIRD_PARTY_IN_FUNCTIONS.get(world, set())
                             or (edge.importer, top) in CORE_EXCEPTIONS):
        return None
    where = "inside a function" if edge.in_function else "at import time"
    return f"{world} module imports third-party {edge.imported} {where}; not allowed for the {world} world"


def violations(modules: Mapping[str, str], packages: frozenset[str] = frozenset()) -> Iterator[str]:
    """'module:line: why' for every import in `modules` (name -> source) that breaks the rule."""
    for name, source in modules.items():
        for edge in imports_of(name, source, modules, is_package=name in packages):
            why = problem(edge)
            if why:
                yield f"{edge.importer}:{edge.line}: {why}"


def import_cycles(modules: Mapping[str, str], packages: frozenset[str] = frozenset()) -> list[list[str]]:
    """Groups of modules that import each other, directly or around a circle (Tarjan's strongly
    connected components). Every import that runs counts, inside a function too; only
    `if TYPE_CHECKING:` imports do not. An import of a package's attribute counts as one of the
    module that defines it (`from sm_dist.local import api` -> sm_dist.local.api)."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, source in modules.items():
        for edge in imports_of(name, source, modules, is_package=name in packages):
            target = edge.imported
            while target not in modules and "." in target:
                target = target.rpartition(".")[0]
            if not edge.type_only and target in modules and target != name:
                graph[name].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(cycles)


def test_no_import_cycles() -> None:
    paths = source_modules()
    modules = {name: path.read_text(encoding="utf-8") for name, path in paths.items()}
    packages = frozenset(name for name, path in paths.items() if path.name == "__init__.py")
    assert import_cycles(modules, packages) == []


def test_a_cycle_hidden_in_a_function_is_found() -> None:
    modules = {"sm_dist.planning.plan": "from sm_dist.planning import report\n",
               "sm_dist.planning.report": "def render():\n    from sm_dist.planning.plan import Plan\n",
               "sm_dist.planning.tags": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                        "    from sm_dist.planning.plan import Plan\n",
               "sm_dist.planning": ""}
    assert import_cycles(modules, frozenset({"sm_dist.planning"})) == [
        ["sm_dist.planning.plan", "sm_dist.planning.report"]]


def test_every_import_stays_in_its_world() -> None:
    paths = source_modules()
    modules = {name: path.read_text(encoding="utf-8") for name, path in paths.items()}
    packages = frozenset(name for name, path in paths.items() if path.name == "__init__.py")
    assert {world_of(name) for name in modules} == set(World)
    assert list(violations(modules, packages)) == []


def test_the_walk_sees_function_level_literal_and_package_imports() -> None:
    """The checker itself: imports that run only when called, or that name a module indirectly."""
    launch_source = (
        "import json\n"
        "def go():\n"
        "    from sm_dist.runtime import context\n"
        "    import boto3\n"
        "def later():\n"
        "    import importlib\n"
        "    return importlib.import_module('sm_dist.runtime.context')\n"
        "from sm_dist import runtime\n"
        "import yaml\n"
    )
    modules = {"sm_dist.planning.fake": launch_source, "sm_dist.runtime": "", "sm_dist.runtime.context": "",
               "sm_dist.errors": "def f():\n    import torch\n"}
    found = sorted(violations(modules))
    assert found == [
        "sm_dist.errors:2: core module imports third-party torch inside a function; not allowed for the core world",
        ("sm_dist.planning.fake:3: plan module imports sm_dist.runtime.context (runtime world); plan may import "
         "core, plan"),
        ("sm_dist.planning.fake:7: plan module imports sm_dist.runtime.context (runtime world); plan may import "
         "core, plan"),
        "sm_dist.planning.fake:8: plan module imports sm_dist.runtime (runtime world); plan may import core, plan",
        "sm_dist.planning.fake:9: plan module imports third-party yaml at import time; not allowed for the plan world",
    ]


def test_only_the_public_face_names_other_worlds_for_type_checkers() -> None:
    """sm_dist/__init__.py's `if TYPE_CHECKING:` imports may name the facade; a core module's may not."""
    type_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from sm_dist.launch.api import fit\n"
    modules = {"sm_dist": type_only, "sm_dist.vocab": type_only, "sm_dist.launch.api": ""}
    assert list(violations(modules, frozenset({"sm_dist"}))) == [
        "sm_dist.vocab:3: core module imports sm_dist.launch.api (facade world); core may import core"]


def test_the_backends_are_peers() -> None:
    """A planted import of one backend by the other (or of the facade by a backend) is caught."""
    modules = {"sm_dist.local.job": "def status():\n    from sm_dist.cloud.job import Job\n",
               "sm_dist.cloud.job": "from sm_dist.local import summary\n",
               "sm_dist.cloud.submit": "from sm_dist.launch.api import fit\n",
               "sm_dist.launch.api": "from sm_dist.cloud import job\nfrom sm_dist.local import api\n",
               "sm_dist.local.summary": "", "sm_dist.local.api": "", "sm_dist.local": "", "sm_dist.cloud": ""}
    assert sorted(violations(modules)) == [
        "sm_dist.cloud.job:1: cloud module imports sm_dist.local.summary (local world); cloud may import cloud, core, plan",
        ("sm_dist.cloud.submit:1: cloud module imports sm_dist.launch.api (facade world); cloud may import cloud, "
         "core, plan"),
        "sm_dist.local.job:2: local module imports sm_dist.cloud.job (cloud world); local may import core, local, plan",
    ]


def test_the_container_world() -> None:
    """The PID-1 code is stdlib + core; the runtime may use it, the user's machine may not."""
    modules = {"sm_dist.container.pid1": "import torch\nfrom sm_dist.errors import ContainerStartError\n",
               "sm_dist.container.env": "from sm_dist.runtime import context\nimport json\n",
               "sm_dist.runtime.context": "import torch\nfrom sm_dist.container import env\n",
               "sm_dist.local.local_run": "def f():\n    from sm_dist.container import pid1\n",
               "sm_dist.runtime": "", "sm_dist.container": ""}
    assert sorted(violations(modules)) == [
        ("sm_dist.container.env:1: container module imports sm_dist.runtime.context (runtime world); container may "
         "import container, core"),
        ("sm_dist.container.pid1:1: container module imports third-party torch at import time; not allowed for "
         "the container world"),
        ("sm_dist.local.local_run:2: local module imports sm_dist.container.pid1 (container world); local may "
         "import core, local, plan"),
    ]


@pytest.mark.slow
def test_import_sm_dist_and_estimate_cost_load_no_heavy_package() -> None:
    """What the static walk cannot see (lazy exports, the CLI's command table, package __init__s),
    in one fresh interpreter: `import sm_dist`, `sm-dist estimate-cost`, every command's --help,
    and the PID-1 modules load no torch, boto3, sagemaker or numpy."""
    container = sorted(name for name in source_modules() if world_of(name) is World.CONTAINER)
    probe = (
        "import importlib, json, sys\n"
        "import sm_dist\n"
        "seen = {'import sm_dist': sorted(sys.modules)}\n"
        "from sm_dist import cli\n"
        "code = cli.main(['estimate-cost', '--model', 'gpt2', '--tokens', '1e9', '--instance-type', 'ml.g5.xlarge'])\n"
        "seen['estimate-cost'] = sorted(sys.modules)\n"
        "for command in cli.COMMANDS:\n"
        "    try:\n"
        "        cli.main([command, '--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "seen['--help'] = sorted(sys.modules)\n"
        f"for name in {container!r}:\n"
        "    importlib.import_module(name)\n"
        "seen['container'] = sorted(sys.modules)\n"
        "print(json.dumps({'seen': seen, 'code': code}))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded["code"] == 0
    heavy = ("torch", "boto3", "botocore", "sagemaker", "numpy")
    for stage, modules in loaded["seen"].items():
        assert [m for m in modules if m.split(".")[0] in heavy] == [], stage
    cli_path = loaded["seen"]["estimate-cost"]
    # typing (its import, and typing.NamedTuple evaluating every field) was a tenth of the command's start-up:
    # records are sm_dist._records.Record, and `if TYPE_CHECKING:` reads that module's constant
    assert "typing" not in cli_path
    assert not [m for m in cli_path if m.startswith(("sm_dist.launch", "sm_dist.runtime", "sm_dist.local",
                                                     "sm_dist.cloud", "sm_dist.planning"))]
