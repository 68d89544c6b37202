"""The suite's one way to wait: poll a condition until it holds or a deadline passes.

Tests wait on conditions, never on sleeps: the short pause between two looks at the condition
is only how often it is checked, and a condition that never comes fails with what was awaited.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

INTERVAL = 0.02
"""Seconds between two looks: short against any timeout, long enough not to spin a core."""


def wait_until(cond: Callable[[], object], timeout: float = 30, what: str = "condition",
               interval: float = INTERVAL) -> None:
    """Return once ``cond()`` is true; ``AssertionError`` naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


async def until(cond: Callable[[], object], timeout: float = 30, what: str = "condition",
                interval: float = INTERVAL) -> None:
    """``wait_until`` for a test running on an event loop: the loop goes on between looks."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(interval)
