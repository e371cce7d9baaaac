"""The launch modules import boto3/sagemaker only inside functions; the launcher is stdlib only."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "boto3", "botocore", "sagemaker", "numpy", "yaml")
LAUNCH = ["api", "budget", "bundle", "checkpoints", "cli", "config", "ignore", "job", "locations", "logs", "plan",
          "preflight", "report", "report_job", "request", "sizing", "submit"]


def _heavy_after(code: str) -> list[str]:
    probe = code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return sorted(m for m in json.loads(out.stdout.strip().splitlines()[-1]) if m.split(".")[0] in HEAVY)


def test_launch_modules_are_light_at_import() -> None:
    assert _heavy_after("\n".join(f"import sm_dist.launch.{m}" for m in LAUNCH)) == []


def test_launcher_is_stdlib_only() -> None:
    assert _heavy_after("import sm_dist.runtime.launcher, sm_dist.runtime.launcher_env, sm_dist.jobspec") == []
