"""The live view of a running job: one display, updated in place (standard library).

In a notebook (a Jupyter kernel) it is one output updated through an IPython display handle, as
text and HTML; on a terminal, one line redrawn with a carriage return; anywhere else (a pipe, a
file, CI), a new line when the view's key changes and at most every `every` seconds when only its
text moved. Local mode's hosts view (sm_dist.local.view) and the cloud job's `wait()` both show
through it, so a notebook and a terminal get the same information from the same code. IPython
is imported only inside a kernel, which has imported it already.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, TextIO

from sm_dist.markup import escape

if TYPE_CHECKING:
    from IPython.display import DisplayHandle

#: Seconds between two printed lines when only the text moved (not a terminal, not a notebook).
PRINT_EVERY = 10.0
#: Seconds between two updates of a notebook's display when only the text moved.
NOTEBOOK_EVERY = 1.0


def in_notebook() -> bool:
    """True inside a Jupyter kernel; False in a terminal IPython or a plain script. A kernel has
    imported IPython before running any cell, so a process without it is no notebook."""
    module = sys.modules.get("IPython")
    get_ipython = getattr(module, "get_ipython", None)
    shell = get_ipython() if get_ipython is not None else None
    return shell is not None and getattr(shell, "kernel", None) is not None


class LiveDisplay:
    """One live status: `start()` once, then `show(text, key=...)` as often as it changes.

    `stream` None: a notebook's display when in a kernel, else stdout. `tty` None: the stream's
    isatty(); False keeps one line per change on a terminal too (a status history). `every` None:
    print only when the key changes (outside a notebook and a terminal).
    """

    def __init__(self, stream: TextIO | None = None, *, heading: str = "", notebook: bool | None = None,
                 tty: bool | None = None, every: float | None = PRINT_EVERY,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._stream = stream
        self.notebook = in_notebook() if notebook is None and stream is None else bool(notebook)
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)()) if tty is None else tty
        self._heading = heading
        self._every = every
        self._clock = clock
        self._handle: DisplayHandle | None = None
        self._last_key: Hashable = None
        self._last_text: str | None = None
        self._last_shown = 0.0

    @property
    def stream(self) -> TextIO:
        return self._stream or sys.stdout

    def start(self) -> None:
        """Show the heading: a line above the view, or the top of the notebook's display."""
        if self.notebook:
            self._display("", "")
        elif self._heading:
            print(self._heading, file=self.stream, flush=True)

    def show(self, text: str, *, key: Hashable = None, html: str | None = None, final: bool = False) -> None:
        """Show `text` (and `html` in a notebook) if it is due; `key` is what deserves a new line
        when it changes (default: the text); `final`: the last state, shown unless just shown."""
        key = text if key is None else key
        now = self._clock()
        if self.notebook:
            if text == self._last_text and not final:
                return
            if not final and key == self._last_key and now - self._last_shown < NOTEBOOK_EVERY:
                return
            self._display(text, html if html is not None else f"<pre style=\"margin:0\">{escape(text)}</pre>")
        elif self._tty:
            if text == self._last_text and not final:
                return
            self.stream.write("\r\033[K" + text + ("\n" if final else ""))
            self.stream.flush()
        else:
            if final and key == self._last_key:
                return
            moved = text != self._last_text and self._every is not None and now - self._last_shown >= self._every
            if not (final or key != self._last_key or moved):
                return
            self.stream.write(text + "\n")
            self.stream.flush()
        self._last_key, self._last_text, self._last_shown = key, text, now

    def _display(self, text: str, html: str) -> None:
        from IPython.display import display

        heading_html = f"<div style=\"font-size:0.9em;opacity:0.75\">{escape(self._heading)}</div>" if self._heading else ""
        plain = "\n".join(part for part in (self._heading, text) if part)
        data = {"text/plain": plain, "text/html": f'<div class="sm-dist">{heading_html}{html}</div>'}
        if self._handle is None:
            self._handle = display(data, raw=True, display_id=True)
        else:
            self._handle.update(data, raw=True)


__all__ = ["NOTEBOOK_EVERY", "PRINT_EVERY", "LiveDisplay", "in_notebook"]
