"""Reading the YAML files users write (configs, fault schedules, scenarios, experiments).

Every one of them is read through ``load``: a file that is missing, unreadable or not YAML is a
``ConfigError`` in one line naming the file and, for a syntax error, the line and column where
the parser stopped and what it found there, never PyYAML's multi-line message about
``"<unicode string>"``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from zabray.errors import ConfigError


def load(path: str | os.PathLike[str], what: str = "file") -> Any:
    """The YAML document in ``path`` (None for an empty file). ``what`` names the kind of file in
    errors ("config file", "schedule", ...)."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise ConfigError(f"{what} {p} does not exist") from None
    except OSError as e:
        raise ConfigError(f"cannot read {what} {p}: {e.strerror or e}") from None
    return loads(text, what, p)


def loads(text: str, what: str, path: str | os.PathLike[str] | None = None) -> Any:
    """The YAML document in ``text``. A syntax error reads ``PATH:LINE:COLUMN: WHAT is not valid
    YAML: PROBLEM``, or without a path ``WHAT is not valid YAML: PROBLEM (line L, column C)``."""
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = ", ".join(p for p in (e.context, e.problem) if p) or "parse error"
        if mark is None:
            where = f"{path}: " if path is not None else ""
        elif path is not None:
            where = f"{path}:{mark.line + 1}:{mark.column + 1}: "
        else:
            where, problem = "", f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
        raise ConfigError(f"{where}{what} is not valid YAML: {problem}") from None
    except yaml.YAMLError as e:
        first = (str(e).splitlines() or ["parse error"])[0]
        raise ConfigError(f"{path}: {what} is not valid YAML: {first}" if path else
                          f"{what} is not valid YAML: {first}") from None
