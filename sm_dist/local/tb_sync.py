"""TensorBoardOutputConfig as local mode plays it: every host's TensorBoard folder synced to S3 while the job runs.

SageMaker copies the job's LocalPath (/opt/ml/output/tensorboard) to S3OutputPath during the run
(docs/PLATFORM.md §1.14). Local mode does the same with the checkpoint sync's mechanism
(`local.ckpt_sync.CheckpointSync`), to the job's S3TensorBoard prefix on its own S3 endpoint, with two
differences: an event file grows for as long as its writer lives, so a changed file is uploaded at
the next pass rather than once it stops changing, and no marker files are written (TensorBoard's
folder is the script's, not a checkpoint folder); nothing is restored at the start. When the run
ends, what S3 holds is downloaded to `<run root>/tensorboard`, as `tensorboard --logdir s3://...`
would read it: the endpoint stops with the run, the folder stays (`LocalJob.tensorboard()`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from sm_dist.contract.container import TENSORBOARD_LOCAL_PATH
from sm_dist.local.ckpt_sync import CheckpointSync
from sm_dist.local.stores import Store

if TYPE_CHECKING:
    from sm_dist.local.layout import HostRoot
    from sm_dist.planning.plan import Plan

#: The run's folder the synced event files are downloaded to when it ends.
FOLDER = "tensorboard"
_log = logging.getLogger(__name__)


def tensorboard_uri(plan: Plan, label: str) -> str | None:
    """The S3 prefix a local run syncs to: the plan's S3OutputPath for the run (a chain's links share it),
    a sibling `-<label>` for a verify run, so the two runs' files never mix; None: tensorboard off."""
    uri = plan.tensorboard_uri
    if uri is None or label == "run":
        return uri
    return f"{uri.rstrip('/')}-{label}"


def start(store: Store, layouts: list[HostRoot], interval: float) -> CheckpointSync:
    """Start syncing every host's TensorBoard folder to `store` in the background."""
    folders = {lay.host: lay.container_path(TENSORBOARD_LOCAL_PATH) for lay in layouts}
    sync = CheckpointSync(store, folders, interval, what="TensorBoard", markers=False, wait_stable=False)
    sync.start()
    return sync


def download(store: Store, dest: Path) -> dict[str, int]:
    """Every key under the store's prefix into `dest`; the keys -> size (empty when the listing fails)."""
    try:
        keys = store.list()
        for key in keys:
            store.get(key, dest / key)
    except Exception as exc:  # the run's result stands; the summary's warning says what is missing
        _log.warning("cannot download the TensorBoard files from %s: %s", store.uri, exc)
        return {}
    dest.mkdir(parents=True, exist_ok=True)
    return keys


__all__ = ["FOLDER", "download", "start", "tensorboard_uri"]
