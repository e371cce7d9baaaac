"""IAM's policy simulator (iam:SimulatePrincipalPolicy) for moto, which does not implement it.

moto stores roles and their policies but answers SimulatePrincipalPolicy with an error, and the
suite used to switch role validation off instead (SAGEMAKER_VALIDATE_ROLE=false). Here the call is
answered the way IAM answers it (docs/PLATFORM.md §10): the principal's identity policies — inline
and attached managed ones, as moto stores them — evaluated per action and resource with IAM's
documented logic:

- an explicit Deny wins, else any Allow allows, else the decision is implicitDeny;
- Action/NotAction match case-insensitively, Resource/NotResource case-sensitively, with `*` and `?`;
- a condition whose key is absent from the request context is false, except for the negated
  operators (StringNotEquals, …), `...IfExists` and Null, as the condition-operator reference says;
  an operator this module does not know raises, so a test never passes by accident.

The response has the API's shape: EvaluationResults (EvalActionName, EvalResourceName,
EvalDecision, MatchedStatements, MissingContextValues), IsTruncated. `install(monkeypatch)` adds it
to moto's IAM responses, in-process and for moto's server threads alike.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import unquote

import pytest

Context = Mapping[str, list[str]]

_NEGATED = ("StringNotEquals", "StringNotEqualsIgnoreCase", "StringNotLike", "ArnNotEquals", "ArnNotLike")


def _listed(value: Any) -> list[Any]:
    """A policy element as a list; moto renders AWS::NoValue list entries as None (PLATFORM §5): dropped."""
    items = value if isinstance(value, list) else [value]
    return [v for v in items if v is not None]


_OPERATORS: dict[str, Callable[[str, str], bool]] = {
    "StringEquals": lambda want, got: want == got,
    "StringNotEquals": lambda want, got: want == got,  # negated below
    "StringEqualsIgnoreCase": lambda want, got: want.lower() == got.lower(),
    "StringNotEqualsIgnoreCase": lambda want, got: want.lower() == got.lower(),
    "StringLike": lambda want, got: fnmatch.fnmatchcase(got, want),
    "StringNotLike": lambda want, got: fnmatch.fnmatchcase(got, want),
    "ArnEquals": lambda want, got: fnmatch.fnmatchcase(got, want),
    "ArnLike": lambda want, got: fnmatch.fnmatchcase(got, want),
    "ArnNotEquals": lambda want, got: fnmatch.fnmatchcase(got, want),
    "ArnNotLike": lambda want, got: fnmatch.fnmatchcase(got, want),
    "Bool": lambda want, got: str(want).lower() == str(got).lower(),
}


def _condition_holds(operator: str, key: str, wanted: Any, context: Context) -> bool:
    """One operator on one key; IAM's rules for a key missing from the context."""
    base = operator.removesuffix("IfExists")
    values = context.get(key) or context.get(key.lower())
    if base == "Null":
        return (values is None) == (str(wanted).lower() == "true")
    if base not in _OPERATORS:
        raise NotImplementedError(f"condition operator {operator} is not evaluated by this simulator")
    if values is None:
        return operator.endswith("IfExists") or base in _NEGATED
    match = any(_OPERATORS[base](str(w), v) for w in _listed(wanted) for v in values)
    return not match if base in _NEGATED else match


def _conditions_hold(conditions: Mapping[str, Mapping[str, Any]] | None, context: Context) -> bool:
    for operator, keys in (conditions or {}).items():
        for key, wanted in keys.items():
            if not _condition_holds(operator, key, wanted, context):
                return False
    return True


def _matches(statement: Mapping[str, Any], action: str, resource: str, context: Context) -> bool:
    if "Action" in statement:
        hit = any(fnmatch.fnmatchcase(action.lower(), a.lower()) for a in _listed(statement["Action"]))
    else:
        hit = not any(fnmatch.fnmatchcase(action.lower(), a.lower()) for a in _listed(statement.get("NotAction")))
    if not hit:
        return False
    if "Resource" in statement:
        hit = any(fnmatch.fnmatchcase(resource, r) for r in _listed(statement["Resource"]))
    else:
        hit = not any(fnmatch.fnmatchcase(resource, r) for r in _listed(statement.get("NotResource")))
    return hit and _conditions_hold(statement.get("Condition"), context)


def evaluate(documents: Iterable[tuple[str, Mapping[str, Any]]], action: str, resource: str,
             context: Context) -> tuple[str, list[str]]:
    """(EvalDecision, ids of the matched policies) for one action on one resource."""
    allowed: list[str] = []
    for policy_id, document in documents:
        statements = document.get("Statement") or []
        for statement in [statements] if isinstance(statements, dict) else statements:
            if statement is None or not _matches(statement, action, resource, context):
                continue
            if statement.get("Effect") == "Deny":
                return "explicitDeny", [policy_id]
            allowed.append(policy_id)
    return ("allowed", allowed) if allowed else ("implicitDeny", [])


def role_documents(backend: Any, role_arn: str) -> list[tuple[str, Mapping[str, Any]]]:
    """A moto IAM backend's identity policies of a role: inline, then attached managed ones."""
    name = role_arn.rsplit("/", 1)[-1]
    found: list[tuple[str, Mapping[str, Any]]] = []
    for policy_name in backend.list_role_policies(name):
        _, document = backend.get_role_policy(name, policy_name)
        found.append((policy_name, _document(document)))
    attached, _ = backend.list_attached_role_policies(name)
    for policy in attached:
        version = next(v for v in policy.versions if v.is_default)
        found.append((policy.name, _document(version.document)))
    return found


def _document(document: Any) -> Mapping[str, Any]:
    return json.loads(unquote(document)) if isinstance(document, str) else document


def _context(entries: list[Mapping[str, Any]] | None) -> dict[str, list[str]]:
    return {e["ContextKeyName"]: list(e.get("ContextKeyValues") or []) for e in entries or []}


def simulate_principal_policy(self: Any) -> Any:
    """moto IamResponse method: the API's answer, from the principal's stored policies."""
    from moto.core.responses import ActionResult

    source = self._get_param("PolicySourceArn")
    actions = self._get_param("ActionNames", [])
    resources = self._get_param("ResourceArns") or ["*"]
    context = _context(self._get_param("ContextEntries"))
    documents = role_documents(self.backend, source)
    results = []
    for action in actions:
        for resource in resources:
            decision, matched = evaluate(documents, action, resource, context)
            results.append({
                "EvalActionName": action, "EvalResourceName": resource, "EvalDecision": decision,
                "MatchedStatements": [{"SourcePolicyId": m, "SourcePolicyType": "IAM Policy"} for m in matched],
                "MissingContextValues": [],
            })
    return ActionResult({"EvaluationResults": results, "IsTruncated": False})


def install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Answer iam:SimulatePrincipalPolicy in moto (in-process mock and server threads)."""
    from moto.iam.responses import IamResponse

    monkeypatch.setattr(IamResponse, "simulate_principal_policy", simulate_principal_policy, raising=False)


def store_as_iam_does(role_arn: str) -> None:
    """moto's CloudFormation keeps a role's inline policies as dicts with AWS::NoValue entries as None, which
    its enforcement cannot read; store them as IAM does (JSON text, no empty entries; PLATFORM §10)."""
    from moto.iam.models import iam_backends

    backend, name = iam_backends["123456789012"]["global"], role_arn.rsplit("/", 1)[1]

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        return [clean(v) for v in value if v is not None] if isinstance(value, list) else value

    for policy in backend.list_role_policies(name):
        backend.put_role_policy(name, policy, json.dumps(clean(backend.get_role_policy(name, policy)[1])))
