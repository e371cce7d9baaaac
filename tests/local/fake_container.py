"""A tiny stand-in for the plan's container command (PID 1), to test local mode on its own.

Like any PID 1 it has only what the platform provides: /opt/ml (or $SM_DIST_OPT_ML where local
mode cannot mount the host's folder there) with input/config/*.json. On the first host (playing
rank 0) it prints metric lines, checkpoints into <root>/checkpoints (temp name + rename, keeps 2),
resumes from the newest checkpoint, saves and exits 143 on SIGTERM, and writes model/model.txt
plus the final line. Other hosts idle until the first host's model appears in $FAKE_HOSTS_DIR.
Settings come from hyperparameters.json: steps, ckpt_every, step_seconds.
"""

import hashlib
import json
import os
import signal
import sys
import time
from pathlib import Path

from sm_dist.contract.log_lines import final_line, resumed_line, step_line  # the lines local mode reads

root = Path(os.environ.get("SM_DIST_OPT_ML", "/opt/ml"))
resource = json.loads((root / "input" / "config" / "resourceconfig.json").read_text())
hps = json.loads((root / "input" / "config" / "hyperparameters.json").read_text())
host, hosts = resource["current_host"], resource["hosts"]
steps, every, pause = int(hps.get("steps", 6)), int(hps.get("ckpt_every", 2)), float(hps.get("step_seconds", 0.1))
ckpt = root / "checkpoints"
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
print(f"host={host} hosts={hosts} rank={hosts.index(host)}")


def save(step: int) -> None:
    tmp = ckpt / f"step-{step}.txt.sagemaker-ignore"
    tmp.write_text(str(step))
    os.replace(tmp, ckpt / f"step-{step}.txt")
    for old in sorted(ckpt.glob("step-*.txt"), key=lambda p: int(p.stem.split("-")[1]))[:-2]:
        old.unlink()


if host != "algo-1":
    while not stop:
        time.sleep(0.05)
        if (Path(os.environ["FAKE_HOSTS_DIR"]) / "algo-1" / "model" / "model.txt").exists():
            sys.exit(0)
    sys.exit(143)

found = [int(p.stem.split("-")[1]) for p in ckpt.glob("step-*.txt")]
start = max(found, default=0)
if start:
    print(resumed_line(start, 0))
for step in range(start + 1, steps + 1):
    time.sleep(pause)
    print(step_line(step, {"loss": 1.0 / step}), flush=True)
    if step % every == 0:
        save(step)
    if stop:
        save(step)
        sys.exit(143)
digest = hashlib.sha256(f"model-{steps}".encode()).hexdigest()
(root / "model" / "model.txt").write_text(digest)
print(final_line(steps, digest))
