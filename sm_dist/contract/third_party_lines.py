"""Lines other loggers print that sm_dist reads, written once (stdlib): tqdm bars and Hugging Face
Trainer's log dicts.

A script sm_dist did not write prints none of the `[sm_dist]` lines (sm_dist.contract.log_lines);
local mode's live view (sm_dist.local.progress) and `job.metrics()` (sm_dist.notebook.metrics)
read these two instead:
- a tqdm bar, `{desc}: {percentage}|{bar}| {n}/{total} [{elapsed}<{remaining}, {rate}]`, which
  Hugging Face's Trainer also draws for its steps (Lightning draws one per epoch, `Epoch N: ...`);
- the Trainer's printed log dict, `{'loss': 0.6931, 'grad_norm': 1.2, 'learning_rate': 5e-05,
  'epoch': 0.5}`; transformers 5 quotes the figures (`{'loss': '6.045', ..., 'epoch': '0.2812'}`)
  and prints it after the bar's carriage return, on the bar's line.
"""

from __future__ import annotations

import ast
import re

#: tqdm's default bar: "{desc}: {percentage}|{bar}| {n}/{total} [{elapsed}<{remaining}, {rate}]".
TQDM_RE = re.compile(r"\|\s*(\d+)/(\d+)\s+\[")
#: A bar drawn per epoch, described "Epoch N" (Lightning's TQDMProgressBar: "Epoch 3:  50%|█   | 4/8 [...]").
EPOCH_BAR_RE = re.compile(r"Epoch (\d+)\b[^|]*\|[^|]*\|\s*\d+/\d+\s+\[")
#: A printed dict of quoted keys and flat values (no nested braces), e.g. Trainer's log dict.
_DICT_RE = re.compile(r"\{'[^'{}]+': [^{}]*\}")


def tqdm_position(line: str) -> tuple[int, int] | None:
    """(n, total) of the last tqdm bar update in `line`, or None."""
    bars = TQDM_RE.findall(line)
    return (int(bars[-1][0]), int(bars[-1][1])) if bars else None


def bar_epoch(line: str) -> int | None:
    """N of a bar described "Epoch N" (one bar per epoch, Lightning's) in `line`, or None."""
    match = EPOCH_BAR_RE.search(line)
    return int(match.group(1)) if match else None


def trainer_log(line: str) -> dict[str, float] | None:
    """The numeric entries of the last Trainer log dict in `line` (one with an 'epoch'; figures
    quoted or not), or None. The dict names no step: the bar it shares a line with does."""
    for text in reversed(_DICT_RE.findall(line)):
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            continue
        if not isinstance(value, dict) or "epoch" not in value:
            continue
        out: dict[str, float] = {}
        for key, raw in value.items():
            try:
                out[str(key)] = float(raw)
            except (TypeError, ValueError):
                continue
        return out
    return None


__all__ = ["EPOCH_BAR_RE", "TQDM_RE", "bar_epoch", "tqdm_position", "trainer_log"]
