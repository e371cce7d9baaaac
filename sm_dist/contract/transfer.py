"""How the runtime moves checkpoint files to and from S3: the settings the runtime uses and the
estimator prices (a checkpoint's save and restore seconds, `sm_dist.estimator.goodput`).

s3transfer's defaults (docs/PLATFORM.md §4.3) are 8 MiB parts and 10 threads; the runtime keeps
the part size and uses 8 threads per rank, leaving a core to training. Standard library only, and
no imports at all: `sm-dist estimate-cost` reads it at start-up.
"""

from __future__ import annotations

#: Files from this size go up in parts of this size (s3transfer's multipart_threshold/chunksize).
MULTIPART_THRESHOLD_BYTES = 8 << 20
#: Parallel part transfers per rank (s3transfer's max_concurrency); every rank uploads its own files.
MAX_CONCURRENCY = 8

__all__ = ["MAX_CONCURRENCY", "MULTIPART_THRESHOLD_BYTES"]
