"""What local mode reads from a script it did not write: steps, errors, weights, process groups.

Sample lines are the shapes the loggers print (tqdm's bar, Hugging Face Trainer's log dict,
torchrun's `[rankN]:` prefixed traceback, argparse's usage error).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch

from sm_dist.contract.log_lines import AloneLine, read_line
from sm_dist.contract.worker_errors import errors_in
from sm_dist.local.failure import host_outcomes, not_restarted, real_error
from sm_dist.local.pgwatch import GroupWatch
from sm_dist.local.procs import ProcInfo
from sm_dist.local.progress import Progress
from sm_dist.local.verify import CANNOT, DIFFERS, IDENTICAL, by_hash, compare_hosts


def test_tqdm_bar_steps_and_going_back() -> None:
    progress = Progress()
    seen: list[int] = []
    progress.on_step(seen.append)
    for line in ["  0%|          | 0/40 [00:00<?, ?it/s]", " 10%|█         | 4/40 [00:01<00:09,  3.9it/s]",
                 "Evaluating: 100%|██████████| 90/90 [00:02<00:00, 40.0it/s]",  # another bar: ignored
                 " 20%|██        | 8/40 [00:02<00:08,  3.9it/s]"]:
        progress.feed(line, "algo-1")
    progress.feed(" 15%|█▌        | 7/40 [00:00<?, ?it/s]", "algo-1")  # no restart seen: lines out of order
    assert progress.went_back == []
    progress.new_workers("algo-1")  # local mode saw algo-1's workers start again
    progress.feed(" 15%|█▌        | 6/40 [00:00<?, ?it/s]", "algo-1")  # restarted from a checkpoint
    progress.feed(" 10%|█         | 4/40 [00:01<00:09,  3.9it/s]", "algo-2")  # another host: not backwards
    assert seen == [4, 8, 7, 6, 4] and progress.steps == 8
    assert progress.went_back == [("algo-1", 7, 6)]


def test_steps_went_back_only_from_lines_that_cannot_be_reordered() -> None:
    """sm_dist's step lines (stdout) and a tqdm bar (stderr) reach local mode through two pipes: a
    bar line arriving after a step line is no resume; neither is a lower step without a restart."""
    progress = Progress()
    progress.new_workers("algo-1")
    for line in ["[sm_dist] step=50 loss=1.0", "  2%|▏         | 1/100 [00:00<?, ?it/s]",
                 "[sm_dist] step=100 loss=0.5", " 51%|█████     | 51/100 [00:05<00:05, 9.9it/s]"]:
        progress.feed(line, "algo-1")
    assert progress.went_back == []  # the run of the issue: "50 → 1, 100 → 51" with no restart
    progress.new_workers("algo-1")
    progress.feed("[sm_dist] step=60 loss=0.9", "algo-1")  # resumed from step 50's checkpoint
    assert progress.went_back == [("algo-1", 100, 60)]


def test_hf_log_dict_and_sm_dist_lines() -> None:
    progress = Progress()
    progress.feed("{'loss': 1.3862, 'grad_norm': 0.52, 'learning_rate': 4.5e-05, 'epoch': 0.25}", "algo-1")
    assert progress.hosts["algo-1"].loss == "1.3862" and progress.hosts["algo-1"].epoch == "0.25"
    assert progress.steps is None  # a log dict names no step: unknown, not 0
    progress.feed("[sm_dist] step=12 loss=0.5", "algo-1")
    progress.feed("[sm_dist] resumed step=8 epoch=1", "algo-1")
    progress.feed("[sm_dist] final step=16 model_sha256=" + "a" * 64, "algo-1")
    assert progress.steps == 16 and progress.resumed_from == [8] and progress.model_sha256 == "a" * 64


def test_transformers_5_quoted_log_dict_after_the_bar_on_one_line() -> None:
    # as transformers 5.23's Trainer prints it: tqdm's \r-separated updates, then the quoted dict
    progress = Progress()
    progress.feed(" 80%|████████  | 8/10 [00:00<00:00, 47.48it/s]" + " " * 46
                  + "{'loss': '6.045', 'grad_norm': '0.9556', 'learning_rate': '0.0002', 'epoch': '0.2812'}", "algo-1")
    state = progress.hosts["algo-1"]
    assert (state.loss, state.epoch, progress.steps) == ("6.045", "0.2812", 8)


TORCHRUN_FAILURE = """\
[rank1]: Traceback (most recent call last):
[rank1]:   File "/opt/ml/input/data/code/train.py", line 30, in <module>
[rank1]:     main()
[rank1]:   File "/opt/ml/input/data/code/train.py", line 18, in main
[rank1]:     out = model(batch)
[rank1]:           ^^^^^^^^^^^^
[rank1]:   File "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1775, in _call_impl
[rank1]:     return forward_call(*args, **kwargs)
[rank1]: ValueError: loss went NaN at step 3
E1123 22:48:05.650000 27908 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1)
Traceback (most recent call last):
  File "/venv/bin/torchrun", line 8, in <module>
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
Root Cause (first observed failure):
[0]:
  rank      : 1 (local_rank: 0)
  exitcode  : 1 (pid: 27973)
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
"""
PEER_FAILURE = """\
[rank0]: Traceback (most recent call last):
[rank0]:   File "/x/train.py", line 19, in main
[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:1
torch.distributed.elastic.rendezvous.api.RendezvousClosedError
"""


def test_the_worker_error_not_torchruns(tmp_path: Path) -> None:
    (tmp_path / "algo-1.log").write_text(PEER_FAILURE)
    (tmp_path / "algo-2.log").write_text(TORCHRUN_FAILURE)
    logs = {"algo-1": tmp_path / "algo-1.log", "algo-2": tmp_path / "algo-2.log"}
    found = real_error(logs)
    # the innermost frame in the user's code, not torch's where the exception was raised
    assert found is not None and found.line() == "ValueError: loss went NaN at step 3  at train.py:18 in main  (algo-2, rank 1)"
    assert found.source == "out = model(batch)" and found.trace[-3:] == (
        '  File "torch/nn/modules/module.py", line 1775, in _call_impl', "    return forward_call(*args, **kwargs)",
        "ValueError: loss went NaN at step 3")
    assert found.to_dict() | {"text": ""} == {"type": "ValueError", "message": "loss went NaN at step 3", "file": "train.py",
                                              "line": 18, "function": "main", "code": "out = model(batch)",
                                              "host": "algo-2", "rank": 1, "text": "", "hint": None}
    only_peer = real_error({"algo-1": tmp_path / "algo-1.log"})
    assert only_peer is not None and only_peer.collateral and only_peer.text.startswith("RuntimeError: ")
    assert real_error({"algo-1": tmp_path / "missing.log"}) is None


def test_each_host_shows_its_own_outcome_and_the_first_failure_is_the_cause(tmp_path: Path) -> None:
    """Three hosts: algo-3 raised first, algo-1 raised later, algo-2 only saw its peers go: the cause is
    algo-3's error (not the last one in host order), and each host says what happened to it."""
    own = TORCHRUN_FAILURE.replace("[rank1]", "[rank2]").replace("rank      : 1", "rank      : 2")
    (tmp_path / "algo-1.log").write_text(TORCHRUN_FAILURE.replace("[rank1]", "[rank0]").replace("rank      : 1",
                                                                                                "rank      : 0"))
    (tmp_path / "algo-2.log").write_text(PEER_FAILURE)
    (tmp_path / "algo-3.log").write_text(own)
    logs = {h: tmp_path / f"{h}.log" for h in ("algo-1", "algo-2", "algo-3")}
    found = real_error(logs, first=["algo-3"])
    assert found is not None and (found.host, found.rank) == ("algo-3", "2")
    assert host_outcomes({"algo-1": 143, "algo-2": 143, "algo-3": 1}, logs, ["algo-3"], ["algo-1", "algo-2"]) == {
        "algo-1": "ValueError: loss went NaN at step 3  at train.py:18 in main  (rank 0); then stopped after algo-3 failed",
        "algo-2": "stopped after algo-3 failed",
        "algo-3": "exit 1: ValueError: loss went NaN at step 3  at train.py:18 in main  (rank 2)"}
    assert not_restarted("ValueError: x  (algo-3, rank 2)\nnot restarted: a restart cannot fix it\nlogs: ...") == (
        "not restarted: a restart cannot fix it")


def test_argparse_and_missing_module_lines() -> None:
    usage = errors_in("algo-1", ["usage: train.py [-h] [--steps STEPS]",
                                 "train.py: error: unrecognized arguments: --bogus-flag 1"])
    assert [e.text for e in usage] == ["train.py: error: unrecognized arguments: --bogus-flag 1"]
    missing = errors_in("algo-1", ["Traceback (most recent call last):", '  File "m.py", line 2, in <module>',
                                   "    import torchvision", "ModuleNotFoundError: No module named 'torchvision'"])
    assert [e.text for e in missing] == ["ModuleNotFoundError: No module named 'torchvision'"]


def _save_safetensors(path: Path, tensors: dict[str, bytes]) -> None:
    header, offset = {}, 0
    for name, data in tensors.items():
        header[name] = {"dtype": "F32", "shape": [len(data) // 4], "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(tensors.values()))


def _model_dir(root: Path, host: str) -> Path:
    folder = root / host / "model"
    folder.mkdir(parents=True)
    return folder


@pytest.mark.slow
def test_verify_compares_weight_files_tensor_by_tensor(tmp_path: Path) -> None:
    state = {"MODEL_STATE": {"w": torch.arange(6.0).reshape(2, 3), "b": torch.zeros(2)}, "EPOCHS_RUN": 4}
    run, same, other, empty = (tmp_path / n for n in ("run", "same", "other", "empty"))
    for root in (run, same, other):
        torch.save(state, _model_dir(root, "algo-1") / "snapshot.pt")
        _save_safetensors(_model_dir(root, "algo-2") / "model.safetensors", {"x": struct.pack("<2f", 1.0, 2.0)})
    changed = {"MODEL_STATE": {**state["MODEL_STATE"], "b": torch.tensor([0.0, 1e-7])}, "EPOCHS_RUN": 4}
    torch.save(changed, other / "algo-1" / "model" / "snapshot.pt")
    hosts = ["algo-1", "algo-2"]
    assert compare_hosts(run, same, hosts).result == IDENTICAL
    differs = compare_hosts(run, other, hosts)
    assert differs.result == DIFFERS and "MODEL_STATE.b" in differs.detail and "algo-1" in differs.detail
    _save_safetensors(other / "algo-2" / "model" / "model.safetensors", {"x": struct.pack("<2f", 1.0, 2.5)})
    torch.save(state, other / "algo-1" / "model" / "snapshot.pt")
    assert compare_hosts(run, other, hosts).detail.startswith("algo-2: model.safetensors: 'x'")
    nothing = compare_hosts(empty, empty, hosts)
    assert nothing.result == CANNOT and nothing.verified is None
    _model_dir(empty, "algo-1")
    assert compare_hosts(run, empty, hosts).result == CANNOT  # weights in one run only: no comparison
    assert by_hash("a" * 64, "a" * 64).result == IDENTICAL and by_hash("a" * 64, None) is None  # type: ignore[union-attr]


def test_a_pickle_of_other_objects_in_both_runs_is_skipped_and_named(tmp_path: Path) -> None:
    """Hugging Face's Trainer.save_model writes training_args.bin (a pickled TrainingArguments) next
    to the weights: not weights, so named and skipped; the weights are still compared."""
    import argparse

    from sm_dist.tools.weights_compare import compare

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        _save_safetensors(tmp_path / name / "model.safetensors", {"x": struct.pack("<2f", 1.0, 2.0)})
        torch.save(argparse.Namespace(lr=0.1), tmp_path / name / "training_args.bin")  # weights_only refuses it
    same = compare(tmp_path / "a", tmp_path / "b")
    assert same["result"] == "identical" and "skipped: training_args.bin" in same["detail"]
    (tmp_path / "a" / "model.safetensors").unlink()
    (tmp_path / "b" / "model.safetensors").unlink()
    only_pickles = compare(tmp_path / "a", tmp_path / "b")
    assert only_pickles["result"] == "cannot compare" and "no tensor" in only_pickles["detail"]


def test_group_watch_reads_world_sizes_and_ranks_that_trained_alone() -> None:
    """WORLD_SIZE from the workers' environment; "trained alone" from the ranks' own lines (what
    their process groups did), never from connection timing."""
    watch = GroupWatch(expected_world_size=2)
    watch.sample("algo-1", ProcInfo(1, 1, {"RANK": "0", "WORLD_SIZE": "2"}))
    assert watch.warnings() == []
    watch.sample("algo-2", ProcInfo(2, 1, {"RANK": "1", "WORLD_SIZE": "4"}))
    line = read_line("[rank1]:[sm_dist] rank 1 trained alone: it joined no process group (WORLD_SIZE=2)")
    assert isinstance(line, AloneLine)
    watch.trained_alone("algo-2", line.rank, line.why)
    warnings = watch.warnings()
    assert len(warnings) == 2 and "WORLD_SIZE=4" in warnings[0]
    assert warnings[1] == ("rank 1 on algo-2 trained alone (it joined no process group (WORLD_SIZE=2)): this run "
                           "does not prove distributed training")


class _Agent:
    def __init__(self, host: str, code: int | None) -> None:
        self.host, self.code = host, code

    def poll(self) -> int | None:
        return self.code


class _Layout:
    def __init__(self, root: Path) -> None:
        self.root = root

    def container_path(self, path: str) -> Path:
        return self.root / path.removeprefix("/opt/ml/")


def test_progress_view_prints_on_change_only(tmp_path: Path) -> None:
    """Not a terminal: a line when a host's state or the restarts change, not for every tick."""
    import io
    from types import SimpleNamespace

    from sm_dist.local.view import ProgressView

    (tmp_path / "algo-1" / "checkpoints").mkdir(parents=True)
    (tmp_path / "algo-1" / "checkpoints" / "snapshot.pt").write_bytes(b"x")
    (tmp_path / "algo-1" / "checkpoints" / "snapshot.pt.sagemaker-uploaded").write_bytes(b"")
    progress = Progress()
    progress.feed(" 10%|█         | 4/40 [00:01<00:09,  3.9it/s]", "algo-1")
    runner = SimpleNamespace(
        agents=[_Agent("algo-1", None), _Agent("algo-2", None)],
        layouts=[_Layout(tmp_path / "algo-1"), _Layout(tmp_path / "algo-2")],
        chaos=SimpleNamespace(live={"algo-1": 1, "algo-2": 0}, in_job_restarts=0, events=[]),
        outcome=SimpleNamespace(job_restarts=0, stopped_hosts=[], restart_causes=[]), progress=progress,
        config=SimpleNamespace(checkpoint_local_path="/opt/ml/checkpoints"),
    )
    out = io.StringIO()
    view = ProgressView(out)
    view.tick(runner)  # type: ignore[arg-type]
    view.tick(runner)  # type: ignore[arg-type]
    runner.chaos.live["algo-1"] = 0
    runner.chaos.in_job_restarts = 1
    view.tick(runner)  # type: ignore[arg-type]
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines  # the second for the restart, not for "waiting"
    assert lines[0].endswith("algo-1 running step 4 ckpt snapshot.pt | algo-2 starting | restarts 0")
    assert lines[1].endswith("algo-1 waiting step 4 ckpt snapshot.pt | algo-2 starting | restarts 1")
    runner.outcome.restart_causes = ["restart 1: algo-1 local rank 0 killed by SIGKILL (chaos kill:4)"]
    view.tick(runner)  # type: ignore[arg-type]  # its cause came: a line for it
    assert out.getvalue().splitlines()[-1].endswith("| restarts 1 (last: algo-1 local rank 0 killed by SIGKILL "
                                                    "(chaos kill:4))")
    runner.agents[1].code = 1  # algo-2 failed; local mode stops algo-1 because of it: not algo-1's own exit
    runner.outcome.stopped_hosts = ["algo-1"]
    runner.agents[0].code = 143
    view.tick(runner)  # type: ignore[arg-type]
    assert out.getvalue().splitlines()[-1].endswith("algo-1 stopped step 4 ckpt snapshot.pt | algo-2 exit 1 | restarts 1 "
                                                    "(last: algo-1 local rank 0 killed by SIGKILL (chaos kill:4))")


def test_the_checkpoint_column_names_a_checkpoint(tmp_path: Path) -> None:
    """Accelerate saves under checkpoints/checkpoint_N: the column named the subfolder ("ckpt checkpoints"),
    it names the newest checkpoint in it, by its save number (a restored folder's times are the restore's);
    a step folder or a file is named as it is, a sync marker never."""
    import os

    from sm_dist.local.view import newest_entry

    for index in (0, 1, 2, 10):
        (tmp_path / "checkpoints" / f"checkpoint_{index}").mkdir(parents=True)
        os.utime(tmp_path / "checkpoints" / f"checkpoint_{index}", (1000 - index, 1000 - index))
    assert newest_entry(tmp_path) == "checkpoints/checkpoint_10"
    (tmp_path / "checkpoints" / "checkpoint_11.sagemaker-uploading").write_bytes(b"")
    assert newest_entry(tmp_path) == "checkpoints/checkpoint_10"
    (tmp_path / "snapshot.pt").write_bytes(b"x")
    assert newest_entry(tmp_path) == "snapshot.pt"
    (tmp_path / "step-000008").mkdir()
    assert newest_entry(tmp_path) == "step-000008"
    assert newest_entry(tmp_path / "missing") is None


def test_a_lightning_checkpoint_is_compared_through_weights_only_loading(tmp_path: Path) -> None:
    """Lightning's model.ckpt pickles its hyper-parameters (AttributeDict) and paths, which
    weights_only loading refuses: they stand in as empty mappings (never constructed, no code
    runs) and the tensors are compared; counters that differ are named, not a difference."""
    import pathlib

    from lightning.fabric.utilities.data import AttributeDict

    from sm_dist.tools.weights_compare import compare

    def ckpt(folder: Path, weight: float, step: int) -> None:
        folder.mkdir(exist_ok=True)
        torch.save({"state_dict": {"layer.weight": torch.full((2, 2), weight)}, "global_step": step,
                    "hyper_parameters": AttributeDict(lr=0.1), "callbacks": {"dirpath": pathlib.PosixPath("/opt/ml")}},
                   folder / "model.ckpt")

    ckpt(tmp_path / "a", 1.0, 12)
    ckpt(tmp_path / "b", 1.0, 13)
    same = compare(tmp_path / "a", tmp_path / "b")
    assert same["result"] == "identical", same
    assert "model.ckpt: 'global_step'" in same["detail"]
    ckpt(tmp_path / "b", 1.5, 12)
    assert compare(tmp_path / "a", tmp_path / "b")["detail"] == "model.ckpt: 'state_dict.layer.weight': values differ"
