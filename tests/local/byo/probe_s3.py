"""Tries to list S3 buckets with boto3 as a script in the container would, and says what it found:
`probe: listed N bucket(s)` or `probe: refused: <error>`, then the AWS_* names it sees; and leaves
probe.txt in the checkpoint folder, for the platform's sync to upload. Exits 0 either way: the test
reads the lines. Joins no process group."""

import os

import boto3

try:
    buckets = boto3.client("s3", region_name="us-east-1").list_buckets()["Buckets"]
    print(f"probe: listed {len(buckets)} bucket(s): {sorted(b['Name'] for b in buckets)}", flush=True)
except Exception as exc:  # noqa: BLE001 - any refusal is the answer
    print(f"probe: refused: {type(exc).__name__}: {exc}", flush=True)
with open(os.path.join(os.environ["SM_CHECKPOINT_DIR"], "probe.txt"), "w") as f:
    f.write("written in the container\n")
print(f"probe: AWS_* names: {sorted(k for k in os.environ if k.startswith('AWS_'))}", flush=True)
