"""Run a user's "pkg.module:function" under the sm_dist runtime — no launcher code in the user's script.

    python -m torch.distributed.run --nproc_per_node=2 entrypoints/run_function.py mytrain:main --steps 100

The function is called as `main(ctx, hparams)` after runtime.init(); it returns a Workload
(sm_dist trains it), a trained model (sm_dist writes it) or None. The full contract is in
sm_dist/runtime/function_entry.py and the README ("Example workloads"). Without a first
argument the entry comes from the job spec (SM_DIST_JOB_SPEC), as sm_dist's PID 1 runs it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

try:
    import sm_dist  # noqa: F401
except ImportError:
    # SageMaker's torchrun driver runs `cd <code dir>; torchrun <script>`, so sys.path[0] is this
    # script's folder: add the code dir (cwd) and the bundle root (sm_dist/_entrypoints/../..).
    sys.path[:0] = [os.getcwd(), str(Path(__file__).resolve().parents[2])]

from sm_dist.runtime.function_entry import run

if __name__ == "__main__":
    sys.exit(run())
