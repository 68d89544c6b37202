"""The type and range checks that decoding applies to every field of a request or a txn.

``REQ`` raises ``BadArgumentsError`` (a bad request is the client's fault: it becomes an error
txn); ``TXN`` raises ``CorruptionError`` (a log or a leader produced bytes no tree could have).
"""

from __future__ import annotations

from typing import Any, NoReturn

import msgpack

from zabray.errors import CorruptionError, ZabError
from zabray.tree.errors import BadArgumentsError
from zabray.tree.records import OpCode
from zabray.tree.znode import ACL, OPEN_ACL, AuthId

I64 = 1 << 63
U64 = 1 << 64
I32 = 1 << 31


OPCODE_OF: dict[int, OpCode] = {int(c): c for c in OpCode}  # ``OpCode(v)`` without the enum call
SET_DATA = int(OpCode.SET_DATA)
_OPEN_ROW = list(OPEN_ACL[0])


class Fields:
    """Type/range checks that raise ``err`` (BadArgumentsError or CorruptionError)."""

    __slots__ = ("err", "what")

    def __init__(self, err: type[ZabError], what: str) -> None:
        self.err = err
        self.what = what

    def fail(self, msg: str) -> NoReturn:
        raise self.err(f"bad {self.what}: {msg}")

    def int_(self, v: Any, name: str, lo: int, hi: int) -> int:
        if type(v) is not int or not lo <= v < hi:
            self.fail(f"{name} must be an integer in [{lo}, {hi}), got {v!r:.40}")
        return v

    def data(self, v: Any) -> bytes | None:
        """A znode's data: bytes, or None for ZooKeeper's null (a client sent length -1)."""
        if v is not None and type(v) is not bytes:
            self.fail(f"data must be bytes or None, got {type(v).__name__}")
        return v

    def str_(self, v: Any, name: str) -> str:
        if type(v) is not str:
            self.fail(f"{name} must be a string, got {type(v).__name__}")
        return v

    def bool_(self, v: Any, name: str) -> bool:
        if type(v) is not bool:
            self.fail(f"{name} must be a bool, got {type(v).__name__}")
        return v

    def list_(self, v: Any, name: str, n: int | None = None) -> list[Any]:
        if type(v) is not list or (n is not None and len(v) != n):
            self.fail(f"{name} must be a list" + (f" of {n} items" if n is not None else ""))
        return v

    def acl(self, v: Any) -> tuple[ACL, ...]:
        if type(v) is list and len(v) == 1:  # nearly every znode's ACL: world:anyone, all perms
            e = v[0]
            if type(e) is list and e == _OPEN_ROW and type(e[0]) is int:  # (31.0 == 31: the type check)
                return OPEN_ACL
        out = []
        for e in self.list_(v, "acl"):
            e = self.list_(e, "acl entry", 3)
            out.append((self.int_(e[0], "perms", -I32, I32), self.str_(e[1], "scheme"), self.str_(e[2], "id")))
        return tuple(out)

    def auth(self, v: Any) -> tuple[AuthId, ...]:
        out = []
        for e in self.list_(v, "auth ids"):
            e = self.list_(e, "auth id", 2)
            out.append((self.str_(e[0], "scheme"), self.str_(e[1], "id")))
        return tuple(out)

    def code(self, v: Any) -> OpCode:
        code = OPCODE_OF.get(v) if type(v) is int else None
        if code is None:
            self.fail(f"unknown op code {v!r:.40}")
        return code

    def version(self, v: Any) -> int:
        """An expected version: any int32, as on ZooKeeper's wire. -1 matches any version; any
        other that differs from the znode's (-2 included) is BAD_VERSION, as in ZooKeeper."""
        return self.int_(v, "version", -I32, I32)

    def session(self, v: Any) -> int:
        return self.int_(v, "session id", 0, U64)

    def time(self, v: Any) -> int:
        return self.int_(v, "time_ms", 0, I64)

    def timeout(self, v: Any) -> int:
        return self.int_(v, "timeout_ms", 1, I32)


REQ = Fields(BadArgumentsError, "request")
TXN = Fields(CorruptionError, "txn")


def unpack(data: bytes, f: Fields) -> Any:
    if type(data) is not bytes:
        f.fail(f"expected bytes, got {type(data).__name__}")
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True)
    except Exception as e:  # msgpack raises several unrelated types on garbage
        f.fail(f"not msgpack ({type(e).__name__}: {e})")
