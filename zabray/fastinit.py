"""A faster ``__init__`` for the frozen, slotted dataclasses built on every message.

A frozen dataclass's generated ``__init__`` sets each field with
``object.__setattr__(self, name, value)``, looking the function up and the slot up by name for
every field of every instance: about 2.5x the cost of a plain slotted class's ``__init__``, and
on a loaded replica the single largest item of its CPU profile (12-15% of samples, spread over
messages, events, actions, txn records and stats). ``fast_inits`` gives the frozen, slotted
dataclasses of a module an ``__init__`` that calls each slot's own descriptor instead.

Invariant: an instance is the same as the generated ``__init__`` would make it. Same parameters
(names, order, defaults: the very default objects), same slots set to the same objects, then
``__post_init__`` if the class has one; frozen-ness, equality, hashing, ``replace``, pickling and
``match`` are untouched. A class this cannot be sure of (``default_factory``, ``kw_only``,
``init=False`` or ``InitVar`` fields, a field without a slot of its own) keeps the generated one.
The generated ``__init__`` stays available as ``__dataclass_init__`` (the equivalence test uses it).
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from typing import Any

_INITVAR = getattr(dataclasses, "_FIELD_INITVAR", object())  # how dataclasses marks an InitVar
_member = type(type("_Probe", (), {"__slots__": ("x",)}).x)  # type: ignore[attr-defined]


def _slot_setter(cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        d = klass.__dict__.get(name)
        if d is not None:
            return d.__set__ if type(d) is _member else None
    return None


def fast_init(cls: type) -> bool:
    """Give one frozen, slotted dataclass the faster ``__init__``; False if it keeps its own."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or not params.init or "__slots__" not in cls.__dict__:
        return False
    if "__dataclass_init__" in cls.__dict__:
        return True
    every = cls.__dataclass_fields__.values()  # type: ignore[attr-defined]
    if any(f._field_type is _INITVAR for f in every):  # an InitVar is an argument, not a slot
        return False
    fields = dataclasses.fields(cls)  # ClassVars are not among them, nor are they arguments
    ns: dict[str, Any] = {}
    args: list[str] = []
    body: list[str] = []
    for i, f in enumerate(fields):
        if not f.init or f.kw_only or f.default_factory is not dataclasses.MISSING:
            return False
        setter = _slot_setter(cls, f.name)
        if setter is None:
            return False
        ns[f"_s{i}"] = setter
        if f.default is dataclasses.MISSING:
            args.append(f.name)
        else:
            ns[f"_d{i}"] = f.default
            args.append(f"{f.name}=_d{i}")
        body.append(f"    _s{i}(self, {f.name})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    src = f"def __init__(self, {', '.join(args)}):\n" + ("\n".join(body) or "    pass") + "\n"
    exec(src, ns)  # noqa: S102 - source built above from field names only
    init: types.FunctionType = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    cls.__dataclass_init__ = cls.__dict__["__init__"]  # type: ignore[attr-defined]
    cls.__init__ = init  # type: ignore[misc]
    return True


def fast_inits(namespace: Mapping[str, Any]) -> list[type]:
    """``fast_init`` every frozen, slotted dataclass defined in the module whose globals these
    are (call it at the end of the module, with ``globals()``); the classes it changed."""
    module = namespace.get("__name__")
    return [cls for cls in list(namespace.values())
            if isinstance(cls, type) and cls.__module__ == module and fast_init(cls)]
