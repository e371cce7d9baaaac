"""Activation checkpointing and micro-batch as search dimensions; the smallest change when nothing fits."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import sm_dist
from sm_dist.estimator.grid import SEARCHED_CHECKPOINTING
from sm_dist.estimator.recommend import smallest_change


def _cli(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "sm_dist.cli", "estimate-cost", *args, "--json"], capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out)


@pytest.mark.slow
@pytest.mark.parametrize(("model", "count"), [(("--model", "llama2-70b"), "256"), (("--params", "175e9"), "124")])
def test_meta_scale_runs_fit_on_p4de_without_flags(model: tuple[str, str], count: str) -> None:
    """LLaMA-2-70B on Meta's 2,048 A100-80GB and a 175B model on 124× p4de: plans exist (per-operator recompute,
    before full's +33%)."""
    est = _cli(*model, "--tokens", "2e12", "--instance-type", "ml.p4de.24xlarge", "--instance-count", count)
    rec = est["recommendation"]
    assert rec is not None and rec["fits"] and rec["activation_checkpointing"] == "selective-op"
    assert rec["memory_bytes"]["total"] <= rec["memory_bytes"]["usable"]
    # the reason names the binding term, with figures, and the price of the change
    assert "with selective recompute" in rec["reason"] and "activations" in rec["reason"]
    assert "selective-op recompute" in rec["reason"] and "fits at" in rec["reason"]
    assert "+12% compute" in rec["reason"]


def test_each_row_says_its_setting_and_pinning_a_dimension_stops_the_search() -> None:
    kw = dict(model="llama2-7b", tokens=1e11, instance_types=["ml.p4d.24xlarge"], instance_counts=[1, 4],
              strategies=["fsdp"])
    searched = sm_dist.estimate(**kw)
    assert all(r.checkpointing in SEARCHED_CHECKPOINTING and r.micro_batch in (1, 2, 4, 8) for r in searched.rows)
    pinned = sm_dist.estimate(**kw, activation_checkpointing="selective", micro_batch=1)
    assert {(r.checkpointing, r.micro_batch) for r in pinned.rows} == {("selective", 1)}
    # searching can only help: each searched row is at least as cheap as the pinned one that fits
    for a, b in zip(searched.rows, pinned.rows):
        if b.fits:
            assert a.fits and a.cost.sagemaker <= b.cost.sagemaker + 1e-6
    assert "searched per row" in searched.table() and "recompute/mb" in searched.table()


def test_full_recompute_costs_a_third_more_compute_at_the_same_mfu() -> None:
    kw = dict(model="llama2-7b", tokens=1e11, instance_types=["ml.p5.48xlarge"], instance_counts=[4],
              strategies=["fsdp"], micro_batch=1)
    sel = sm_dist.estimate(**kw, activation_checkpointing="selective").rows[0]
    full = sm_dist.estimate(**kw, activation_checkpointing="full").rows[0]
    assert full.step.compute / sel.step.compute == pytest.approx(8 / 6)
    assert full.mfu == sel.mfu


def test_when_nothing_fits_the_smallest_change_is_computed() -> None:
    est = sm_dist.estimate(model="llama2-70b", tokens=1e12, instance_types=["ml.g5.12xlarge"], instance_counts=[1])
    assert est.recommendation is None
    advice = next(w for w in est.warnings if "no plan fits" in w)
    assert "64× ml.g5.12xlarge" in advice and "GB per GPU" in advice
    assert f"Recommendation: none: {advice}" in est.table()  # said where the user looks, not only in Warnings
    # the suggestion is right: the estimator itself finds a plan there
    bigger = sm_dist.estimate(model="llama2-70b", tokens=1e12, instance_types=["ml.g5.12xlarge"], instance_counts=[64])
    assert bigger.recommendation is not None
    smaller = sm_dist.estimate(model="llama2-70b", tokens=1e12, instance_types=["ml.g5.12xlarge"], instance_counts=[32])
    assert smaller.recommendation is None  # 64 is the smallest power-of-two step that fits


def test_a_shorter_sequence_is_suggested_when_it_is_what_fits() -> None:
    # gpt2 at a 262,144-token context on one 8×A10G instance: activations, not weights, are the problem
    est = sm_dist.estimate(model="gpt2", tokens=1e9, seq_len=262144, instance_types=["ml.g5.48xlarge"],
                           instance_counts=[1], global_batch=64)
    assert est.recommendation is None
    advice = next(w for w in est.warnings if "no plan fits" in w)
    assert "seq_len" in advice


def test_no_cuda_instance_asked_says_so() -> None:
    from sm_dist.catalog import get_instance
    from sm_dist.estimator import grid
    from sm_dist.estimator.models import preset
    from sm_dist.vocab import Precision, Strategy

    work = grid.Workload(preset("gpt2"), 1, 1024, 8, 1, Precision.MIXED, "adamw", "selective")
    text = smallest_change(work, (("selective", 1),), [get_instance("ml.trn1.32xlarge")], [1], [Strategy.FSDP])
    assert "CUDA" in text


def test_a_searched_rows_memory_is_what_the_memory_model_gives_for_its_setting() -> None:
    from sm_dist.estimator import grid

    est = sm_dist.estimate(model="llama2-13b", tokens=1e11, instance_types=["ml.p4d.24xlarge", "ml.g5.48xlarge"],
                           instance_counts=[1, 2, 8])
    base = grid.Workload(sm_dist.estimator.models.preset("llama2-13b"), int(1e11), 4096, 1024, 1,
                         est.rows[0].precision, "adamw", "selective")
    settings = {(r.checkpointing, r.micro_batch) for r in est.rows if r.runnable}
    assert len(settings) > 1  # the search did choose different settings here
    for row in est.rows:
        if row.runnable:
            work = base._replace(checkpointing=row.checkpointing, micro_batch=row.micro_batch)
            assert row.memory == grid._memory(work, row.strategy, row.gpus, row.gpus // row.instance_count)
