"""The estimator: memory per GPU, step time, hours and dollars per strategy × instance type ×
count, and a recommendation. Standard library only (core world): never torch, even when
`estimate(model=<nn.Module>)` is given a module (`hf_config.shape_of_module` reads it by duck typing). The public
entry point is `sm_dist.estimator.api.estimate` (also `sm_dist.estimate`); submodules are imported on
demand.

The result (`result.Estimate`) holds one `Row` per instance type × count × strategy (runnable, fits,
the memory breakdown, step time, hours, cost on demand and spot) and the recommendation
(`recommend`: without limits the cheapest row that fits; with `max_hours` the cheapest in time; with
`budget` the fastest within it; without `max_hours`, rows that finish within one job's 28-day
MaxRuntime first). `activation_checkpointing` and `micro_batch` left as None are
searched per row (`grid`). Memory per GPU follows `memory` (persistent bytes per parameter, the same
that `sm-dist measure-memory` measures), activations `activations`, step time `timing`, prices the
catalog (`sm_dist.catalog`) or, with `prices="live"`, the AWS Price List API (`prices_live`);
`calibration` replaces a GPU family's MFU prior with a measured one.
"""
