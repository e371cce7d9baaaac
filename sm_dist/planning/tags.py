"""The tags sm_dist puts on a job, so any process can read its estimate and checkpoints back later.

The plan writes them (`sm_dist_tags`); the cloud job handle reads them (`Job.cost()`,
`Job.checkpoints()`), from the process that launched the job or any other.
"""

from __future__ import annotations

from sm_dist._version import __version__
from sm_dist.contract.chain import (
    TAG_CHECKPOINT,
    TAG_LINK,
    TAG_POLICY,
    TAG_RUN,
    TAG_STATE,
    ChainPolicy,
    RunState,
)
from sm_dist.planning.preflight import MAX_TAG_VALUE_CHARS, tag_text_ok

TAG_ESTIMATE = "sm-dist:estimate-usd"
TAG_MAX_COST = "sm-dist:max-cost-usd"
TAG_VERSION = "sm-dist:version"
TAG_STRATEGY = "sm-dist:strategy"
#: What `sm-dist cost JOB` turns into a calibration (`estimator.calibration.from_job`): the planned training
#: tokens and the parameters each token's FLOPs count.
TAG_TOKENS = "sm-dist:tokens"
TAG_FLOPS_PARAMS = "sm-dist:flops-params"
def sm_dist_tags(strategy: str, estimate_usd: float | None, max_cost_usd: float | None,
                 checkpoint_uri: str | None, *, tokens: float | None = None,
                 flops_params: int | None = None) -> dict[str, str]:
    """Version, strategy, estimate, cost ceiling, checkpoint URI and the model's work as tags."""
    tags = {TAG_VERSION: __version__, TAG_STRATEGY: strategy}
    if tokens is not None and flops_params is not None:
        tags[TAG_TOKENS] = f"{tokens:.6g}"
        tags[TAG_FLOPS_PARAMS] = str(flops_params)
    if estimate_usd is not None:
        tags[TAG_ESTIMATE] = f"{estimate_usd:.2f}"
    if max_cost_usd is not None:
        tags[TAG_MAX_COST] = f"{max_cost_usd:.2f}"
    if checkpoint_uri and len(checkpoint_uri) <= MAX_TAG_VALUE_CHARS and tag_text_ok(checkpoint_uri):
        tags[TAG_CHECKPOINT] = checkpoint_uri  # else the API refuses it; Job.checkpoints() reads CheckpointConfig
    return tags


def chain_tags(run: str, link: int, policy: ChainPolicy, state: RunState) -> dict[str, str]:
    """The tags of a run's link (contract.chain): the run, the link's number, the run's policy and
    its state before the link, which the supervisor reads when the link ends."""
    return {TAG_RUN: run, TAG_LINK: str(link), TAG_POLICY: policy.to_tag(), TAG_STATE: state.to_tag()}


__all__ = ["TAG_ESTIMATE", "TAG_FLOPS_PARAMS", "TAG_MAX_COST", "TAG_STRATEGY", "TAG_TOKENS", "TAG_VERSION", "chain_tags",
           "sm_dist_tags"]
