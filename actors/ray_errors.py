"""Errors out of Ray's wrapping: an error an actor raised comes back to its caller wrapped in
``RayTaskError``, once per actor it passed through (injector -> controller -> replica)."""

from __future__ import annotations

import ray


def innermost(e: BaseException) -> BaseException:
    """The error the innermost actor raised (``e`` itself when Ray did not wrap it)."""
    cause: BaseException = e
    for _ in range(10):
        inner = getattr(cause, "cause", None)
        if not isinstance(cause, ray.exceptions.RayTaskError) or inner is None:
            break
        cause = inner
    return cause
