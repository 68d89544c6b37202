"""The one executor: every kind of action reaches the Effects method for it, in order, whether it
takes the shortcut for the frequent kinds or the exhaustive match; StopStep ends a step."""

from __future__ import annotations

import typing
from typing import Any

import pytest

from zabray.protocol import actions as a
from zabray.protocol.events import ChannelId
from zabray.protocol.executor import StopStep, carry_out, execute
from zabray.protocol.messages import Ack, Notification, Txn
from zabray.protocol.statemachine import ValueLog
from zabray.protocol.zxid import Zxid

CH = ChannelId(1, 2, 0, 0)
TXN = Txn(Zxid(7), b"v")


def one_of_each() -> list[a.Action]:
    log = ValueLog()
    return [a.Send(CH, Ack(Zxid(7))), a.Trace("row"), a.AppendTxns(1, (TXN,)), a.TruncateLog(2, Zxid(3)),
            a.WriteAcceptedEpoch(3, 1, 1), a.WriteCurrentEpoch(4, 1), a.InstallSnapshot(5, Zxid(7), b""),
            a.PersistSnapshot(6, Zxid(7), b""), a.Deliver(TXN), a.Committed(1, Zxid(7)), a.Failed(2, "x", True),
            a.SessionsTouched((1,)), a.Notify(2, Notification(1, 0, 1, 0, 0, 0)), a.Open(CH), a.Close(CH),
            a.EncodeSnapshot(log.image(), Zxid(7)), a.DecodeSnapshot(None, Zxid(7)),  # type: ignore[arg-type]  (the executor never opens it)
            a.Yield()]


class Recorder:
    def __init__(self, stop_at: str | None = None) -> None:
        self.calls: list[tuple[str, str]] = []
        self.stop_at = stop_at

    def __getattr__(self, method: str) -> Any:
        def call(action: a.Action) -> None:
            self.calls.append((method, type(action).__name__))
            if method == self.stop_at:
                raise StopStep
        return call


WANT = {"Send": "send", "Trace": "trace", "Deliver": "deliver", "Committed": "reply", "Failed": "reply",
        "SessionsTouched": "reply", "Notify": "notify", "Open": "open", "Close": "close",
        "EncodeSnapshot": "encode_snapshot", "DecodeSnapshot": "decode_snapshot", "Yield": "resume"}


def test_every_action_kind_reaches_its_method_in_order_by_both_paths() -> None:
    acts = one_of_each()
    assert {type(x) for x in acts} == set(typing.get_args(a.Action))  # one of every kind in the union
    want = [(WANT.get(type(x).__name__, "persist"), type(x).__name__) for x in acts]
    fx = Recorder()
    execute(acts, fx)  # type: ignore[arg-type]
    assert fx.calls == want
    fx = Recorder()
    for x in acts:
        carry_out(x, fx)  # type: ignore[arg-type]
    assert fx.calls == want


def test_stop_step_ends_the_step_where_it_was_raised() -> None:
    fx = Recorder(stop_at="persist")
    with pytest.raises(StopStep):
        execute(one_of_each(), fx)  # type: ignore[arg-type]
    assert fx.calls == [("send", "Send"), ("trace", "Trace"), ("persist", "AppendTxns")]
