"""The tags sm_dist puts on a job, so any process can read its estimate and checkpoints back later.

The plan writes them (`sm_dist_tags`); the cloud job handle reads them (`Job.cost()`,
`Job.checkpoints()`), from the process that launched the job or any other.
"""

from __future__ import annotations

from sm_dist._version import __version__
from sm_dist.planning.preflight import MAX_TAG_VALUE_CHARS, tag_text_ok

TAG_ESTIMATE = "sm-dist:estimate-usd"
TAG_MAX_COST = "sm-dist:max-cost-usd"
TAG_CHECKPOINT = "sm-dist:checkpoint-uri"
TAG_VERSION = "sm-dist:version"
TAG_STRATEGY = "sm-dist:strategy"
def sm_dist_tags(strategy: str, estimate_usd: float | None, max_cost_usd: float | None,
                 checkpoint_uri: str | None) -> dict[str, str]:
    """Version, strategy, estimate, cost ceiling and checkpoint URI as tags."""
    tags = {TAG_VERSION: __version__, TAG_STRATEGY: strategy}
    if estimate_usd is not None:
        tags[TAG_ESTIMATE] = f"{estimate_usd:.2f}"
    if max_cost_usd is not None:
        tags[TAG_MAX_COST] = f"{max_cost_usd:.2f}"
    if checkpoint_uri and len(checkpoint_uri) <= MAX_TAG_VALUE_CHARS and tag_text_ok(checkpoint_uri):
        tags[TAG_CHECKPOINT] = checkpoint_uri  # else the API refuses it; Job.checkpoints() reads CheckpointConfig
    return tags


__all__ = ["TAG_CHECKPOINT", "TAG_ESTIMATE", "TAG_MAX_COST", "TAG_STRATEGY", "TAG_VERSION", "sm_dist_tags"]
