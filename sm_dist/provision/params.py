"""Check a stack name and `--param KEY=VALUE` values before any AWS call.

The template is the single source of truth: a value is checked against the parameter's
`AllowedValues`, `AllowedPattern`, `MinLength`/`MaxLength`, `Type: Number` and
`MinValue`/`MaxValue`, and the error message is its `ConstraintDescription`. So a bad bucket
name or an unknown key fails here with one clear line, and nothing is created.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from typing import Any

from sm_dist.errors import ConfigError
from sm_dist.provision import template

# CloudFormation: starts with a letter, then letters, digits and hyphens, at most 128 chars.
_STACK_NAME = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,127}")


def check_stack_name(name: object) -> str:
    """`name` if it is a valid CloudFormation stack name, else a ConfigError."""
    if not isinstance(name, str) or not _STACK_NAME.fullmatch(name):
        raise ConfigError(
            "--stack-name", name,
            "a stack name starts with a letter and has up to 128 letters, digits and hyphens, e.g. sm-dist",
        )
    return name


def parse_assignments(items: Iterable[str]) -> dict[str, str]:
    """Turn ["K=V", ...] into {"K": "V"}; no "=" or a repeated key is a ConfigError."""
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError("--param", item, "use KEY=VALUE, e.g. --param BucketName=my-checkpoints")
        if key in result:
            raise ConfigError(f"--param {key}", value, f"given twice ({result[key]!r} and {value!r}); keep one")
        result[key] = value
    return result


def image_parameters(region: str) -> dict[str, str]:
    """The template's ECR pull permission for `region`, from sm_dist's image table: the AWS Deep
    Learning Containers account serving the region and the table's repositories (docs/PLATFORM.md
    §7.4). Empty for a region the table has no registry for (the template's defaults apply)."""
    from sm_dist.catalog.images import known_regions, registry_account, repositories

    if region not in known_regions():
        return {}
    return {"ImageAccountId": registry_account(region), "ImageRepositories": ",".join(repositories())}


def check_parameters(values: Mapping[str, str], template_name: str = template.DEFAULT_TEMPLATE) -> dict[str, str]:
    """Validate `values` against the template's Parameters; returns them as a plain dict."""
    declared: Mapping[str, Any] = template.load(template_name).get("Parameters", {})
    for key, value in values.items():
        if key not in declared:
            close = difflib.get_close_matches(key, list(declared), n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise ConfigError(f"--param {key}", value, f"unknown parameter; {hint}expected one of {sorted(declared)}")
        check_value(key, value, declared[key])
    return dict(values)


def check_value(key: str, value: str, spec: Mapping[str, Any]) -> None:
    """One value against one parameter declaration; the first violated constraint is reported."""
    field = f"--param {key}"
    why = str(spec.get("ConstraintDescription") or "").strip()
    if not isinstance(value, str):
        raise ConfigError(field, value, "values are strings (as given on the command line)")
    allowed = spec.get("AllowedValues")
    if allowed is not None and value not in [str(a) for a in allowed]:
        raise ConfigError(field, value, f"expected one of {[str(a) for a in allowed]}")
    pattern = spec.get("AllowedPattern")
    if pattern is not None and not re.fullmatch(pattern, value):
        raise ConfigError(field, value, why or f"must match {pattern}")
    length = len(value)
    if length < int(spec.get("MinLength", 0)) or length > int(spec.get("MaxLength", length)):
        raise ConfigError(field, value, why or f"length must be {spec.get('MinLength', 0)}..{spec.get('MaxLength')}")
    if spec.get("Type") == "Number":
        _check_number(field, value, spec, why)


def _check_number(field: str, value: str, spec: Mapping[str, Any], why: str) -> None:
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(field, value, why or "must be a number") from None
    low, high = spec.get("MinValue"), spec.get("MaxValue")
    if (low is not None and number < float(low)) or (high is not None and number > float(high)):
        raise ConfigError(field, value, why or f"must be between {low} and {high}")
