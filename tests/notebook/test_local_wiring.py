"""Local mode in a notebook: the live view and not the hosts' lines, unless asked."""

from __future__ import annotations

import io

import pytest

from sm_dist.local import api
from sm_dist.local.options import LocalOptions


@pytest.mark.parametrize(("options", "notebook", "expected"), [
    (LocalOptions(), True, (False, True)),  # a notebook: the view, the logs one argument away
    (LocalOptions(echo=True), True, (True, False)),
    (LocalOptions(echo_stream=io.StringIO()), True, (True, False)),  # a stream given: it gets the logs
    (LocalOptions(), False, (True, False)),  # a script: the logs, as before
    (LocalOptions(view=True), False, (True, True)),  # sm-dist fit --local (the view wins over the echo)
])
def test_local_mode_echo_or_view(monkeypatch: pytest.MonkeyPatch, options: LocalOptions, notebook: bool,
                                 expected: tuple[bool, bool]) -> None:
    monkeypatch.setattr(api, "in_notebook", lambda: notebook)
    assert api._echo_or_view(options) == expected
