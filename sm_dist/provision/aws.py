"""Sessions, clients and AWS failures for `sm_dist.provision`, in one place.

A caller passes a boto3 Session (or None: a default `boto3.Session()` is made here, lazily), so
profiles, `AWS_REGION` and `AWS_ENDPOINT_URL` work as everywhere in boto3. Botocore failures a
user can cause (no region, no credentials, endpoint unreachable, access denied) become one-line
sm_dist errors instead of tracebacks.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from sm_dist.errors import ConfigError, InfraError

if TYPE_CHECKING:
    from boto3.session import Session
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_s3 import S3Client


def session_or_default(session: Session | None = None) -> Session:
    """`session`, or a default boto3 Session that follows the standard AWS configuration.

    botocore itself reads only AWS_DEFAULT_REGION; the AWS CLI v2 and the other SDKs also read
    AWS_REGION and let it win over AWS_DEFAULT_REGION and the profile, so the default does too.
    """
    if session is not None:
        return session
    import boto3

    return boto3.Session(region_name=os.environ.get("AWS_REGION") or None)


def cloudformation(session: Session | None) -> CloudFormationClient:
    """A CloudFormation client; a missing region is a ConfigError naming the fix."""
    with aws_errors("cloudformation client"):
        return session_or_default(session).client("cloudformation")


def s3(session: Session | None) -> S3Client:
    """An S3 client; a missing region is a ConfigError naming the fix."""
    with aws_errors("s3 client"):
        return session_or_default(session).client("s3")


def region_of(cfn_client: CloudFormationClient) -> str:
    """The region a client talks to (for messages and the config file)."""
    return str(cfn_client.meta.region_name)


def error_code(exc: BaseException) -> str:
    """The AWS error code of a botocore ClientError ("" for anything else)."""
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def error_message(exc: BaseException) -> str:
    """The AWS error message of a botocore ClientError (str(exc) for anything else)."""
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Message", "")) or str(exc)


@contextlib.contextmanager
def aws_errors(what: str) -> Iterator[None]:
    """Turn botocore's configuration and transport errors during `what` into sm_dist errors.

    ClientErrors that a caller handles itself (e.g. "stack does not exist") pass through unless
    nobody catches them earlier; uncaught ones become InfraError with the AWS code and message.
    """
    from botocore import exceptions as bce

    try:
        yield
    except bce.NoRegionError:
        raise ConfigError("region", None, "set AWS_REGION (or a region in your AWS profile)") from None
    except (bce.NoCredentialsError, bce.PartialCredentialsError):
        raise InfraError(f"{what}: no AWS credentials found; configure a profile or AWS_PROFILE") from None
    except bce.EndpointConnectionError as exc:
        raise InfraError(f"{what}: cannot reach {exc.kwargs.get('endpoint_url')}; check AWS_ENDPOINT_URL / network") from None
    except bce.ClientError as exc:
        raise InfraError(f"{what}: {error_code(exc)}: {error_message(exc)}") from None
