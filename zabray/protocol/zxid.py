"""Transaction ids: (epoch, counter) packed into one 64-bit integer.

``Zxid`` is an ``int`` so ordering, hashing and msgpack encoding cost nothing extra; the
packing makes integer order equal to (epoch, counter) order. Counter 0 of an epoch is never
a transaction: it names "the start of epoch e", which is what a new leader's history ends with
before it proposes anything.
"""

from __future__ import annotations

EPOCH_BITS = 32
COUNTER_MASK = (1 << EPOCH_BITS) - 1
MAX_EPOCH = (1 << 32) - 1


class Zxid(int):
    __slots__ = ()

    def __new__(cls, value: int = 0) -> Zxid:
        if value < 0 or value >= 1 << 64:
            raise ValueError(f"zxid out of range: {value}")
        return super().__new__(cls, value)

    @classmethod
    def of(cls, epoch: int, counter: int) -> Zxid:
        if not 0 <= epoch <= MAX_EPOCH or not 0 <= counter <= COUNTER_MASK:
            raise ValueError(f"zxid parts out of range: epoch={epoch} counter={counter}")
        return cls((epoch << EPOCH_BITS) | counter)

    @property
    def epoch(self) -> int:
        return int(self) >> EPOCH_BITS

    @property
    def counter(self) -> int:
        return int(self) & COUNTER_MASK

    def next(self) -> Zxid:
        return Zxid(int(self) + 1)

    def __repr__(self) -> str:
        return f"{self.epoch}:{self.counter}"

    __str__ = __repr__


ZERO = Zxid(0)


def epoch_of(z: int) -> int:
    return z >> EPOCH_BITS


def fmt(z: int) -> str:
    return f"{z >> EPOCH_BITS}:{z & COUNTER_MASK}"
