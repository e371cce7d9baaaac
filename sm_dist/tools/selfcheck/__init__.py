"""The GPU check kit and `sm-dist calibrate`, torch side (`python -m sm_dist.tools.selfcheck`).

models.py: the LLaMA-shaped model built from the estimator's shape; checks.py: what one rank does
(train with a strategy, sync BatchNorm, fp16 loss scaling); spawn.py: rank processes on a free
port; kit.py: the kit's runs compared with the estimator, and its report; calibrate.py: N timed
steps on one GPU written as a calibration record. Started by the stdlib entry sm_dist/selfcheck.py.
Nothing is imported here eagerly.
"""
