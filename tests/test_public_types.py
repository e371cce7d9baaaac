"""The public API as a type checker sees it, and the lists that keep it so.

`import sm_dist` resolves its names lazily (PEP 562), so the packages that do (sm_dist, runtime,
runtime.checkpoint, cloud, local) also import them under `if TYPE_CHECKING:`; these tests keep
those imports equal to `_LAZY` and `__all__`, and `LaunchSettings` (the keyword arguments of
`fit`/`plan`) equal to `LaunchConfig`'s fields. The last test is a user's: mypy,
on a small script (a child process, so marked slow), sees the real types and finds a misspelled
keyword, and finds nothing to say about the quickstart notebook's code.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import subprocess
import sys
import types
import typing
from pathlib import Path
from typing import Any

import pytest

from sm_dist.planning.channels import Channel
from sm_dist.planning.config import LaunchConfig
from sm_dist.planning.settings import LaunchSettings

REPO = Path(__file__).resolve().parents[1]


def lazy_packages() -> list[Path]:
    """Every __init__.py that builds its __getattr__ with `lazy_exports`."""
    return sorted(p for p in (REPO / "sm_dist").rglob("__init__.py") if "lazy_exports(" in p.read_text("utf-8"))


def _is_type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"


def exports(path: Path) -> tuple[dict[str, str], dict[str, str], list[str], set[str]]:
    """(_LAZY, the `if TYPE_CHECKING:` imports as name -> "module:attribute", __all__, the names the
    module binds at run time) of one package, read from its source."""
    tree = ast.parse(path.read_text("utf-8"))
    lazy: dict[str, str] = {}
    checked: dict[str, str] = {}
    bound: set[str] = set()
    all_names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name == "_LAZY":
                lazy = ast.literal_eval(node.value)
            elif name == "__all__":
                value = node.value  # a list, or sorted(_LAZY)
                is_sorted_lazy = ast.unparse(value) == "sorted(_LAZY)"
                all_names = sorted(lazy) if is_sorted_lazy else ast.literal_eval(value)
            bound.add(name)
        elif isinstance(node, ast.ImportFrom):
            bound.update(alias.asname or alias.name for alias in node.names)
        elif _is_type_checking(node):
            assert isinstance(node, ast.If)
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom), ast.unparse(stmt)
                for alias in stmt.names:
                    assert alias.asname == alias.name, f"{path}: `import {alias.name} as {alias.name}` re-exports it"
                    checked[alias.name] = f"{stmt.module}:{alias.name}"
            assert [ast.unparse(s) for s in node.orelse] == [
                "__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())"], path
    return lazy, checked, all_names, bound


@pytest.mark.parametrize("path", lazy_packages(), ids=lambda p: str(p.parent.relative_to(REPO)))
def test_type_checking_imports_are_the_lazy_exports(path: Path) -> None:
    lazy, checked, all_names, bound = exports(path)
    assert lazy, path
    assert checked == lazy  # same names, same targets: a lazy name mypy would see as Any fails here
    assert set(lazy) <= set(all_names)
    assert set(all_names) - set(lazy) <= bound  # the rest of __all__ is imported or defined eagerly
    assert len(all_names) == len(set(all_names))


def test_channels_constructor_is_its_fields() -> None:
    """Channel's `if TYPE_CHECKING:` __init__ (what mypy checks a call against: strings for the
    enums) names the dataclass's fields, positional and keyword-only alike."""
    tree = ast.parse((REPO / "sm_dist/planning/channels.py").read_text("utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Channel")
    block = next(n for n in cls.body if _is_type_checking(n))
    assert isinstance(block, ast.If)
    init = next(n for n in block.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    fields = [f for f in dataclasses.fields(Channel) if f.init]
    assert [a.arg for a in init.args.args[1:]] == [f.name for f in fields if not f.kw_only]
    assert [a.arg for a in init.args.kwonlyargs] == [f.name for f in fields if f.kw_only]


def test_the_lazy_packages_are_found() -> None:
    found = {str(p.relative_to(REPO)) for p in lazy_packages()}
    assert {"sm_dist/__init__.py", "sm_dist/runtime/__init__.py", "sm_dist/local/__init__.py"} <= found


def _members(hint: Any) -> tuple[Any, ...]:
    return typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)


def accepts(wide: Any, narrow: Any) -> bool:
    """Whether every value of type `narrow` is one of `wide` (unions, literals, and generics member by member)."""
    if wide == narrow or wide is Any:
        return True
    if typing.get_origin(wide) is typing.Literal and typing.get_origin(narrow) is typing.Literal:
        return set(typing.get_args(narrow)) <= set(typing.get_args(wide))
    if len(_members(narrow)) > 1:
        return all(accepts(wide, n) for n in _members(narrow))
    if len(_members(wide)) > 1:
        return any(accepts(w, narrow) for w in _members(wide))
    w_args, n_args = typing.get_args(wide), typing.get_args(narrow)
    return (typing.get_origin(wide) is not None and typing.get_origin(wide) == typing.get_origin(narrow)
            and len(w_args) == len(n_args) and all(accepts(w, n) for w, n in zip(w_args, n_args)))


#: The settings whose type is wider than the field's: what the field's check takes and normalizes.
WIDER = {"precision", "args", "metrics", "subnets", "security_group_ids", "ignore_patterns", "inputs",
         "fallback_instance_types", "mlflow", "strategy", "checkpoint_mode"}


def test_launch_settings_are_launch_configs_fields() -> None:
    config = typing.get_type_hints(LaunchConfig)
    settings = typing.get_type_hints(LaunchSettings)
    names = [f.name for f in dataclasses.fields(LaunchConfig)]
    from sm_dist.planning.settings import SECTIONS

    assert names[0] == "entry" and sorted(settings) == sorted(names[1:] + list(SECTIONS))  # entry: fit's 1st argument
    assert {name for _, fields in SECTIONS.values() for name in fields.values()} <= set(names)  # a section's: flat ones
    settings = {name: hint for name, hint in settings.items() if name not in SECTIONS}
    assert LaunchSettings.__required_keys__ == frozenset()  # a local plan needs none
    assert {name for name in settings if settings[name] != config[name]} == WIDER
    assert [name for name in settings if not accepts(settings[name], config[name])] == []


def test_accepts_is_a_check() -> None:
    assert accepts(str | None, str) and accepts(tuple[str, ...] | list[str], tuple[str, ...])
    assert accepts(typing.Literal["a", "b"] | None, typing.Literal["a"]) and not accepts(typing.Literal["a"], str)
    assert not accepts(typing.Literal["a"], typing.Literal["a", "b"])
    assert not accepts(str, str | None) and not accepts(list[str], tuple[str, ...])
    assert not accepts(typing.Mapping[str, str], typing.Mapping[str, Channel])


def test_the_wider_settings_are_accepted(tmp_path: Path) -> None:
    """Each wider type's extra values really pass LaunchConfig's checks, as the field's type."""
    wide: LaunchSettings = {"precision": "bf16", "args": ["--x"], "metrics": ["loss"], "subnets": ["subnet-1"],
                            "security_group_ids": ["sg-1"], "ignore_patterns": ["*.pt"],
                            "inputs": {"a": "s3://bucket/a", "b": {"source": "s3://bucket/b", "mode": "FastFile"},
                                       "c": Path(tmp_path)},
                            "mlflow": {"arn": "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/t"}}
    config = LaunchConfig.from_mapping({"entry": "train.py", "instance_type": "ml.g5.xlarge", **wide})
    assert str(config.precision) == "bf16" and config.metrics == ("loss",) and config.subnets == ("subnet-1",)
    assert all(isinstance(channel, Channel) for channel in config.inputs.values())
    assert config.inputs["b"].mode.value == "FastFile"
    assert config.mlflow is not None and config.mlflow.arn.endswith("mlflow-tracking-server/t")


GOOD = '''\
import sm_dist
from sm_dist.vocab import Strategy

job = sm_dist.fit("train.py", instance_type="ml.g5.2xlarge", instance_count=2, local=True)
reveal_type(sm_dist.fit)
reveal_type(job)
reveal_type(sm_dist.fit("train.py", instance_type="ml.p4d.24xlarge", spot=True, checkpoint_s3_uri="s3://b/c"))
reveal_type(sm_dist.plan("train.py", local=True, precision="bf16", metrics=["loss", "acc"]))
est = sm_dist.estimate(model="llama2-7b", tokens=2e12, instance_types=["ml.p4d.24xlarge"], instance_counts=[4, 8],
                       strategies=["zero1", Strategy.FSDP], precision="mixed")
reveal_type(est)
reveal_type(sm_dist.Channel("./data", distribution="ShardedByS3Key", mode="FastFile"))
reveal_type(sm_dist.LocalOptions(chaos=["kill:3"], verify=True))
settings: sm_dist.LaunchSettings = dict(instance_type="ml.g5.xlarge", instance_count=2, hyperparameters={"steps": 6},
                                        strategy="auto", checkpoint_mode="sagemaker-sync", output_compression="none")
sm_dist.fit("cnn.py", local=True, **settings, local_options={"verify": True, "chaos": ["kill:3"]})
try:
    job.wait()
except sm_dist.ConfigError as exc:
    print(exc.field)
ARN = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/team"
live = sm_dist.plan("train.py", instance_type="ml.p4d.24xlarge", instance_count=4, keep_alive_s=1800, tensorboard=True,
                    remote_debug=True, infra_check=None, mlflow={"arn": ARN, "run": "r"},
                    inputs={"train": {"source": "s3://b/t", "mode": "FastFile"}})
print(live.tensorboard_uri, job.tensorboard(port=6007), sm_dist.Job("j").release(), sm_dist.Job("j").cost().retained_usd)
by_section = sm_dist.plan("train.py", compute=sm_dist.Compute(instance_type="ml.p4d.24xlarge", instance_count=4, spot=True),
                          stopping=sm_dist.StoppingCondition(max_cost_usd=500.0), data=sm_dist.Data(inputs={"t": "s3://b/t"}),
                          networking=sm_dist.Networking(subnets=["subnet-1"], security_group_ids=["sg-1"]),
                          observability=sm_dist.Observability(tensorboard=True, metrics=["loss"]),
                          chaining=sm_dist.Chaining(chain=True, max_links=5))
print(by_section.request)


def run(on_laptop: bool) -> None:
    handle = sm_dist.fit("train.py", instance_type="ml.g5.xlarge", local=on_laptop,
                         checkpoint=sm_dist.Checkpointing(interval_steps=100, mode="s3", s3_uri="s3://b/c"))
    reveal_type(handle)
    if isinstance(handle, sm_dist.LocalJob):
        print(handle.exit_code)
    reveal_type(sm_dist.attach("a-job"))
'''

#: Each line of the user's mistakes, and the words mypy's error on that line must contain. The first six are the
#: closed vocabularies and the local options a user's type checker once let through (issue 37).
BAD = {
    'sm_dist.plan("train.py", strategy="zero3")': 'Argument "strategy" to "plan"',
    'sm_dist.plan("train.py", checkpoint_mode="s4")': 'Argument "checkpoint_mode" to "plan"',
    'sm_dist.plan("train.py", precision="fp9")': 'Argument "precision" to "plan"',
    'sm_dist.Channel("./data", mode="Filee")': 'Argument "mode" to "Channel"',
    'sm_dist.fit("train.py", local=True, local_options={"verifyy": True})': 'Argument "local_options" to "fit"',
    'sm_dist.estimate(model="llama2-7b", strategies=["zero4"])': "\"Literal['zero4']\"",
    'sm_dist.fit("train.py", instance_type="ml.g5.2xlarge", instance_cout=2)': '"instance_cout" for "fit"; did you mean',
    'sm_dist.plan("train.py", instance_type="ml.g5.2xlarge", chekpoint_s3_uri="s3://b/c")': '"chekpoint_s3_uri"',
    'sm_dist.plan("train.py", instance_type="ml.g5.2xlarge", instance_count="2")': '"instance_count"',
    'sm_dist.fit("train.py", local=True, instance_count="2")': 'Argument "instance_count" to "fit"',
    'sm_dist.fitt("train.py")': '"fitt"',
    'bad: sm_dist.LaunchSettings = {"instance_type": "ml.g5.xlarge", "spott": True}': '"spott"',
    'sm_dist.plan("train.py", instance_type="ml.g5.2xlarge", keep_alive_s="600")': '"keep_alive_s"',
    'sm_dist.plan("train.py", instance_type="ml.g5.2xlarge", tensorboard="yes")': '"tensorboard"',
    'sm_dist.plan("train.py", instance_type="ml.g5.2xlarge", mlflow={"experiment": "e"})': '"mlflow"',
    'sm_dist.plan("train.py", output_compression="zip")': 'Argument "output_compression" to "plan"',
    'sm_dist.plan("train.py", checkpoint=sm_dist.Checkpointing(interval_step=100))': '"interval_step"',
    'sm_dist.plan("train.py", inputs={"t": {"source": "s3://b/t", "distribution": "Sharded"}})': 'ChannelSettings',
    'sm_dist.plan("train.py", compute=sm_dist.Compute(instance_count="4"))': 'Argument "instance_count" to "Compute"',
}
#: The most a user's mypy may print for one misspelled `fit` keyword (three overloads printed 6,958 characters).
TYPO_REPORT_CHARS = 1500


def notebook_code(path: Path) -> str:
    """A notebook's code cells as one script, the way a user's editor or nbqa hands them to mypy."""
    import json

    cells = json.loads(path.read_text())["cells"]
    return "\n\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code") + "\n"


