"""Learning-rate schedules: warmup, cosine to the floor, validation."""

from __future__ import annotations

import pytest
import torch

from sm_dist.errors import ConfigError
from sm_dist.runtime.schedules import COSINE_FLOOR, lr_schedule


def _rates(name: str, warmup: int, total: int) -> list[float]:
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = lr_schedule(name, warmup_steps=warmup)(opt, total)
    rates = []
    for _ in range(total):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return rates


def test_cosine_warms_up_then_decays_to_the_floor() -> None:
    rates = _rates("cosine", 2, 12)
    assert rates[:3] == [0.5, 1.0, 1.0]
    assert all(a >= b for a, b in zip(rates[2:], rates[3:]))
    assert rates[-1] == pytest.approx(COSINE_FLOOR + (1 - COSINE_FLOOR) * 0.5 * (1 + torch.cos(torch.tensor(0.9 * torch.pi)).item()))


def test_constant_with_warmup() -> None:
    assert _rates("constant", 4, 6) == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]


def test_plain_constant_needs_no_scheduler() -> None:
    assert lr_schedule("constant") is None


@pytest.mark.parametrize(("name", "warmup", "field"), [("linear", 0, "lr_schedule"), ("cosine", -1, "warmup_steps")])
def test_bad_schedule_names_the_field(name: str, warmup: int, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        lr_schedule(name, warmup_steps=warmup)
    assert err.value.field == field
