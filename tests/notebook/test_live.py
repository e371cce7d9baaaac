"""The live view: one display updated in place in a notebook, a line per change elsewhere."""

from __future__ import annotations

import io

from sm_dist.notebook.live import LiveDisplay, in_notebook


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_script_is_no_notebook() -> None:
    assert in_notebook() is False  # pytest: no kernel, whether IPython is installed or not


def test_lines_on_a_pipe_when_the_key_changes_or_every_so_often() -> None:
    out, clock = io.StringIO(), _Clock()
    view = LiveDisplay(out, heading="run: 2 hosts", every=10.0, clock=clock)
    view.start()
    view.show("a 1", key="a")
    clock.now += 1
    view.show("a 2", key="a")  # only the text moved, too soon
    clock.now += 10
    view.show("a 3", key="a")  # only the text moved, 10 s later
    view.show("b 3", key="b")
    view.show("b 4", key="b", final=True)  # the last state, same key as the last line: not repeated
    assert out.getvalue().splitlines() == ["run: 2 hosts", "a 1", "a 3", "b 3"]


def test_a_terminal_redraws_one_line() -> None:
    out = io.StringIO()
    view = LiveDisplay(out, tty=True)
    view.show("x 1")
    view.show("x 1")
    view.show("x 2", final=True)
    assert out.getvalue() == "\r\033[Kx 1\r\033[Kx 2\n"


def test_a_notebook_updates_one_display_in_place(kernel: list[dict[str, str]]) -> None:
    clock = _Clock()
    view = LiveDisplay(heading="run: 2 hosts; logs in /tmp/<x>", clock=clock)
    assert view.notebook
    view.start()
    view.show("a 1", key="a", html="<table>a 1</table>")
    view.show("a 2", key="a")  # within a second, same key: not yet
    clock.now += 2
    view.show("a 3", key="a")
    view.show("a 3", key="a", final=True)  # the final state is always shown
    assert [d["text/plain"].splitlines()[-1] for d in kernel] == ["run: 2 hosts; logs in /tmp/<x>", "a 1", "a 3", "a 3"]
    assert "logs in /tmp/&lt;x&gt;" in kernel[1]["text/html"] and "<table>a 1</table>" in kernel[1]["text/html"]
    assert "<pre" in kernel[2]["text/html"]  # no HTML given: the text, escaped


def test_a_stream_given_in_a_notebook_gets_lines(kernel: list[dict[str, str]]) -> None:
    out = io.StringIO()
    LiveDisplay(out).show("a")
    assert out.getvalue() == "a\n" and kernel == []
