"""State dicts carry no `module.` prefix and move between strategies and into a plain module.

Each case trains under strategy A, saves A's state with DCP (as the checkpointer does), loads it
into strategy B, and checks that B continues exactly as A does; rank 0 also loads it into an
unwrapped model with `load_state_dict(strict=True)`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rt_spawn import free_port, run_ranks
from rt_workers import Net

pytestmark = pytest.mark.slow  # starts processes (tests/_process_guard.py)

PAIRS = [
    ("ddp/fp32", "fsdp/fp32"),
    ("fsdp/fp32", "ddp/fp32"),
    ("zero1/fp32", "zero2/fp32"),
    ("zero2/fp32", "zero1/fp32"),
    ("hsdp/fp32", "fsdp/fp32"),
    ("ddp/mixed", "zero1/mixed"),
    ("zero1/mixed", "ddp/fp32"),
    ("fsdp/mixed", "hsdp/mixed"),
    ("fsdp/fp32", "zero1/mixed"),
    ("zero1/fp32", "ddp/mixed"),
]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    folder: Path = tmp_path_factory.mktemp("ckpt")
    return run_ranks(2, "rt_workers:roundtrip", {"pairs": [list(p) for p in PAIRS], "folder": str(folder)},
                     free_port())


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: "->".join(p))
def test_state_moves_between_strategies(results: list[dict], pair: tuple[str, str]) -> None:
    plain_keys = sorted(Net().state_dict())
    for rank, result in enumerate(results):
        case = result["->".join(pair)]
        assert case["model_keys"] == plain_keys  # no `module.`, same names as the plain model
        assert case["optim_keys"] == plain_keys  # optimizer state keyed by the same FQNs
        same_precision = pair[0].split("/")[1] == pair[1].split("/")[1]
        rel = 1e-5 if same_precision else 1e-2
        for a, b in zip(case["cont_a"], case["cont_b"], strict=True):
            assert abs(a - b) <= rel * abs(a), (case["cont_a"], case["cont_b"])
        if rank == 0:
            assert case["plain_ok"] is True
