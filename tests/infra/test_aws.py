"""The default session follows the standard AWS configuration, AWS_REGION included."""

from __future__ import annotations

import pytest

from sm_dist.provision import aws


def test_default_session_prefers_aws_region(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("boto3")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_REGION", "eu-west-2")
    assert aws.session_or_default().region_name == "eu-west-2"
    monkeypatch.delenv("AWS_REGION")
    assert aws.session_or_default().region_name == "us-east-1"


def test_given_session_is_used_as_is() -> None:
    marker = object()
    assert aws.session_or_default(marker) is marker
