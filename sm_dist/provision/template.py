"""The shipped CloudFormation templates: where they are, their text, and a parser for them.

Templates live in the repo's `infra/` folder (inside the wheel as `sm_dist/_infra`), found via
`sm_dist._resources.resource_dir("infra")`. The parser understands CloudFormation's short tags
(`!Ref`, `!Sub`, `!GetAtt`, `!If`, ...) and turns them into the long `{"Fn::...": ...}` form, so
code and tests can read parameters, resources and policies as plain data.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from sm_dist._resources import resource_dir
from sm_dist.errors import ConfigError

#: The template `sm-dist infra` deploys unless told otherwise.
DEFAULT_TEMPLATE = "sm-dist.yaml"

# Short tag -> long form. `!GetAtt A.B` is the one whose scalar form needs splitting.
_FUNCTIONS = ("Base64", "Cidr", "FindInMap", "GetAtt", "GetAZs", "ImportValue", "Join",
              "Select", "Split", "Sub", "Transform", "And", "Equals", "If", "Not", "Or",
              "Contains", "EachMemberEquals", "ValueOf", "Length", "ToJsonString")


def templates() -> list[str]:
    """Names of the shipped templates (`*.yaml` in the infra folder), sorted."""
    return sorted(p.name for p in resource_dir("infra").glob("*.yaml"))


def template_path(name: str = DEFAULT_TEMPLATE) -> Path:
    """Path of shipped template `name`; an unknown name is a ConfigError listing the known ones."""
    path = resource_dir("infra") / name
    if not path.is_file():
        raise ConfigError("template", name, f"expected one of {templates()}")
    return path


def template_text(name: str = DEFAULT_TEMPLATE) -> str:
    """The template exactly as shipped (what `sm-dist infra template` prints and deploy sends)."""
    return template_path(name).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def _loader() -> type:
    """A yaml SafeLoader subclass that knows CloudFormation's short tags (built on first use)."""
    import yaml

    class CfnLoader(yaml.SafeLoader):
        """SafeLoader + `!Ref`/`!Sub`/`!GetAtt`/`!If`/... mapped to their long JSON form."""

    def construct(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)
        if suffix == "Ref":
            return {"Ref": value}
        if suffix == "GetAtt" and isinstance(value, str):
            value = value.split(".", 1)
        if suffix == "Condition":
            return {"Condition": value}
        return {f"Fn::{suffix}": value}

    for name in (*_FUNCTIONS, "Ref", "Condition"):
        CfnLoader.add_constructor(f"!{name}", lambda ldr, node, s=name: construct(ldr, s, node))
    return CfnLoader


def parse(text: str) -> dict[str, Any]:
    """Parse CloudFormation YAML (short tags included) into plain dicts and lists."""
    import yaml

    data = yaml.load(text, Loader=_loader())  # noqa: S506 - a SafeLoader subclass
    if not isinstance(data, dict):
        raise ConfigError("template", type(data).__name__, "a CloudFormation template is a YAML mapping")
    return data


@lru_cache(maxsize=8)
def _load_cached(path: str, mtime: float) -> dict[str, Any]:
    return parse(Path(path).read_text(encoding="utf-8"))


def load(name: str = DEFAULT_TEMPLATE) -> dict[str, Any]:
    """The parsed shipped template `name` (cached per file version; treat it as read-only)."""
    path = template_path(name)
    return _load_cached(str(path), path.stat().st_mtime)
