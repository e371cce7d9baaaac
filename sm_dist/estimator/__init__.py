"""The estimator: memory per GPU, step time, hours and dollars per strategy × instance type ×
count, and a recommendation. Standard library only (core world): torch is imported only when
`estimate(model=<nn.Module>)` is given a module. The public entry point is
`sm_dist.estimator.api.estimate` (also `sm_dist.estimate`); submodules are imported on demand.
"""
