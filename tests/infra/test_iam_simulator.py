"""The test suite's IAM simulator (tests/_iam_simulator.py) answers as IAM's documented evaluation logic does.

It stands in for iam:SimulatePrincipalPolicy, so it is checked itself: against moto's own evaluator where
both apply (statements without conditions), and on the rules moto does not model (a condition key missing
from the context, negated operators, explicit deny).
"""

from __future__ import annotations

import json
from itertools import product

import pytest
from _iam_simulator import evaluate

POLICY = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["s3:Get*", "s3:PutObject"], "Resource": "arn:aws:s3:::b/team/*"},
    {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::b"},
    {"Effect": "Deny", "Action": "s3:PutObject", "Resource": "arn:aws:s3:::b/team/locked/*"},
    {"Effect": "Allow", "NotAction": "iam:*", "Resource": "arn:aws:logs:*:*:log-group:/aws/sagemaker/*"},
]}


def test_it_agrees_with_motos_evaluator_on_statements_without_conditions() -> None:
    from moto.iam.access_control import IAMPolicy, PermissionResult

    moto_policy = IAMPolicy(json.dumps(POLICY))
    actions = ["s3:GetObject", "s3:PutObject", "s3:ListBucket", "logs:PutLogEvents", "iam:PassRole"]
    resources = ["arn:aws:s3:::b/team/x", "arn:aws:s3:::b/team/locked/x", "arn:aws:s3:::b", "arn:aws:s3:::b/other",
                 "arn:aws:logs:us-east-1:1:log-group:/aws/sagemaker/TrainingJobs"]
    for action, resource in product(actions, resources):
        ours, _ = evaluate([("p", POLICY)], action, resource, {})
        theirs = moto_policy.is_action_permitted(action, resource)
        expected = {PermissionResult.PERMITTED: "allowed", PermissionResult.DENIED: "explicitDeny",
                    PermissionResult.NEUTRAL: "implicitDeny"}[theirs]
        assert ours == expected, (action, resource)
    # where moto differs: IAM matches action names case-insensitively (PLATFORM §10), moto does not
    assert evaluate([("p", POLICY)], "S3:getobject", "arn:aws:s3:::b/team/x", {})[0] == "allowed"


@pytest.mark.parametrize(("operator", "context", "decision"), [
    ("StringEquals", {}, "implicitDeny"),  # the key is missing: the condition is false
    ("StringEquals", {"cloudwatch:namespace": ["/aws/sagemaker/TrainingJobs"]}, "allowed"),
    ("StringEquals", {"cloudwatch:namespace": ["Other"]}, "implicitDeny"),
    ("StringEqualsIfExists", {}, "allowed"),
    ("StringNotEquals", {}, "allowed"),  # negated operators hold when the key is missing
    ("StringNotEquals", {"cloudwatch:namespace": ["/aws/sagemaker/TrainingJobs"]}, "implicitDeny"),
])
def test_a_condition_follows_iams_rules_for_missing_keys(operator: str, context: dict[str, list[str]],
                                                         decision: str) -> None:
    policy = {"Statement": [{"Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*",
                             "Condition": {operator: {"cloudwatch:namespace": "/aws/sagemaker/TrainingJobs"}}}]}
    assert evaluate([("p", policy)], "cloudwatch:PutMetricData", "*", context)[0] == decision


def test_an_operator_it_does_not_know_fails_loudly() -> None:
    policy = {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*",
                             "Condition": {"DateGreaterThan": {"aws:CurrentTime": "2020-01-01T00:00:00Z"}}}]}
    with pytest.raises(NotImplementedError, match="DateGreaterThan"):
        evaluate([("p", policy)], "s3:GetObject", "*", {"aws:CurrentTime": ["2026-11-26T00:00:00Z"]})
