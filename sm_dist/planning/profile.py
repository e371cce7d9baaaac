"""The caller's AWS profile, when it names one that does not exist.

botocore raises ProfileNotFound from any Session when AWS_PROFILE names a profile missing from
the AWS config files — and the SageMaker SDK makes a Session when it is imported (its JumpStart
default region), and so does moto's server, which local mode runs in this process. Neither
needs a profile (a local job needs no AWS setting at all), so they run with such a variable set
aside, restored afterwards; a Session a cloud plan needs later (role, infra) turns it into a
ConfigError naming the fix.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

from sm_dist.errors import ConfigError

_log = logging.getLogger(__name__)
#: Profiles already reported missing (one log line per process, not one per guarded block).
_told: set[str] = set()


def missing_profile() -> str | None:
    """AWS_PROFILE when it names a profile the AWS config files lack, else None."""
    name = os.environ.get("AWS_PROFILE")
    if not name:
        return None
    import botocore.session

    return None if name in botocore.session.Session().available_profiles else name


@contextlib.contextmanager
def without_missing_profile() -> Iterator[None]:
    """Run the block with an AWS_PROFILE that names a missing profile set aside, then restore it."""
    name = missing_profile()
    if name is None:
        yield
        return
    if name not in _told:
        _told.add(name)
        _log.info("AWS_PROFILE=%s is not in your AWS config files; ignored here (no AWS call needs it)", name)
    os.environ.pop("AWS_PROFILE", None)
    try:
        yield
    finally:
        os.environ["AWS_PROFILE"] = name


def profile_error() -> ConfigError:
    """The error for a Session that failed on a missing profile."""
    return ConfigError("AWS_PROFILE", os.environ.get("AWS_PROFILE"), "no such profile in your AWS config files; "
                       "unset it or name one from `aws configure list-profiles`")


__all__ = ["missing_profile", "profile_error", "without_missing_profile"]
