"""Writes the environment this worker sees to $SM_OUTPUT_DATA_DIR/env-<RANK>.json, as a script that
checks its SageMaker variables would. Joins no process group: it only looks."""

import json
import os

names = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
         "TRAINING_JOB_NAME", "TRAINING_JOB_ARN")
seen = {k: v for k, v in os.environ.items() if k.startswith("SM_") or k in names}
path = os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"env-{os.environ['RANK']}.json")
with open(path, "w") as f:
    json.dump(seen, f, indent=1, sort_keys=True)
print("wrote", path)
