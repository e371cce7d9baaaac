"""Chaos specs: how local mode interrupts a job the way the cloud does.

  kill:STEP           SIGKILL one random worker rank once a log line shows step >= STEP
  kill:SECONDSs       the same, SECONDS after the first worker process started (any script:
                      no step lines needed), e.g. kill:20s
  sigterm:STEP        spot interruption: SIGTERM to every host's first process, the grace
  sigterm:SECONDSs    period, SIGKILL, then the whole job restarts from the checkpoint URI
  crash-in-save:STEP  a rank dies while the checkpoint of step STEP is being written
                      (the checkpointer's SM_DIST_FAULT hook)
  kill-in-save:N      SIGKILL to every worker as the script's N-th checkpoint save begins (its first
                      folder or file in a host's checkpoint folder, any format: sm_dist.local.save_watch),
                      so that checkpoint is left half-written, as a fault inside a save leaves it
  s3-faults[:SECONDS] the S3 endpoint answers every request with 503 SlowDown for SECONDS
                      (default 5), starting when training starts (the first step line)
  hang:STEP           one random worker rank stops making progress once a log line shows step >=
                      STEP (its main thread sleeps for ever in sm_dist's handler): PID 1's
                      hang watch must find it, name it and restart the workers (--hang-timeout-s)
  capacity:TRIES      a chain's next job gets no instances TRIES times (CapacityError), so the
                      run's wait and retry are rehearsed (with --chain; sm_dist.local.chain)
  max-wait:LINK       a spot chain's LINK-th job that runs ends by its MaxWait, not its MaxRuntime
                      (Stopped / MaxWaitTimeExceeded), so the next job's move to on demand
                      (on_demand_after) is rehearsed (with --chain --spot)

Each fault fires once per job (not again after the restart it causes). Several may be given.
The grammar and the `Fault` record are the contract's (sm_dist.contract.faults), shared with the
checkpointer's hook; what is local mode's own is which combinations a job may be given.
"""

from __future__ import annotations

from collections.abc import Iterable

from sm_dist.contract.faults import Fault, parse_fault
from sm_dist.errors import ConfigError


def parse_faults(specs: Iterable[str | Fault]) -> tuple[Fault, ...]:
    """Parse several --chaos values; a kind may appear once per step, crash-in-save once."""
    faults = tuple(s if isinstance(s, Fault) else parse_fault(s) for s in specs)
    if len(set(faults)) != len(faults):
        raise ConfigError("chaos", [str(f) for f in faults], "each chaos spec may be given once")
    for kind, what in (("capacity", "the tries of the next job"), ("max-wait", "the link that ends by it")):
        if sum(f.kind == kind for f in faults) > 1:
            raise ConfigError("chaos", [str(f) for f in faults], f"give {kind} once ({what})")
    if sum(f.kind == "kill-in-save" for f in faults) > 1:
        raise ConfigError("chaos", [str(f) for f in faults], "give kill-in-save once (the save it interrupts)")
    if sum(f.kind == "crash-in-save" for f in faults) > 1:
        raise ConfigError("chaos", [str(f) for f in faults], "give crash-in-save once (one SM_DIST_FAULT hook)")
    return faults


__all__ = ["Fault", "parse_faults"]
