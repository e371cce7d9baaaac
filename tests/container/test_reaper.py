"""PID 1 waits for the orphans it adopts: a worker's grandchild whose parent died is reparented to PID 1
(PR_SET_CHILD_SUBREAPER, as PID 1 of a container adopts it) and, once it exits, is reaped, not left a
zombie; torchrun's own exit status is still PID 1's (docs/PLATFORM.md §1.3)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from _harness import child_env, start, wait_until

from sm_dist.container import reaper
from sm_dist.jobspec import JobSpec

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]

# The worker forks a child that forks a grandchild and exits: the grandchild is an orphan. It records
# who adopted it and exits; the worker waits for the test's word, then fails (torchrun exits 1).
ORPHANING_SCRIPT = r'''
import json, os, sys, time
out = os.environ["OUT_DIR"]
child = os.fork()
if child == 0:
    parent = os.getpid()
    if os.fork() == 0:
        while os.getppid() == parent:  # until its parent exited and it was adopted
            time.sleep(0.01)
        with open(os.path.join(out, "orphan.tmp"), "w") as f:
            json.dump({"pid": os.getpid(), "adopted_by": os.getppid()}, f)
        os.replace(os.path.join(out, "orphan.tmp"), os.path.join(out, "orphan.json"))
        os._exit(0)
    os._exit(0)
os.waitpid(child, 0)
while not os.path.exists(os.path.join(out, "release")):
    time.sleep(0.05)
sys.exit(3)
'''


def test_an_orphan_is_adopted_and_reaped_and_torchruns_exit_code_still_counts(tmp_path: Path, port_factory) -> None:
    root, out = tmp_path / "algo-1", tmp_path / "out"
    code = root / "input" / "data" / "code"
    for folder in (root / "input" / "config", code, out):
        folder.mkdir(parents=True)
    (root / "input" / "config" / "resourceconfig.json").write_text(json.dumps({"current_host": "algo-1",
                                                                               "hosts": ["algo-1"]}))
    (code / "train.py").write_text(ORPHANING_SCRIPT)
    JobSpec(entry="train.py", max_restarts=0).write(code)
    env = child_env({"SM_DIST_OPT_ML": str(root), "SM_DIST_RDZV_HOST": "127.0.0.1", "SM_NUM_GPUS": "0",
                     "SM_DIST_RDZV_PORT": str(port_factory()), "OUT_DIR": str(out), "PYTHONPATH": str(REPO)})
    group = start([sys.executable, "-m", "sm_dist.container.pid1"], env)
    pid1_pid = group.procs[0].pid
    wait_until((out / "orphan.json").exists, group, what="the orphan to be adopted")
    orphan = json.loads((out / "orphan.json").read_text())
    assert orphan["adopted_by"] == pid1_pid  # the subreaper, not the machine's init
    # the orphan exited right after writing: PID 1 waits for it while torchrun still runs
    wait_until(lambda: orphan["pid"] not in reaper.children(pid1_pid), group, what="the orphan to be reaped")
    assert not [pid for pid in reaper.children(pid1_pid) if reaper.exited(pid)]  # no zombie under PID 1
    (out / "release").touch()
    [code] = group.wait()
    assert code == 1, group.report()  # torchrun's status (a worker failed), not the 0 of a stolen wait
    assert "torchrun exited with code 1" in (root / "output" / "failure").read_text()
