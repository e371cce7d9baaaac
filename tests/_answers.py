"""Answers for the AWS operations moto does not implement (Service Quotas for SageMaker,
DescribeTrainingPlan), given to one boto3 Session's clients while moto answers the rest.

botocore's Stubber replaces a whole client; a fit makes many calls moto should answer, so this
registers a `before-call` handler on the session for one operation only — the hook Stubber itself
uses — and checks each answer against the operation's output shape in botocore's service model,
as Stubber does, so an answer has the real API's shape (docs/PLATFORM.md §1.10).
"""

from __future__ import annotations

import copy
import json
from typing import Any


def error(code: str, message: str = "") -> dict[str, Any]:
    """An error answer: raised to the caller as botocore's ClientError with this code."""
    return {"Error": {"Code": code, "Message": message or code}}


def answer(session: Any, service: str, operation: str, *responses: dict[str, Any]) -> list[dict[str, Any]]:
    """Make the clients `session` creates from now on answer `operation` with `responses` in turn
    (the last one again once they run out). Returns the parameters of every call it answered (the
    request body: JSON services' parameters as sent)."""
    import botocore.session
    from botocore.awsrequest import AWSResponse
    from botocore.validate import ParamValidator

    model = botocore.session.get_session().get_service_model(service)
    shape = model.operation_model(operation).output_shape
    for response in responses:
        if "Error" not in response:
            report = ParamValidator().validate(response, shape)
            assert not report.has_errors(), report.generate_report()
    queue, calls = list(responses), []

    def handler(params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        body = params.get("body")
        calls.append(json.loads(body) if isinstance(body, bytes) and body else {"body": body})
        response = copy.deepcopy(queue.pop(0) if len(queue) > 1 else queue[0])
        return AWSResponse(None, 400 if "Error" in response else 200, {}, None), response

    session.events.register(f"before-call.{model.service_id.hyphenize()}.{operation}", handler)
    return calls


def sagemaker_quota(name: str, code: str, value: float, region: str = "us-east-1") -> dict[str, Any]:
    """One SageMaker quota as ListAWSDefaultServiceQuotas and GetServiceQuota return it (the
    `ServiceQuota` shape; codes in tests are made up)."""
    return {"ServiceCode": "sagemaker", "ServiceName": "Amazon SageMaker", "QuotaCode": code, "QuotaName": name,
            "QuotaArn": f"arn:aws:servicequotas:{region}:123456789012:sagemaker/{code}", "Value": value,
            "Unit": "None", "Adjustable": True, "GlobalQuota": False}