@pytest.mark.slow  # a child process: see the docstring
def test_a_users_mypy_sees_the_real_types(tmp_path: Path) -> None:
    """mypy on a user's script in a folder of its own, with no mypy settings: sm_dist is found as an
    installed package (.venv's editable install and its py.typed).

    In a child process, not through mypy.api in this one: after a cold run mypy keeps ~2.9 million
    objects alive (measured with gc.get_objects() after gc.collect()), so every later gc.collect() in
    the test process (the runtime calls one when a process group closes) took ~3 s instead of 0.03 s.
    """
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "bad.py").write_text("import sm_dist\n\n" + "\n".join(BAD) + "\n")
    (tmp_path / "notebook.py").write_text(notebook_code(REPO / "examples" / "quickstart.ipynb"))
    (tmp_path / "mypy.ini").write_text("[mypy]\n")
    files = ["good.py", "bad.py", "notebook.py"]
    # cwd: neither the repo's pyproject nor its folder on mypy's path
    run = subprocess.run([sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir",
                          str(tmp_path / "cache"), *files], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    out, err = run.stdout, run.stderr
    assert err == "" and "Cannot find implementation" not in out, out
    lines = out.splitlines()
    assert [line for line in lines if line.startswith("notebook.py:")] == []  # the quickstart, as a user checks it
    good = [line for line in lines if line.startswith("good.py:")]
    assert [line for line in good if ": note: Revealed type" not in line] == []
    revealed = [re.sub(r"^good\.py:\d+: note: Revealed type is ", "", line).strip('"') for line in good]
    assert revealed[0].startswith("def (entry: str, *, local: bool =")  # one signature, not Any
    assert revealed[0].count("**settings: **TypedDict(sm_dist.planning.settings.LaunchSettings, {") == 1
    handle = "sm_dist.cloud.job.Job | sm_dist.cloud.run.Run | sm_dist.local.job.LocalJob | sm_dist.slurm.job.SlurmJob"
    assert revealed[1:4] == [handle, handle, "sm_dist.planning.plan.Plan"]
    assert "fallback=sm_dist.estimator.result.Estimate]" in revealed[4]
    assert revealed[5:7] == ["sm_dist.planning.channels.Channel", "sm_dist.local.options.LocalOptions"]
    assert revealed[7:] == [handle, "sm_dist.contract.job.JobHandle"]  # fit(local=a_bool) is accepted
    errors = [line for line in lines if line.startswith("bad.py:") and ": error:" in line]
    for number, (code, expected) in enumerate(BAD.items(), start=3):
        on_line = [e for e in errors if e.startswith(f"bad.py:{number}:")]
        assert on_line and expected in on_line[0], (code, on_line)
    assert len({e.split(":")[1] for e in errors}) == len(BAD)
    typo = [line for line in lines if line.startswith("bad.py:9:")]  # the misspelled fit keyword, with its notes
    assert len("\n".join(typo)) < TYPO_REPORT_CHARS, typo


def test_the_user_script_runs_the_lazy_path() -> None:
    """What mypy read under TYPE_CHECKING is what `import sm_dist` hands out at run time."""
    import sm_dist
    from sm_dist.launch.api import fit
    from sm_dist.local.options import LocalOptions

    assert sm_dist.fit is fit and sm_dist.LocalOptions is LocalOptions and sm_dist.LaunchSettings is LaunchSettings


def test_the_public_words_are_the_enums_values() -> None:
    """Each closed vocabulary's `Literal` (what a user's type checker sees) holds its enum's values, no more, no
    fewer: the runtime converts the words to the enums once, at the boundary."""
    from sm_dist.contract.checkpoint import CheckpointMode, CheckpointModeName
    from sm_dist.contract.faults import CHAOS_KINDS, ChaosKind
    from sm_dist.planning.channels import Distribution, DistributionName, InputMode, InputModeName
    from sm_dist.planning.config import OUTPUT_COMPRESSIONS, OutputCompression
    from sm_dist.vocab import Precision, PrecisionName, Strategy, StrategyName

    for words, enum in ((StrategyName, Strategy), (PrecisionName, Precision), (CheckpointModeName, CheckpointMode),
                        (InputModeName, InputMode), (DistributionName, Distribution)):
        assert typing.get_args(words) == tuple(member.value for member in enum), enum
    assert typing.get_args(OutputCompression) == OUTPUT_COMPRESSIONS and typing.get_args(ChaosKind) == CHAOS_KINDS


def test_the_local_options_dict_is_the_records_fields() -> None:
    from sm_dist.local.options import LocalOptions, LocalOptionsDict

    assert list(typing.get_type_hints(LocalOptionsDict)) == [f.name for f in dataclasses.fields(LocalOptions)]
    assert LocalOptionsDict.__required_keys__ == frozenset()
