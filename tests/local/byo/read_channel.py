"""Reads its training data the way SageMaker scripts do: the channel's folder from SM_CHANNEL_TRAIN, as an
argparse default (and lists every other channel of SM_CHANNELS). Writes what it found (relative paths)
to $SM_OUTPUT_DATA_DIR/seen-<RANK>.json."""

import argparse
import json
import os

parser = argparse.ArgumentParser()
parser.add_argument("--train", default=os.environ["SM_CHANNEL_TRAIN"])
parser.add_argument("--epochs", type=int, default=1)
args = parser.parse_args()

files = sorted(os.path.relpath(os.path.join(d, f), args.train) for d, _, names in os.walk(args.train) for f in names)
rows = sum(len(open(os.path.join(args.train, f)).read().splitlines()) for f in files)
channels = json.loads(os.environ["SM_CHANNELS"])
others = {c: sorted(os.path.relpath(os.path.join(d, f), os.environ[f"SM_CHANNEL_{c.upper()}"])
                    for d, _, names in os.walk(os.environ[f"SM_CHANNEL_{c.upper()}"]) for f in names)
          for c in channels if c not in ("code", "train")}
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"seen-{os.environ['RANK']}.json"), "w") as out:
    json.dump({"channel": args.train, "files": files, "rows": rows, "channels": channels, "others": others}, out)
print(f"read {len(files)} files, {rows} rows from {args.train}")
