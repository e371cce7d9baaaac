"""A tiny stand-in for the plan's container command, to test local mode on its own.

Behaves like a training job on each host: reads the SageMaker environment, and on the first
host (playing rank 0) prints metric lines, checkpoints into $SM_DIST_OPT_ML/checkpoints (temp
name + rename, keeps 2), resumes from the newest checkpoint, saves and exits 143 on SIGTERM,
and writes model/model.txt plus the final line. Other hosts idle until the first host's model
appears. Settings come from SM_HPS: steps, ckpt_every, step_seconds.
"""

import hashlib
import json
import os
import signal
import sys
import time
from pathlib import Path

root = Path(os.environ["SM_DIST_OPT_ML"])
hps = json.loads(os.environ["SM_HPS"])
steps, every, pause = int(hps.get("steps", 6)), int(hps.get("ckpt_every", 2)), float(hps.get("step_seconds", 0.1))
ckpt = root / "checkpoints"
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
print(f"host={os.environ['SM_CURRENT_HOST']} hosts={os.environ['SM_HOSTS']} rank={os.environ['SM_CURRENT_HOST_RANK']}")


def save(step: int) -> None:
    tmp = ckpt / f"step-{step}.txt.sagemaker-ignore"
    tmp.write_text(str(step))
    os.replace(tmp, ckpt / f"step-{step}.txt")
    for old in sorted(ckpt.glob("step-*.txt"), key=lambda p: int(p.stem.split("-")[1]))[:-2]:
        old.unlink()


if os.environ["SM_CURRENT_HOST"] != "algo-1":
    model_dir = Path(os.environ["SM_MODEL_DIR"])
    while not stop:
        time.sleep(0.05)
        if (root.parent / "algo-1" / "model" / "model.txt").exists():
            sys.exit(0)
    sys.exit(143)

found = [int(p.stem.split("-")[1]) for p in ckpt.glob("step-*.txt")]
start = max(found, default=0)
if start:
    print(f"[sm_dist] resumed step={start} epoch=0")
for step in range(start + 1, steps + 1):
    time.sleep(pause)
    print(f"[sm_dist] step={step} loss={1.0 / step:.4f}", flush=True)
    if step % every == 0:
        save(step)
    if stop:
        save(step)
        sys.exit(143)
digest = hashlib.sha256(f"model-{steps}".encode()).hexdigest()
Path(os.environ["SM_MODEL_DIR"], "model.txt").write_text(digest)
print(f"[sm_dist] final step={steps} model_sha256={digest}")
