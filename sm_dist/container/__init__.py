"""What runs as PID 1 inside the training container, before torch is loaded (standard library only).

The container command. `Plan.container_command` is ``python3 -m sm_dist.container.pid1`` with
the code channel on PYTHONPATH (`Plan.environment`); the cloud job runs it as PID 1 and every host
of local mode runs it as its first process. Every path it reads is a container path under /opt/ml,
moved under `$SM_DIST_OPT_ML` where local mode cannot mount the host's folder there
(`sm_dist.contract.container`). On each host, in order:

- `pid1` reads ``input/config/resourceconfig.json`` (hosts in SageMaker's order) and the job
  spec (`sm_dist.jobspec`), computes the script's `SM_*` variables (`script_env`); on a warm pool
  (SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY names a folder) points PIP_CACHE_DIR, HF_HOME,
  TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR into that persistent cache where the container leaves
  them unset, and says whether an earlier job left it warm (`warm_cache`); pip-installs
  requirements.txt (`requirements`: from the wheels the last job on the pool kept, without the index,
  when the cache has them; local mode turns it off), then starts ``python -m
  torch.distributed.run`` (`pid1_env`: c10d rendezvous on the first host, port 29400,
  `--local-addr` this host's name, TORCH_ELASTIC_SHUTDOWN_TIMEOUT 100 s unless set: SageMaker
  SIGKILLs 120 s after SIGTERM) and forwards SIGTERM/SIGINT to it;
- torchrun starts each worker as ``python -u -m sm_dist.container.worker SCRIPT ARGS`` (`worker`:
  the stop file; a restarted host's checkpoint folder restore, `restore`, runtime-world code run as
  a subprocess), which execs ``python -u -m sm_dist.runtime.run_script SCRIPT ARGS`` (the script,
  then the rank's end);
- while torchrun runs, `torchrun` (the Supervisor) hands each output line to the watches:
  `failure_watch` (restart or stop after a worker failed; `outside_files`: checkpoints written where
  nothing syncs them), `hang_watch` + `stacks` (no progress: the ranks' stacks, restart or stop),
  `end_watch` (every rank finished, or a lost stop signal); `stop_noise` leaves torchrun's own
  traceback after a stop out of the log, and `reaper` waits for the orphans PID 1 adopts;
- at the end it writes ``output/failure`` on error (`failure_text`: SageMaker's FailureReason,
  the script's own error first) and exits 0 on success; torchrun's code on failure (1 when it
  stopped torchrun after the script's error); 2 when the job could not start (a torch below the
  supported range, a bad job spec, a pip failure); `sm_dist.jobspec.EXIT_INTERRUPTED` (143) when
  the run stopped on a signal after the runtime committed a checkpoint (each host's local rank 0
  writes the file named by `$SM_DIST_INTERRUPT_MARKER`).

Local mode's stand-ins, unset in the cloud (`sm_dist.contract.container`): SM_DIST_OPT_ML,
SM_DIST_RDZV_HOST, SM_DIST_RDZV_PORT, SM_DIST_MASTER_PORT, SM_DIST_LOCAL_ADDR, SM_DIST_NPROC_PER_NODE. `env` detects the
run environment (SageMaker, Slurm, torchrun, local) for the runtime; `slurm_nodes` expands Slurm's
host lists; `slurm_host` starts a Slurm node and `slurm_chain` takes the chain's decision after each attempt.
"""
