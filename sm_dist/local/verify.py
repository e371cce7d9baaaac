"""`--verify`: does the chaos run end with the same model as the uninterrupted run?

Two sources, best first: sm_dist's own `[sm_dist] final step=N model_sha256=H` line (both runs
printed one), else the weight files each host left in its model folder (`/opt/ml/model`),
compared tensor by tensor by `python -m sm_dist.tools.weights_compare` — a subprocess, because
reading tensors needs torch and local mode (local world) never imports it. Nothing to compare
is "cannot compare", never a difference.

A difference has one of two causes, and the answer says which (`explain`): the resume (the
fault run differs while two uninterrupted runs agree), or the script itself (two uninterrupted
runs differ: it is not reproducible, so no resume could match). When no fault fired, the two runs
compared were both uninterrupted; otherwise local mode runs the uninterrupted job once more.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from sm_dist.contract.container import WEIGHT_SUFFIXES

IDENTICAL, DIFFERS, CANNOT = "identical", "differs", "cannot compare"
#: Why a run differs: its resume, or a script two uninterrupted runs of which already differ.
RESUME, NOT_REPRODUCIBLE = "resume", "not reproducible"
#: The tools-world module that loads and compares the tensors (its SUFFIXES are WEIGHT_SUFFIXES).
COMPARE_MODULE = "sm_dist.tools.weights_compare"


@dataclass(frozen=True, kw_only=True)
class Verification:
    """The answer of --verify."""

    result: str  # identical | differs | cannot compare
    detail: str
    cause: str | None = None
    """For `differs`: RESUME or NOT_REPRODUCIBLE (None: not known)."""
    cause_detail: str | None = None
    """What showed the cause (e.g. how two uninterrupted runs differ)."""

    @property
    def verified(self) -> bool | None:
        return {IDENTICAL: True, DIFFERS: False}.get(self.result)


def _has_weights(folder: Path) -> bool:
    return folder.is_dir() and any(p.suffix in WEIGHT_SUFFIXES for p in folder.rglob("*") if p.is_file())


def by_hash(sha_run: str | None, sha_verify: str | None) -> Verification | None:
    """From sm_dist's model hash lines; None when either run printed none."""
    if sha_run is None or sha_verify is None:
        return None
    if sha_run == sha_verify:
        return Verification(result=IDENTICAL, detail=f"model sha256 {sha_run[:12]}… in both runs")
    return Verification(result=DIFFERS, detail=f"model sha256 {sha_run[:12]}… vs {sha_verify[:12]}…")


def compare_dirs(run_dir: Path, verify_dir: Path) -> Verification:
    """Compare two model folders through the runtime module (a subprocess with this interpreter)."""
    proc = subprocess.run([sys.executable, "-m", COMPARE_MODULE, str(run_dir), str(verify_dir)],
                          capture_output=True, text=True, check=False)
    try:
        answer = json.loads(proc.stdout.strip().splitlines()[-1])
        return Verification(result=answer["result"], detail=answer["detail"])
    except (IndexError, ValueError, KeyError):
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return Verification(result=CANNOT, detail=f"the weight comparison failed: {last}")


def compare_hosts(run_hosts: Path, verify_hosts: Path, hosts: list[str]) -> Verification:
    """Every host's model folder of both runs; hosts with weights in neither run are skipped."""
    answers = []
    for host in hosts:
        a, b = run_hosts / host / "model", verify_hosts / host / "model"
        if not _has_weights(a) and not _has_weights(b):
            continue
        answer = compare_dirs(a, b)
        answers.append(Verification(result=answer.result, detail=f"{host}: {answer.detail}"))
    if not answers:
        return Verification(result=CANNOT, detail=f"no weight file ({', '.join(WEIGHT_SUFFIXES)}) in any host's "
                                                  "model folder and no sm_dist model hash")
    for result in (DIFFERS, CANNOT):
        worst = [a for a in answers if a.result == result]
        if worst:
            return worst[0]
    return Verification(result=IDENTICAL, detail="; ".join(a.detail for a in answers))


def explain(found: Verification, fired: bool, again: Verification | None) -> Verification:
    """`found` with the cause of a difference: `fired` whether a fault fired in the compared run;
    `again`: a second uninterrupted run compared with the first (None: not run)."""
    if found.result != DIFFERS:
        return found
    if not fired:
        return replace(found, cause=NOT_REPRODUCIBLE, cause_detail="no fault fired: both runs were uninterrupted")
    if again is None or again.result == CANNOT:
        return found
    if again.result == DIFFERS:
        return replace(found, cause=NOT_REPRODUCIBLE, cause_detail=f"two uninterrupted runs differ too: {again.detail}")
    return replace(found, cause=RESUME, cause_detail="a second uninterrupted run matched the first")
