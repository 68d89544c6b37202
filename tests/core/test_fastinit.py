"""The faster ``__init__`` of frozen dataclasses (zabray.fastinit) makes exactly what the
generated one makes: for every class it changed, the same slots hold the same objects, with
every argument given, with defaults left out, and by keyword; a class it cannot be sure of
keeps the generated ``__init__``."""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import InitVar, dataclass, field
from typing import Any, ClassVar

import pytest

from zabray.fastinit import fast_init

MODULES = ["zabray.protocol.messages", "zabray.protocol.events", "zabray.protocol.actions", "zabray.tree.records",
           "zabray.tree.znode", "zabray.tree.datatree", "zabray.zk.messages", "zabray.wire.zkproto", "zabray.trace.records",
           "zabray.wire.clientproto"]


def changed() -> list[type]:
    out = []
    for name in MODULES:
        mod = importlib.import_module(name)
        out += [v for v in vars(mod).values()
                if isinstance(v, type) and v.__module__ == name and "__dataclass_init__" in v.__dict__]
    return out


CLASSES = changed()


def made(cls: type, how: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    obj = cls.__new__(cls)
    how(obj, *args, **kwargs)
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(cls)}


def test_the_hot_modules_classes_are_all_changed() -> None:
    assert len(CLASSES) >= 150
    names = {c.__name__ for c in CLASSES}
    assert {"Txn", "Proposal", "Ack", "Commit", "Received", "Send", "Stat", "SetDataRequest"} <= names


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: f"{c.__module__.rsplit('.', 1)[1]}.{c.__name__}")
def test_the_same_object_as_the_generated_init(cls: type) -> None:
    fields = dataclasses.fields(cls)
    args = [object() for _ in fields]
    fast, slow = cls.__init__, cls.__dict__["__dataclass_init__"]
    ids = lambda d: {k: id(v) for k, v in d.items()}  # noqa: E731 - the very objects, not equal ones
    assert ids(made(cls, fast, *args)) == ids(made(cls, slow, *args))
    kw = {f.name: a for f, a in zip(fields, args, strict=True)}
    assert ids(made(cls, fast, **kw)) == ids(made(cls, slow, **kw))
    required = [a for f, a in zip(fields, args, strict=True) if f.default is dataclasses.MISSING]
    assert ids(made(cls, fast, *required)) == ids(made(cls, slow, *required))
    if fields:
        with pytest.raises(TypeError):
            cls(*args, object())  # one argument too many
        inst = cls(*args)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(inst, fields[0].name, None)


def test_classes_it_cannot_be_sure_of_keep_the_generated_init() -> None:
    @dataclass(frozen=True, slots=True)
    class Factory:
        a: list[int] = field(default_factory=list)

    @dataclass(frozen=True, slots=True)
    class Kw:
        a: int = field(kw_only=True)

    @dataclass(frozen=True, slots=True)
    class Init:
        a: int
        b: InitVar[int]

        def __post_init__(self, b: int) -> None:
            pass

    @dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclass(slots=True)
    class NotFrozen:
        a: int

    for cls in (Factory, Kw, Init, NoSlots, NotFrozen):
        before = cls.__init__
        assert not fast_init(cls), cls.__name__
        assert cls.__init__ is before


def test_post_init_runs_and_class_vars_are_not_arguments() -> None:
    seen: list[int] = []

    @dataclass(frozen=True, slots=True)
    class Checked:
        TAG: ClassVar[int] = 7
        a: int
        b: str = "x"

        def __post_init__(self) -> None:
            seen.append(self.a)
            if self.a < 0:
                raise ValueError("negative")

    assert fast_init(Checked)
    assert Checked(1) == Checked(1, "x") and Checked(2, b="y").b == "y" and seen == [1, 1, 2]
    with pytest.raises(ValueError):
        Checked(-1)
    assert dataclasses.replace(Checked(3), b="z") == Checked(3, "z")
