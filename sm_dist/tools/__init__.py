"""Tools that measure or compare, apart from the training library (`sm_dist.runtime`).

measure + measure_cli (`sm-dist measure-memory`: real per-rank bytes against the estimate),
saved_tensors (what autograd saves for backward, per block), weights_compare (two model folders,
tensor by tensor: local mode's `--verify`, as a subprocess), selfcheck (the GPU check kit and
`sm-dist calibrate`, torch side; its stdlib entry is `python -m sm_dist.selfcheck`). They use the
runtime (its strategies and models) and torch; nothing in the training library imports them.
"""
