"""The text of `output/failure`, which SageMaker shows as the job's FailureReason (standard library only).

FailureReason keeps at most 1024 characters (docs/PLATFORM.md §1.1), and a user reads it first:
the script's own error comes first — type, message, the innermost frame in the user's code, host
and rank (`contract.worker_errors`) — then why it was not restarted, then where the logs are, then
the script's traceback (its outer frames dropped first when it does not fit). torchrun's own
tracebacks never stand in for it: without a worker error, the end of the output is shown less
torchrun's log lines, its frames and its `SignalException` blocks (`stop_noise`).
"""

from __future__ import annotations

import re

from sm_dist.container.stop_noise import without_stop_noise
from sm_dist.contract.worker_errors import WorkerError, torchruns_own, users_frame

#: SageMaker keeps the first 1024 characters of output/failure as FailureReason (docs/PLATFORM.md §1.1).
FAILURE_MAX_CHARS = 1024
#: Where a SageMaker training job's logs go, one stream per host (docs/PLATFORM.md §1.6).
LOG_GROUP = "/aws/sagemaker/TrainingJobs"

_GLOG_LINE = re.compile(r"^[IWEF]\d{4} ")  # torchrun's own log lines: "W1121 21:54:47.678000 …"
_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'^File "([^"]+)", line \d+')


def useful_lines(lines: list[str]) -> list[str]:
    """stderr minus torchrun's noise: its log lines, separators, its own exceptions (a SignalException
    traceback whose start the tail no longer holds included) and every frame outside the user's code."""
    out: list[str] = []
    in_other_frame = False
    for line in without_stop_noise(lines):
        stripped = line.strip()
        frame = _FRAME.match(stripped)
        if frame:
            in_other_frame = not users_frame(frame.group(1))
            if in_other_frame:
                continue
        elif in_other_frame and line.startswith("    "):
            continue
        else:
            in_other_frame = False
        if not stripped or _GLOG_LINE.match(line) or set(stripped) <= set("^~=-") or torchruns_own(stripped):
            continue
        out.append(line)
    # a traceback header whose frames and exception were all torchrun's
    return [line for i, line in enumerate(out)
            if line.strip() != _TRACEBACK or (i + 1 < len(out) and out[i + 1].startswith((" ", "\t")))]


def where_logs_are(job: str, host: str, local_log: str | None = None) -> str:
    """The host's log: its CloudWatch stream, or local mode's file (`contract.container.LOCAL_LOG_ENV`)."""
    if local_log:
        return f"logs: {local_log}"
    return f"logs: CloudWatch {LOG_GROUP}, stream {job}/{host}-*"


def compose(why: str, logs: str, host: str, error: WorkerError | None, tail: list[str]) -> str:
    """`why` (its first line the error), `logs`, then the script's traceback when the error has one,
    else the end of the output; at most FAILURE_MAX_CHARS, the body trimmed from its start."""
    head = f"{why}\n{logs}\n"
    if error is not None and error.trace:
        body = "\n".join(error.trace)
    else:
        head += f"sm_dist launcher on {host}; last output:\n"
        body = "\n".join(useful_lines(tail))
    if len(head) >= FAILURE_MAX_CHARS:
        return head[:FAILURE_MAX_CHARS - 1] + "…"
    room = FAILURE_MAX_CHARS - len(head)
    return head + (body if len(body) <= room else "…" + body[-(room - 1):])
