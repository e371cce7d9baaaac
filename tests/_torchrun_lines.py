"""Lines torchrun prints, as the failure watch's and the restart causes' tests feed them: the error of
tests/local/byo/raises.py (a ValueError in the script's own code) in torch 2.13's format."""

from __future__ import annotations

#: A rank's own error as torchrun prints it: the script's frames under the code channel, then torch's.
USERS_OWN = [
    "[rank1]: Traceback (most recent call last):",
    '[rank1]:   File "/opt/ml/input/data/code/raises.py", line 16, in main',
    "[rank1]:     check_batch(step, rank)",
    '[rank1]:   File "/opt/ml/input/data/code/raises.py", line 22, in check_batch',
    '[rank1]:     raise ValueError(f"shape mismatch in batch {step} on rank {rank}")',
    "[rank1]:     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    "[rank1]: ValueError: shape mismatch in batch 3 on rank 1",
]
