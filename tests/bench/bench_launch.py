"""Benchmark of the launch side: plan()/dry-run time (cold and warm, and whether torch got
imported), bundle size for the example entrypoints, and fit(wait=False) against moto.

Run by hand: /tmp/venv/bin/python tests/bench/bench_launch.py  (last line: one JSON object)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROLE = "arn:aws:iam::123456789012:role/bench"
EXPLICIT = dict(role=ROLE, output_s3_uri="s3://bench-bucket/runs", region="us-east-1", max_runtime_s=3600)

COLD = """
import sys, time, json
t0 = time.perf_counter()
import sm_dist
plan = sm_dist.plan({entry!r}, source_dir={src!r}, instance_type="ml.p4d.24xlarge", instance_count=2,
                    strategy="auto", params=7e9, tokens=1e11, **{explicit!r})
t1 = time.perf_counter()
plan2 = sm_dist.plan({entry!r}, source_dir={src!r}, instance_type="ml.p4d.24xlarge", instance_count=2,
                     strategy="auto", params=7e9, tokens=1e11, **{explicit!r})
t2 = time.perf_counter()
text = str(plan2)
print(json.dumps({{"cold_s": t1 - t0, "warm_s": t2 - t1, "torch_imported": "torch" in sys.modules,
                  "sagemaker_imported": "sagemaker" in sys.modules}}))
"""


def bench_plan(src: str) -> dict:
    code = COLD.format(entry="cnn.py", src=src, explicit=EXPLICIT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                      env=env).stdout.strip().splitlines()[-1]) for _ in range(3)]
    best = {k: min(r[k] for r in runs) for k in ("cold_s", "warm_s")}
    return {**best, "torch_imported": any(r["torch_imported"] for r in runs)}


def bench_bundles(src: str) -> dict:
    import sm_dist

    sizes = {}
    for entry in ("cnn.py", "resnet.py", "gpt.py"):
        plan = sm_dist.plan(entry, source_dir=src, instance_type="ml.g5.xlarge", **EXPLICIT)
        by_origin: dict[str, int] = {}
        for item in plan.bundle.files:
            by_origin[item.origin] = by_origin.get(item.origin, 0) + item.size
        sizes[entry] = {"files": len(plan.bundle.files), "bytes": plan.bundle.total_bytes, "by_origin": by_origin}
    return sizes


def bench_fit(src: str, repeats: int = 3) -> dict:
    os.environ.update(AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x", AWS_DEFAULT_REGION="us-east-1",
                      SAGEMAKER_VALIDATE_ROLE="false")
    import boto3
    from moto import mock_aws

    import sm_dist

    times = []
    with mock_aws():
        boto3.client("iam").create_role(RoleName="bench", AssumeRolePolicyDocument="{}")
        boto3.client("s3").create_bucket(Bucket="bench-ckpt")
        for _ in range(repeats):
            t0 = time.perf_counter()
            job = sm_dist.fit("cnn.py", source_dir=src, instance_type="ml.p4d.24xlarge", instance_count=2,
                              strategy="fsdp", spot=True, checkpoint_s3_uri="s3://bench-ckpt/r", max_cost_usd=100,
                              role=ROLE, wait=False)
            times.append(time.perf_counter() - t0)
        objects = len(boto3.client("s3").list_objects_v2(Bucket="sagemaker-us-east-1-123456789012")["Contents"])
    return {"first_s": times[0], "best_s": min(times[1:]), "objects_per_job": objects // repeats, "job": job.name}


def main() -> None:
    with tempfile.TemporaryDirectory() as src:
        Path(src, "README.md").write_text("example project\n")
        plan = bench_plan(src)
        print(f"plan(): cold {plan['cold_s']:.2f} s (fresh interpreter, imports included), warm {plan['warm_s']:.3f} s; "
              f"torch imported: {plan['torch_imported']}")
        bundles = bench_bundles(src)
        for entry, info in bundles.items():
            print(f"bundle for {entry}: {info['files']} files, {info['bytes'] / 1024:.0f} KiB "
                  + ", ".join(f"{k} {v / 1024:.0f} KiB" for k, v in info["by_origin"].items()))
        fit = bench_fit(src)
        print(f"fit(wait=False) against moto: first {fit['first_s']:.2f} s, then {fit['best_s']:.2f} s "
              f"({fit['objects_per_job']} objects uploaded per job)")
    print(json.dumps({"plan": plan, "bundles": bundles, "fit_moto": fit}))


if __name__ == "__main__":
    main()
