"""Requests checked at the service's door: every field of the type its dataclass declares.

A request decoded from the wire can carry what no well-behaved client sends: a null string
where a path belongs (jute encodes null strings), a number where a list belongs (msgpack frames).
ZooKeeper answers those with BADARGUMENTS, and so does the service, before any of the tree's
code runs. Past this check a request is well-typed, so an exception inside the tree is a bug in
zabray, never a client's mistake: the service does not turn it into a client error.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any

from zabray.tree.errors import BadArgumentsError

Check = Callable[[Any], bool]


def _checker(tp: Any) -> Check:
    """A predicate for values of the annotated type ``tp`` (the kinds requests use)."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return lambda v: True
    if tp is type(None):
        return lambda v: v is None
    if origin in (typing.Union, types.UnionType):
        alts = [_checker(a) for a in typing.get_args(tp)]
        return lambda v: any(c(v) for c in alts)
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            each = _checker(args[0])
            return lambda v: isinstance(v, tuple) and all(each(x) for x in v)
        parts = [_checker(a) for a in args]
        return lambda v: isinstance(v, tuple) and len(v) == len(parts) and all(c(x) for c, x in zip(parts, v, strict=True))
    if tp is bool:
        return lambda v: isinstance(v, bool)
    if tp is int:
        return lambda v: isinstance(v, int) and not isinstance(v, bool)
    if tp is bytes:
        return lambda v: isinstance(v, (bytes, bytearray, memoryview))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return lambda v: isinstance(v, tp) and well_typed(v)
    if isinstance(tp, type):
        return lambda v: isinstance(v, tp)
    raise TypeError(f"no check for request field type {tp!r}")


_FIELDS: dict[type, tuple[tuple[str, Check], ...]] = {}


def _fields(cls: type) -> tuple[tuple[str, Check], ...]:
    got = _FIELDS.get(cls)
    if got is None:
        hints = typing.get_type_hints(cls)
        got = _FIELDS[cls] = tuple((f.name, _checker(hints[f.name])) for f in dataclasses.fields(cls))
    return got


def well_typed(op: Any) -> bool:
    """Whether every field of the dataclass ``op`` holds a value of its declared type."""
    return all(check(getattr(op, name)) for name, check in _fields(type(op)))


def check_request(op: Any) -> None:
    """``BadArgumentsError`` naming the first field of ``op`` that has the wrong type."""
    for name, check in _fields(type(op)):
        if not check(getattr(op, name)):
            raise BadArgumentsError(f"bad {type(op).__name__} request: {name} is {type(getattr(op, name)).__name__}")
