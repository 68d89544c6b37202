"""The outbox every replica connection shares: what is queued leaves on ``flush`` (a callback's
end), or at the next loop turn when nobody flushes; each connection once, in order, and the
owner's ``before`` (a replica's trace rows to the kernel) ahead of any frame, and its ``then``
(a replica's pending group commit) only after the frames are written."""

from __future__ import annotations

import asyncio

from zabray.net.batching import Outbox


class Conn:
    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log
        self.queued = False

    def queue(self, box: Outbox) -> None:
        if not self.queued:
            self.queued = True
            box.add(self)

    def flush(self) -> None:
        self.queued = False
        self.log.append(self.name)


def test_flush_writes_each_connection_once_in_order_between_the_hooks() -> None:
    async def body() -> None:
        log: list[str] = []
        box = Outbox(then=lambda: log.append("then"), before=lambda: log.append("before"))
        a, b = Conn("a", log), Conn("b", log)
        a.queue(box)
        b.queue(box)
        a.queue(box)
        box.flush()
        assert log == ["before", "a", "b", "then"]
        await asyncio.sleep(0)  # the fallback turn finds nothing to write, but still runs ``then``
        assert log == ["before", "a", "b", "then", "then"]

    asyncio.run(body())


def test_without_a_flush_the_next_loop_turn_writes_and_nothing_is_left_behind() -> None:
    async def body() -> None:
        log: list[str] = []
        box = Outbox()
        a, b = Conn("a", log), Conn("b", log)
        a.queue(box)
        assert log == []
        await asyncio.sleep(0)
        assert log == ["a"]
        b.queue(box)  # queued after an early flush, while the first turn is still pending
        a.queue(box)
        box.flush()
        b.queue(box)
        await asyncio.sleep(0)
        assert log == ["a", "b", "a", "b"] and not a.queued and not b.queued

    asyncio.run(body())


def test_a_connection_written_outside_a_flush_still_runs_before_first() -> None:
    async def body() -> None:
        log: list[str] = []
        box = Outbox(then=lambda: log.append("then"), before=lambda: log.append("before"))
        a = Conn("a", log)
        box.write_now(a)  # a connection just made, authenticated or resumed writes what it holds
        assert log == ["before", "a"]

    asyncio.run(body())
