"""A training job's CloudWatch logs: every host's stream, interleaved by time.

SageMaker writes one stream per host, `<job>/algo-N-<epoch>`, in the log group
`/aws/sagemaker/TrainingJobs` (docs/PLATFORM.md §1.6). FilterLogEvents with the job's stream prefix
returns the events of all hosts; each page is ordered by timestamp and events already seen
(by eventId) are skipped, so following the log while the job runs repeats nothing.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_logs import CloudWatchLogsClient
    from mypy_boto3_logs.type_defs import FilteredLogEventTypeDef

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
#: Seconds between polls while following a running job.
FOLLOW_POLL_S = 5.0
_HOST = re.compile(r"^[^/]+/(algo-\d+)")


def host_of(stream_name: str) -> str:
    """'job/algo-2-1700000000' -> 'algo-2'."""
    match = _HOST.match(stream_name)
    return match.group(1) if match else stream_name.split("/", 1)[-1]


def _page_events(client: CloudWatchLogsClient, job_name: str, start_ms: int) -> Iterator[FilteredLogEventTypeDef]:
    from botocore.exceptions import ClientError

    kwargs: dict[str, Any] = {"logGroupName": LOG_GROUP, "logStreamNamePrefix": f"{job_name}/", "startTime": start_ms}
    while True:
        try:
            page = client.filter_log_events(**kwargs)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                return  # no log group yet: the job has not started writing
            raise
        # Filter again here: moto 5.2.5 ignores logStreamNamePrefix.
        ours = [e for e in page.get("events", []) if e.get("logStreamName", "").startswith(f"{job_name}/")]
        yield from sorted(ours, key=lambda e: (e["timestamp"], e.get("ingestionTime", 0)))
        token = page.get("nextToken")
        if not token:
            return
        kwargs["nextToken"] = token


def iter_log_lines(
    client: CloudWatchLogsClient, job_name: str, *, follow: bool = False, is_done: Callable[[], bool] | None = None,
    poll_s: float = FOLLOW_POLL_S, sleep: Callable[[float], None] = time.sleep,
) -> Iterator[str]:
    """Lines "[algo-N] message" for all hosts. With `follow`, keep polling until `is_done()`
    is true and one more poll brought nothing new."""
    seen: set[str] = set()
    start = 0
    while True:
        new = 0
        for event in _page_events(client, job_name, start):
            key = event.get("eventId") or f"{event['logStreamName']}:{event['timestamp']}:{event['message']}"
            if key in seen:
                continue
            seen.add(key)
            new += 1
            start = max(start, int(event["timestamp"]))
            yield f"[{host_of(event['logStreamName'])}] {event['message'].rstrip()}"
        if not follow or (new == 0 and (is_done is None or is_done())):
            return
        sleep(poll_s)


__all__ = ["LOG_GROUP", "iter_log_lines", "host_of"]
