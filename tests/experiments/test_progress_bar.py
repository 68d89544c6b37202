"""An experiment's progress bar is drawn where it can be redrawn in place: a terminal or a
notebook. Into a file or a pipe (a CI log), tqdm's carriage returns piled every redraw onto one
line, hundreds of them per point."""

from __future__ import annotations

import io
import sys

import pytest

from zabray.experiments.runner import _bar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_bar_in_a_file_a_bar_in_a_terminal_or_a_notebook(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert _bar(10.0, "point", True) is None
    for where in ("terminal", "notebook"):
        if where == "terminal":
            monkeypatch.setattr(sys, "stderr", Terminal())
        else:
            monkeypatch.setattr(sys, "stderr", io.StringIO())
            monkeypatch.setitem(sys.modules, "ipykernel", sys.modules[__name__])
        bar = _bar(10.0, "point", True)
        assert bar is not None, where
        bar.close()
    assert _bar(10.0, "point", False) is None  # --no-progress
