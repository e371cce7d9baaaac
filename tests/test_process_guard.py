"""The process guard (tests/_process_guard.py): an unmarked test that starts a process fails.

The refusals below happen before any fork, so these tests start nothing and stay in the fast set.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

import _process_guard
import pytest


def _mp(method: str) -> Callable[[], object]:
    return lambda: multiprocessing.get_context(method).Process(target=print).start()


STARTS: dict[str, Callable[[], object]] = {
    "subprocess.run": lambda: subprocess.run([sys.executable, "-c", "pass"]),
    "os.system": lambda: os.system("true"),
    "os.popen": lambda: os.popen("true").read(),
    "os.fork": lambda: os.fork() or os._exit(0),  # were the guard broken, the child would leave at once
    "os.posix_spawn": lambda: os.posix_spawn("/bin/true", ["true"], dict(os.environ)),
    "multiprocessing fork": _mp("fork"),
    "multiprocessing spawn": _mp("spawn"),
    "multiprocessing forkserver": _mp("forkserver"),
    "process pool": lambda: ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")).submit(print),
}


@pytest.mark.parametrize("start", STARTS.values(), ids=STARTS.keys())
def test_an_unmarked_test_cannot_start_a_process(start: Callable[[], object]) -> None:
    with pytest.raises(_process_guard.ProcessStarted, match=r"this test starts a process .*mark it @pytest.mark.slow"):
        start()
    assert _process_guard.take_refused(), "the refusal is recorded for the report"


def test_a_bound_early_reference_is_refused_too() -> None:
    """The audit hook sees the C function itself, not the name a module looked it up by."""
    from os import system as early

    with pytest.raises(_process_guard.ProcessStarted):
        early("true")
    assert _process_guard.take_refused() == ["os.system"]


def test_the_guard_is_installed_and_intact() -> None:
    assert _process_guard.tampered() == []


_INNER = '''
import subprocess, sys, threading
import pytest

def test_starts():
    subprocess.run([sys.executable, "-c", "pass"])

def test_swallows():
    try:
        subprocess.run([sys.executable, "-c", "pass"])
    except Exception:
        pass

def test_in_a_thread():
    t = threading.Thread(target=lambda: subprocess.run(["true"]))
    t.start(); t.join()

@pytest.fixture(scope="module")
def server():
    return subprocess.Popen(["true"])

def test_module_fixture(server):
    pass

@pytest.mark.xfail(reason="would hide the refusal")
def test_xfail_hides_it():
    subprocess.run(["true"])

def test_starts_nothing():
    assert True
'''


def test_an_inner_session_reports_every_way_a_refusal_could_hide(pytester: pytest.Pytester) -> None:
    """The plugin's wiring, end to end: caught, threaded, fixture and xfail refusals all fail."""
    pytester.makepyfile(test_inner=_INNER)
    recorder = pytester.inline_run("-p", "_process_guard", "-p", "no:cacheprovider")
    reports = [r for r in recorder.getreports("pytest_runtest_logreport") if r.failed]
    assert {r.nodeid.split("::")[-1]: r.when for r in reports} == {
        "test_starts": "call", "test_swallows": "call", "test_in_a_thread": "call",
        "test_module_fixture": "setup", "test_xfail_hides_it": "call"}
    assert all("mark it @pytest.mark.slow" in r.longreprtext + str(r.sections) for r in reports)
    passed = [r.nodeid for r in recorder.getreports("pytest_runtest_logreport") if r.passed and r.when == "call"]
    assert passed == ["test_inner.py::test_starts_nothing"]


@pytest.mark.parametrize("caught", [False, True])
def test_a_test_file_that_starts_a_process_when_imported_fails_to_collect(pytester: pytest.Pytester,
                                                                         caught: bool) -> None:
    """Marks do not help here: every selection imports every file."""
    start = 'subprocess.run(["true"])'
    body = f"try:\n    {start}\nexcept Exception:\n    pass\n" if caught else f"{start}\n"
    pytester.makepyfile(test_imports_start=f"import subprocess\nimport pytest\n{body}\n"
                        "pytestmark = pytest.mark.slow\n\ndef test_nothing():\n    pass\n")
    recorder = pytester.inline_run("-p", "_process_guard", "-p", "no:cacheprovider")
    [failed] = [r for r in recorder.getreports("pytest_collectreport") if r.failed]
    assert "collecting this starts a process (subprocess.Popen ['true'])" in failed.longreprtext + str(failed.sections)
    assert _process_guard.take_refused() == []  # the inner session's refusals stayed in its own frames


@pytest.mark.slow
def test_a_marked_test_starts_processes() -> None:
    assert subprocess.run([sys.executable, "-c", "pass"]).returncode == 0
