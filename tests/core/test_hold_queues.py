"""Message holds without Ray: the pattern (zabray.replay.holds) and one sender's per-channel queues
(actors.holds): FIFO per channel, release by count and hold, death with the channel."""

from __future__ import annotations

import pytest

from actors.holds import ChannelHolds
from zabray.errors import ConfigError
from zabray.protocol.actions import Send
from zabray.protocol.events import ChannelId
from zabray.protocol.messages import Ack, Commit, NewLeader, Notification, Ping, Proposal, Txn, UpToDate
from zabray.protocol.zxid import Zxid
from zabray.replay.holds import HOLDABLE, carried_zxid, parse_zxid, pattern

CH2 = ChannelId(2, 1, 0, 3)  # leader 1 <-> learner 2
CH3 = ChannelId(3, 1, 0, 5)


def prop(c: int) -> Proposal:
    return Proposal(Txn(Zxid.of(1, c), b"v"))


def test_patterns_validate_and_match() -> None:
    p = pattern(1, [2, 3], "PROPOSAL", ["1:2", "1:4"])
    assert p.matches(1, 2, "PROPOSAL", int(Zxid.of(1, 3)))
    assert not p.matches(1, 2, "PROPOSAL", int(Zxid.of(1, 5)))
    assert not p.matches(1, 2, "PROPOSAL", None)
    assert not p.matches(2, 1, "PROPOSAL", int(Zxid.of(1, 3)))
    assert not p.matches(1, 2, "COMMIT", int(Zxid.of(1, 3)))
    assert pattern().matches(5, 6, "PING", None)
    assert p.describe() == "1 -> 2,3 PROPOSAL zxids 1:2..1:4"
    assert "NOTIFICATION" not in HOLDABLE and "ACK_NEWLEADER" in HOLDABLE
    assert parse_zxid("2:7") == int(Zxid.of(2, 7)) and parse_zxid(9) == 9
    for kwargs, msg in [({"types": "NOTIFICATION"}, "unknown packet 'NOTIFICATION'"),
                        ({"types": ["ACKNEWLEADER"]}, "unknown packet 'ACKNEWLEADER'"),
                        ({"src": "1"}, "hold src"), ({"dst": []}, "hold dst"),
                        ({"zxids": ["1:5", "1:2"]}, "is above high"), ({"zxids": "x"}, "hold zxids"),
                        ({"zxids": [1, 2, 3]}, "one zxid or")]:
        with pytest.raises(ConfigError, match=msg):
            pattern(**kwargs)


def test_carried_zxids() -> None:
    assert carried_zxid(prop(4)) == int(Zxid.of(1, 4))
    assert carried_zxid(Commit(7)) == 7 and carried_zxid(NewLeader(1, 9)) == 9
    assert carried_zxid(Notification(1, 0, 1, 0, 0, 0)) == 0


def test_a_held_message_blocks_its_channel_only_and_keeps_fifo() -> None:
    h = ChannelHolds(1)
    assert not h.active
    h.add(1, pattern(1, 2, "COMMIT"))
    assert h.active
    assert h.gate(2, Send(CH2, prop(1))) == (False, None)  # nothing held yet: goes
    assert h.gate(2, Send(CH2, Commit(int(Zxid.of(1, 1))))) == (True, 1)
    assert h.gate(2, Send(CH2, prop(2))) == (True, None)  # queued behind: FIFO
    assert h.gate(3, Send(CH3, Commit(int(Zxid.of(1, 1))))) == (False, None)  # other channel, no match
    assert h.gate(2, Send(CH2, Commit(int(Zxid.of(1, 2))))) == (True, 1)  # caught too
    h.gate(2, Send(CH2, prop(3)))
    assert [(m.type, m.hold) for m in h.held()] == [("COMMIT", 1), ("PROPOSAL", None), ("COMMIT", 1),
                                                    ("PROPOSAL", None)]
    out = h.release(None, 1, 2)  # the first COMMIT and what queues behind it, up to the next COMMIT
    assert [a.msg.NAME for a in out] == ["COMMIT", "PROPOSAL"]
    assert [a.msg.NAME for a in h.release(None, 1, 2)] == ["COMMIT", "PROPOSAL"]
    assert h.held() == [] and h.active  # the pattern still catches
    h.stop(1)
    assert not h.active


def test_release_counts_caught_messages_and_stops_at_another_hold() -> None:
    h = ChannelHolds(1)
    h.add(1, pattern(types="PROPOSAL"))
    h.add(2, pattern(types="UPTODATE"))
    for c in (1, 2):
        h.gate(2, Send(CH2, prop(c)))
    h.gate(2, Send(CH2, Ack(0)))  # behind (an ACK never goes this way; just a non-matching packet)
    h.gate(2, Send(CH2, UpToDate(5)))
    h.gate(2, Send(CH2, prop(3)))
    # The first PROPOSAL only (count 1): the second was caught too, so it stays.
    assert [a.msg for a in h.release(1, 1, None)] == [prop(1)]
    # Hold 1's rest: the second PROPOSAL and the ACK behind it, then UPTODATE (hold 2) blocks.
    assert [a.msg.NAME for a in h.release(1, None, None)] == ["PROPOSAL", "ACK"]
    assert [m.type for m in h.held()] == ["UPTODATE", "PROPOSAL"]
    assert [a.msg.NAME for a in h.release(None, None, 3)] == []  # another peer: nothing
    assert [a.msg.NAME for a in h.release(None, None, None)] == ["UPTODATE", "PROPOSAL"]


def test_held_messages_die_with_their_channel() -> None:
    h = ChannelHolds(2)
    h.add(1, pattern(2, 1, "ACK_NEWLEADER"))
    old, new = ChannelId(2, 1, 0, 3), ChannelId(2, 1, 0, 4)
    assert h.gate(1, Send(old, NewLeader(1, 0)))[0] is False  # NEWLEADER is not ACK_NEWLEADER
    assert h.gate(1, Send(old, Ping(0))) == (False, None)
    assert len(h.drop(old)) == 0
    from zabray.protocol.messages import AckNewLeader

    assert h.gate(1, Send(old, AckNewLeader(1, 0))) == (True, 1)
    assert h.gate(1, Send(old, Ack(5))) == (True, None)
    assert len(h.drop(old)) == 2 and h.held() == []
    assert h.gate(1, Send(new, Ack(6))) == (False, None)  # a fresh channel starts empty
