"""Errors of the trace pipeline. Importing this module does not import PySpark."""

from __future__ import annotations

from zabray.errors import ZabError


class TraceError(ZabError, ValueError):
    """The input is not a trace the checker can judge: a missing run directory, no trace files,
    an unsupported schema version, no rows at all. The CLI maps it to exit code 2; a trace that
    loads but breaks a property is a verdict, not a ``TraceError``."""
