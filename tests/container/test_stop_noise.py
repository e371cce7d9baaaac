"""torchrun's own SignalException traceback and logging-error block stay out of the host's log once
PID 1 has signalled torchrun (sm_dist.container.stop_noise); everything else passes, in order."""

from __future__ import annotations

import io
import logging
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from sm_dist.container.end_watch import EndWatch
from sm_dist.container.stop_noise import StopNoise, without_stop_noise
from sm_dist.container.torchrun import Supervisor

#: The end of algo-2's log after PID 1 stopped torchrun (torch 2.13, Python 3.11; middle frames cut).
TORCHRUN_END = """\
[sm_dist launcher] ValueError: shape mismatch in batch 3 on rank 1  (algo-2, rank 1); not restarted: ...; stopping torchrun
W1126 14:45:38.015000 10839 torch/distributed/elastic/agent/server/api.py:753] Received 15 death signal, shutting down workers
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "<frozen runpy>", line 88, in _run_code
  File "/work/main/.venv/lib/python3.11/site-packages/torch/distributed/run.py", line 1032, in <module>
    main()
  File "/work/main/.venv/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 367, in wrapper
    return f(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/inspect.py", line 1755, in stack
    return getouterframes(sys._getframe(1), context)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/work/main/.venv/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/api.py", line 86, in _terminate_process_handler
    raise SignalException(f"Process {os.getpid()} got signal: {sigval}", sigval=sigval)
torch.distributed.elastic.multiprocessing.api.SignalException: Process 10839 got signal: 15
[sm_dist launcher] received SIGTERM, forwarding to torchrun
[sm_dist launcher] host algo-2: exit code 1""".splitlines()


class SignalException(Exception):
    """Stands for torch's (an Exception, as torch's is: logging.Handler.handleError catches it)."""


def logging_error_block() -> list[str]:
    """What Python's logging prints when a signal's exception is raised inside a handler's emit."""
    class Raising(io.StringIO):
        def write(self, text: str) -> int:
            raise SignalException("Process 7778 got signal: 15")

    err, saved = io.StringIO(), sys.stderr
    handler = logging.StreamHandler(Raising())
    log = logging.getLogger("fake_torchrun")
    log.addHandler(handler)
    sys.stderr = err
    try:
        log.warning("Received %s death signal, shutting down workers", 15)
    finally:
        sys.stderr = saved
        log.removeHandler(handler)
    return err.getvalue().splitlines()


def test_torchruns_traceback_after_a_stop_is_left_out() -> None:
    kept = without_stop_noise(TORCHRUN_END)
    assert kept == [TORCHRUN_END[0], TORCHRUN_END[1], *TORCHRUN_END[-2:]]


def test_a_logging_error_block_is_left_out_and_other_tracebacks_pass_in_order() -> None:
    block = logging_error_block()
    assert block[0] == "--- Logging error ---" and block[-1].startswith("Arguments: ")
    script_error = ["Traceback (most recent call last):", '  File "/opt/ml/input/data/code/train.py", line 3, in <module>',
                    "    import torchvision", "ModuleNotFoundError: No module named 'torchvision'"]
    lines = ["step 4", *block, "step 5", *script_error, "step 6"]
    assert without_stop_noise(lines) == ["step 4", "step 5", *script_error, "step 6"]
    noise = StopNoise()  # a block the output ends inside is written, not lost
    assert [kept for line in script_error[:2] for kept in noise.feed(line)] == []
    assert noise.flush() == script_error[:2]


def test_a_chain_with_the_signal_in_any_block_is_left_out_whole() -> None:
    """The signal landed while torchrun handled another error (its rendezvous store closing): Python
    prints both blocks and the line between them; a chain without the signal passes whole, in order."""
    store = ["Traceback (most recent call last):", '  File "/x/torch/distributed/elastic/rendezvous/api.py", line 9, in get',
             "torch.distributed.DistNetworkError: Connection closed by peer"]
    signal_block = TORCHRUN_END[2:-2]
    chained = [*store, "", "During handling of the above exception, another exception occurred:", "", *signal_block]
    assert without_stop_noise(["step 9", *chained, "[sm_dist launcher] host algo-3: exit code 1"]) == [
        "step 9", "[sm_dist launcher] host algo-3: exit code 1"]
    other = [*store, "", "The above exception was the direct cause of the following exception:", "",
             *store[:2], "RuntimeError: rendezvous failed"]
    assert without_stop_noise([*other, "step 10"]) == [*other, "step 10"]
    assert without_stop_noise(chained) == []  # the output ends with the chain


def test_a_record_another_thread_logs_inside_the_traceback_is_left_out_with_it() -> None:
    """torchrun's keep-alive thread logged in the middle of the exception line (a full-suite run, 2026-11-29):
    the record and the line's two halves are the traceback's, and go with it; a whole record between two
    frames too."""
    heartbeat = ("W1129 02:33:41.508000 23391 torch/distributed/elastic/rendezvous/dynamic_rendezvous.py:1346] "
                 "The node 'algo-2_23391_0' has failed to send a keep-alive heartbeat to the rendezvous "
                 "'sm-dist-20261129-023330-117' due to an error of type RendezvousConnectionError.")
    exception = TORCHRUN_END[-3]
    cut = exception.index("SignalException")
    split = [*TORCHRUN_END[:-3], exception[:cut] + heartbeat, exception[cut:], *TORCHRUN_END[-2:]]
    assert without_stop_noise(split) == [TORCHRUN_END[0], TORCHRUN_END[1], *TORCHRUN_END[-2:]]
    between = [*TORCHRUN_END[:5], heartbeat, *TORCHRUN_END[5:]]
    assert without_stop_noise(between) == [TORCHRUN_END[0], TORCHRUN_END[1], *TORCHRUN_END[-2:]]
    script_error = ["Traceback (most recent call last):", '  File "train.py", line 3, in <module>', heartbeat,
                    "ValueError: bad batch"]  # no signal: written whole, the record in its place
    assert without_stop_noise(script_error) == script_error


FAKE_TORCHRUN = textwrap.dedent("""
    import signal, sys, time
    class SignalException(BaseException):
        pass
    def on_term(signum, frame):
        raise SignalException(f"Process 1 got signal: {signum}")
    signal.signal(signal.SIGTERM, on_term)
    print("W0000 api.py:753] ready", file=sys.stderr, flush=True)
    try:
        while True:
            time.sleep(0.05)
    except SignalException:
        print("W0000 api.py:753] Received 15 death signal, shutting down workers", file=sys.stderr, flush=True)
        raise
""")


@pytest.mark.slow
def test_the_supervisor_writes_no_signal_traceback(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A process that ends on SIGTERM with a SignalException traceback, as torchrun does: PID 1's
    log has its lines but not the traceback; the tail it keeps for the watchers still has everything."""
    script = tmp_path / "fake_torchrun.py"
    script.write_text(FAKE_TORCHRUN)
    sup = Supervisor([sys.executable, "-u", str(script)], {}, tmp_path, ends=EndWatch(None, local_ranks=1))
    signal.setitimer(signal.ITIMER_REAL, 1.5)  # SIGALRM: stands for the platform's SIGTERM
    previous = signal.signal(signal.SIGALRM, lambda *_: sup._on_signal(signal.SIGTERM, None))
    try:
        code = sup.run()
    finally:
        signal.signal(signal.SIGALRM, previous)
    err = capfd.readouterr().err
    assert code == 1 and "ready" in err and "Received 15 death signal" in err
    assert "Traceback" not in err and "SignalException" not in err, err
    assert any("SignalException" in line for line in sup.tail)
