"""What runs as PID 1 inside the training container, before torch is loaded (standard library only).

`launcher` (``python3 -m sm_dist.container.launcher``) reads the job spec and the container layout,
then starts torchrun; `env` detects the run environment (SageMaker, Slurm, torchrun, local) for the
runtime; `launcher_env` and `slurm_nodes` are their pure parts. The container layout itself lives in
`sm_dist.contract`.
"""
