"""SIGINT/SIGTERM to local mode while a run lasts: recorded for the runner, a second one raises at once."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from sm_dist.contract.faults import parse_fault
from sm_dist.errors import ConfigError
from sm_dist.local.interrupt import INTERRUPT_GRACE_S, Interrupted, StopSignals


def test_the_first_signal_is_recorded_the_second_raises_and_the_handlers_come_back() -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with pytest.raises(Interrupted) as raised, StopSignals() as stop:
        assert stop.grace(120.0) == 120.0
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # the handler runs between two bytecodes of this thread
            if stop.signum is not None:
                break
        assert stop.signum == signal.SIGTERM and stop.grace(120.0) == INTERRUPT_GRACE_S
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):
            pass
    assert isinstance(raised.value, KeyboardInterrupt) and raised.value.exit_code == 130
    assert "stopped by SIGINT: every emulated host was stopped" in str(raised.value)
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_outside_the_main_thread_nothing_is_installed() -> None:
    seen: list[object] = []

    def body() -> None:
        with StopSignals() as stop:
            seen.append(signal.getsignal(signal.SIGTERM))
            seen.append(stop.signum)

    before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen == [before, None]


def test_chaos_hang_takes_a_step() -> None:
    assert parse_fault("hang:5").step == 5
    with pytest.raises(ConfigError, match="only kill and sigterm take seconds"):
        parse_fault("hang:5s")
