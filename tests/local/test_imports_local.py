"""sm_dist.local is launch-side and light: importing it loads no torch, boto3, moto or runtime."""

from __future__ import annotations

import json
import subprocess
import sys


def test_import_local_is_light() -> None:
    probe = "import sys, json, sm_dist.local, sm_dist.local.cli\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    mods = set(json.loads(out.stdout.strip().splitlines()[-1]))
    heavy = sorted(m for m in mods if m.split(".")[0] in ("torch", "boto3", "botocore", "moto", "sagemaker", "numpy"))
    assert heavy == []
    assert not any(m.startswith("sm_dist.runtime") for m in mods)  # runs the runtime only as subprocesses
