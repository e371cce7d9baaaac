"""The suite's two speeds: a test that starts a process must carry `@pytest.mark.slow`.

Plain `pytest` runs the fast set (`-m "not slow"`, pyproject.toml); the README's command runs all.
This plugin (registered by tests/conftest.py) keeps the split honest: while an UNMARKED test runs
(its setup, fixtures of every scope that it sets up, its body and its teardown), any attempt to
start a process is refused with `ProcessStarted` ("this test starts a process: mark it ...") and
the test fails.

Why it cannot be defeated silently:
- Most entry points are watched through a `sys.addaudithook` hook: CPython raises these audit events
  in C, before the fork, however the function was reached (`from os import system` bound early
  included), and an audit hook cannot be removed once added.
- multiprocessing's spawn and forkserver raise no audit event, so `BaseProcess.start` (every context,
  torch.multiprocessing and ProcessPoolExecutor included) and `multiprocessing.util.spawnv_passfds`
  (its helper processes) are wrapped; a test that leaves either replaced fails the next test.
- A refusal is also recorded, and the test's report is turned into a failure (an xfail included)
  even when the code under test caught the exception or it happened in a background thread.
- The guard is on from the first fixture setup of a test, so a module- or session-scoped fixture
  that starts a process is caught under the first unmarked test that needs it; and while a test file
  is collected (imported), which happens for marked files too, so a process started at import is a
  collection error whatever the marks.
- tests/conftest.py refuses to run with the plugin blocked (`-p no:process_guard`).
What it does not see: processes started from C code that bypasses CPython's os/subprocess layer.
"""

from __future__ import annotations

import multiprocessing.process
import multiprocessing.util
import sys
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import pytest

MARK = "slow"
#: Audit events raised just before CPython creates a process (os.spawn* and pty go through os.fork).
EVENTS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.posix_spawnp", "os.system"})


class ProcessStarted(RuntimeError):
    """An unmarked test tried to start a process; the attempt was refused."""


@dataclass
class _Frame:
    nodeid: str
    guarding: bool
    refused: list[str] = field(default_factory=list)


#: One frame per running test protocol (a stack, so a pytester session run inside a test nests).
_frames: list[_Frame] = []
_originals: dict[str, Callable[..., Any]] = {}


def message(nodeid: str, what: str) -> str:
    return (f"this test starts a process ({what}): mark it @pytest.mark.{MARK} "
            f"(plain `pytest` runs only tests that start none; see tests/_process_guard.py) [{nodeid}]")


def _refuse(what: str) -> None:
    if _frames and _frames[-1].guarding:
        _frames[-1].refused.append(what)
        raise ProcessStarted(message(_frames[-1].nodeid, what))


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event in EVENTS and _frames and _frames[-1].guarding:
        _refuse(f"{event} {args[1] if event == 'subprocess.Popen' else ''}".strip())


def _guarded_start(self: multiprocessing.process.BaseProcess) -> None:
    _refuse(f"multiprocessing {type(self).__name__}.start")
    _originals["start"](self)


def _guarded_spawnv_passfds(path: str, args: Any, passfds: Any) -> int:
    _refuse(f"multiprocessing.util.spawnv_passfds {list(args)}")
    return int(_originals["spawnv_passfds"](path, args, passfds))


def install() -> None:
    """Add the audit hook and wrap multiprocessing's entry points, once per interpreter."""
    if _originals:
        return
    _originals["start"] = multiprocessing.process.BaseProcess.start
    _originals["spawnv_passfds"] = multiprocessing.util.spawnv_passfds
    multiprocessing.process.BaseProcess.start = _guarded_start  # type: ignore[method-assign]
    multiprocessing.util.spawnv_passfds = _guarded_spawnv_passfds
    sys.addaudithook(_audit)


def tampered() -> list[str]:
    """The wrapped entry points that something replaced (their process starts would go unseen)."""
    now = {"start": multiprocessing.process.BaseProcess.start, "spawnv_passfds": multiprocessing.util.spawnv_passfds}
    mine = {"start": _guarded_start, "spawnv_passfds": _guarded_spawnv_passfds}
    return [f"multiprocessing {name} was replaced" for name in now if now[name] is not mine[name]]


def take_refused() -> list[str]:
    """What the running test tried to start, cleared (a test of the guard takes its own refusals)."""
    if not _frames:
        return []
    refused, _frames[-1].refused = _frames[-1].refused, []
    return refused


def pytest_configure(config: pytest.Config) -> None:
    install()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    _frames.append(_Frame(item.nodeid, guarding=item.get_closest_marker(MARK) is None))
    _frames[-1].refused.extend(tampered())
    try:
        return (yield)
    finally:
        _frames.pop()


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, Any]:
    """Importing a test file runs for every selection: it must start no process."""
    _frames.append(_Frame(collector.nodeid or ".", guarding=True))
    try:
        report = yield
        refused = take_refused()
    finally:
        _frames.pop()
    if refused:
        text = (f"collecting this starts a process ({'; '.join(refused)}): start it in a test or "
                f"fixture marked @pytest.mark.{MARK} (tests/_process_guard.py)")
        if report.failed:
            report.sections.append(("process guard", text))
        else:
            report.outcome, report.longrepr = "failed", text
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """A phase in which a process start was refused fails, whatever the test did with the refusal."""
    report = yield
    refused = take_refused()
    if refused:
        text = message(item.nodeid, "; ".join(refused))
        if report.failed:
            report.sections.append(("process guard", text))
        else:
            report.outcome = "failed"
            report.longrepr = text
            if hasattr(report, "wasxfail"):
                del report.wasxfail
    return report
