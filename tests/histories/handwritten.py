"""Hand-written histories with verdicts reasoned on paper, for ``zabray check --histories``.

Each case is the literal text of a history file (schema version 2 JSON lines, written by hand:
no generator of the project made them) and what the checker must say: the linearizability
verdict of each key (``lin``), and the set of other properties violated (``props``). The
comment above each case is the reasoning. Times are seconds, zxids small integers; a field
left out is null, as the schema says. Unless a case says otherwise, the search includes only
reads right after a sync (``--reads after-sync``, the default) while every read is checked
against the zxid order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Case:
    name: str
    text: str
    lin: dict[str, str]
    props: frozenset[str] = frozenset()
    reads: str = "after-sync"
    culprits: dict[str, set[str]] = field(default_factory=dict)  # key -> labels that must be among its culprits


CASES: list[Case] = []


def case(name: str, text: str, lin: dict[str, str], props: set[str] | None = None, reads: str = "after-sync",
         culprits: dict[str, set[str]] | None = None) -> None:
    CASES.append(Case(name, text, lin, frozenset(props or ()), reads, culprits or {}))


# -- linearizability: what the search must find -------------------------------------------------

# Two writes overlap; a read inside both returns b, so b was placed first and a is the final
# value; a later read after a sync returns a. Orders: create, b, read b, a, read a. Linearizable.
case("overlapping-writes", """\
{"v":2,"client":"c","session":"s0","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0,"zxid":1}
{"v":2,"client":"c","session":"s1","op":1,"key":"/k","kind":"write","value":"a","invoke_t":2,"complete_t":6,"outcome":"ok","result_version":2,"zxid":3}
{"v":2,"client":"c","session":"s2","op":2,"key":"/k","kind":"write","value":"b","invoke_t":3,"complete_t":5,"outcome":"ok","result_version":1,"zxid":2}
{"v":2,"client":"c","session":"s3","op":3,"key":"/k","kind":"read","invoke_t":4,"complete_t":4.5,"outcome":"ok","result":"b","result_version":1,"zxid":2}
{"v":2,"client":"c","session":"s3","op":4,"key":"/k","kind":"sync","invoke_t":7,"complete_t":8,"outcome":"ok","zxid":4}
{"v":2,"client":"c","session":"s3","op":5,"key":"/k","kind":"read","invoke_t":8,"complete_t":9,"outcome":"ok","result":"a","result_version":2,"zxid":3}
""", {"/k": "ok"}, reads="all")

# A stale read after a sync: a completed (t=3) before the sync began (t=4), yet the read returns
# x. No order puts the read after the sync's start and before a. Violation: c#1 and c#3 at least.
case("stale-read-after-sync", """\
{"v":2,"client":"c","session":"s0","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0}
{"v":2,"client":"c","session":"s1","op":1,"key":"/k","kind":"write","value":"a","invoke_t":2,"complete_t":3,"outcome":"ok","result_version":1}
{"v":2,"client":"c","session":"s2","op":2,"key":"/k","kind":"sync","invoke_t":4,"complete_t":5,"outcome":"ok"}
{"v":2,"client":"c","session":"s2","op":3,"key":"/k","kind":"read","invoke_t":5,"complete_t":6,"outcome":"ok","result":"x","result_version":0}
""", {"/k": "violation"}, culprits={"/k": {"c#1", "c#3"}})

# The same stale read without the sync: ZooKeeper lets a plain read lag (no zxids are recorded,
# so nothing contradicts it): PASS by default; with --reads all it must be linearizable, and is not.
case("plain-stale-read-allowed", """\
{"v":2,"client":"c","session":"s0","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0}
{"v":2,"client":"c","session":"s1","op":1,"key":"/k","kind":"write","value":"a","invoke_t":2,"complete_t":3,"outcome":"ok","result_version":1}
{"v":2,"client":"c","session":"s2","op":2,"key":"/k","kind":"read","invoke_t":5,"complete_t":6,"outcome":"ok","result":"x","result_version":0}
""", {"/k": "ok"})
case("plain-stale-read-reads-all", """\
{"v":2,"client":"c","session":"s0","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0}
{"v":2,"client":"c","session":"s1","op":1,"key":"/k","kind":"write","value":"a","invoke_t":2,"complete_t":3,"outcome":"ok","result_version":1}
{"v":2,"client":"c","session":"s2","op":2,"key":"/k","kind":"read","invoke_t":5,"complete_t":6,"outcome":"ok","result":"x","result_version":0}
""", {"/k": "violation"}, reads="all", culprits={"/k": {"c#1", "c#2"}})

# Inverted reads: a is read (3..4), then x again (5..6), but x was only ever written by the
# create, before a. The value x is certainly current from 1 (create done) to 5 (second read
# begins); the read of a lies inside. Violation.
case("inverted-reads", """\
{"v":2,"client":"c","session":"s0","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok"}
{"v":2,"client":"c","session":"s1","op":1,"key":"/k","kind":"write","value":"a","invoke_t":2,"complete_t":10,"outcome":"ok"}
{"v":2,"client":"c","session":"s2","op":2,"key":"/k","kind":"read","invoke_t":3,"complete_t":4,"outcome":"ok","result":"a"}
{"v":2,"client":"c","session":"s3","op":3,"key":"/k","kind":"read","invoke_t":5,"complete_t":6,"outcome":"ok","result":"x"}
""", {"/k": "violation"}, reads="all", culprits={"/k": {"c#2", "c#3"}})

# Two compare-and-sets from version 0 both succeed: only one can see version 0. Violation.
case("double-cas", """\
{"v":2,"client":"c","session":"s0","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0}
{"v":2,"client":"c","session":"s1","op":1,"key":"/k","kind":"cas","version":0,"value":"a","invoke_t":2,"complete_t":5,"outcome":"ok","result_version":1}
{"v":2,"client":"c","session":"s2","op":2,"key":"/k","kind":"cas","version":0,"value":"b","invoke_t":3,"complete_t":6,"outcome":"ok","result_version":1}
""", {"/k": "violation"}, culprits={"/k": {"c#1", "c#2"}})

# The false alarm of issue 46: a cas with version -1 is setData "any version"; a read of its
# value afterwards is fine. Linearizable.
case("cas-any-version", """\
{"v":2,"client":"c","session":"s0","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0}
{"v":2,"client":"c","session":"s1","op":1,"key":"/k","kind":"cas","version":-1,"value":"a","invoke_t":2,"complete_t":3,"outcome":"ok","result_version":1}
{"v":2,"client":"c","session":"s2","op":2,"key":"/k","kind":"read","invoke_t":4,"complete_t":5,"outcome":"ok","result":"a","result_version":1}
""", {"/k": "ok"}, reads="all")

# An undone delete: the delete completed (3) before the read began (4), which still finds x.
case("undone-delete", """\
{"v":2,"client":"c","session":"s0","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok"}
{"v":2,"client":"c","session":"s1","op":1,"key":"/k","kind":"delete","version":-1,"invoke_t":2,"complete_t":3,"outcome":"ok"}
{"v":2,"client":"c","session":"s2","op":2,"key":"/k","kind":"read","invoke_t":4,"complete_t":5,"outcome":"ok","result":"x"}
""", {"/k": "violation"}, reads="all", culprits={"/k": {"c#1", "c#2"}})

# FIFO: one session pipelines a then b (issue order), both in flight together; a read after a
# sync, once both completed, returns a. Across sessions that would be fine (b then a); within
# one session b must follow a. Violation. The same with two sessions: linearizable.
case("fifo-pipelined", """\
{"v":2,"client":"c","session":"s0","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok"}
{"v":2,"client":"c","session":"s1","op":1,"key":"/k","kind":"write","value":"a","invoke_t":2,"complete_t":10,"outcome":"ok"}
{"v":2,"client":"c","session":"s1","op":2,"key":"/k","kind":"write","value":"b","invoke_t":2.1,"complete_t":10,"outcome":"ok"}
{"v":2,"client":"c","session":"s2","op":3,"key":"/k","kind":"read","invoke_t":11,"complete_t":12,"outcome":"ok","result":"a"}
""", {"/k": "violation"}, reads="all")
case("fifo-two-sessions", """\
{"v":2,"client":"c","session":"s0","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok"}
{"v":2,"client":"c","session":"s1","op":1,"key":"/k","kind":"write","value":"a","invoke_t":2,"complete_t":10,"outcome":"ok"}
{"v":2,"client":"c","session":"s9","op":2,"key":"/k","kind":"write","value":"b","invoke_t":2.1,"complete_t":10,"outcome":"ok"}
{"v":2,"client":"c","session":"s2","op":3,"key":"/k","kind":"read","invoke_t":11,"complete_t":12,"outcome":"ok","result":"a"}
""", {"/k": "ok"}, reads="all")

# An unknown write may take effect late: a is read after b completed, so a landed after b.
# Linearizable. Or never: the read returns x. Linearizable too.
case("unknown-write-seen", """\
{"v":2,"client":"c","session":"s0","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok"}
{"v":2,"client":"c","session":"s1","op":1,"key":"/k","kind":"write","value":"a","invoke_t":2,"complete_t":2.5,"outcome":"unknown","error":"CONNECTION_LOSS"}
{"v":2,"client":"c","session":"s2","op":2,"key":"/k","kind":"write","value":"b","invoke_t":3,"complete_t":4,"outcome":"ok"}
{"v":2,"client":"c","session":"s3","op":3,"key":"/k","kind":"read","invoke_t":6,"complete_t":7,"outcome":"ok","result":"a"}
""", {"/k": "ok"}, reads="all")
case("unknown-write-never-seen", """\
{"v":2,"client":"c","session":"s0","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0}
{"v":2,"client":"c","session":"s1","op":1,"key":"/k","kind":"write","value":"a","invoke_t":2,"outcome":"unknown","error":"NEVER_COMPLETED"}
{"v":2,"client":"c","session":"s3","op":2,"key":"/k","kind":"read","invoke_t":6,"complete_t":7,"outcome":"ok","result":"x","result_version":0}
""", {"/k": "ok"}, reads="all")

# A failed write (a definite BAD_VERSION) changed nothing: reading x after it is fine, reading
# its value is not (only a failed operation wrote it).
case("failed-write-not-seen", """\
{"v":2,"client":"c","session":"s0","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0}
{"v":2,"client":"c","session":"s1","op":1,"key":"/k","kind":"cas","version":5,"value":"a","invoke_t":2,"complete_t":3,"outcome":"fail","error":"BAD_VERSION"}
{"v":2,"client":"c","session":"s2","op":2,"key":"/k","kind":"read","invoke_t":4,"complete_t":5,"outcome":"ok","result":"x","result_version":0}
""", {"/k": "ok"}, reads="all")
case("failed-write-seen", """\
{"v":2,"client":"c","session":"s0","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0,"zxid":1}
{"v":2,"client":"c","session":"s1","op":1,"key":"/k","kind":"cas","version":5,"value":"a","invoke_t":2,"complete_t":3,"outcome":"fail","error":"BAD_VERSION"}
{"v":2,"client":"c","session":"s2","op":2,"key":"/k","kind":"read","invoke_t":4,"complete_t":5,"outcome":"ok","result":"a","result_version":1,"zxid":2}
""", {"/k": "ok"}, {"read-state"})

# A chain with a single legal order: three concurrent cas from versions 0, 1, 2; a read after
# all of them returns c at version 3. Linearizable (a, b, c).
case("cas-chain", """\
{"v":2,"client":"c","session":"s0","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0}
{"v":2,"client":"c","session":"s1","op":1,"key":"/k","kind":"cas","version":2,"value":"c","invoke_t":2,"complete_t":10,"outcome":"ok","result_version":3}
{"v":2,"client":"c","session":"s2","op":2,"key":"/k","kind":"cas","version":1,"value":"b","invoke_t":2.5,"complete_t":10,"outcome":"ok","result_version":2}
{"v":2,"client":"c","session":"s3","op":3,"key":"/k","kind":"cas","version":0,"value":"a","invoke_t":3,"complete_t":10,"outcome":"ok","result_version":1}
{"v":2,"client":"c","session":"s4","op":4,"key":"/k","kind":"read","invoke_t":11,"complete_t":12,"outcome":"ok","result":"c","result_version":3}
""", {"/k": "ok"}, reads="all")

# A read that returns the right value with the wrong version: a is version 1, not 2. Violation,
# and a state the key never had (the only write of a left it at version 1).
case("wrong-version", """\
{"v":2,"client":"c","session":"s0","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0}
{"v":2,"client":"c","session":"s1","op":1,"key":"/k","kind":"write","value":"a","invoke_t":2,"complete_t":3,"outcome":"ok","result_version":1}
{"v":2,"client":"c","session":"s2","op":2,"key":"/k","kind":"read","invoke_t":4,"complete_t":5,"outcome":"ok","result":"a","result_version":2}
""", {"/k": "violation"}, {"read-state"}, reads="all")

# The cache must key on the state, not only on what is placed: w1 (a) and w2 (b) overlap; the
# next segment reads a, so b must have gone first. Both orders place the same set; only one
# leaves a. A later write of a again keeps a from being ruled out for good (no shortcut).
# Linearizable. The mirror image (reading b) likewise, whichever order a search tries first.
MEMO = """\
{{"v":2,"client":"c","session":"s0","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok"}}
{{"v":2,"client":"c","session":"s1","op":1,"key":"/k","kind":"write","value":"a","invoke_t":2,"complete_t":6,"outcome":"ok"}}
{{"v":2,"client":"c","session":"s2","op":2,"key":"/k","kind":"write","value":"b","invoke_t":2,"complete_t":6,"outcome":"ok"}}
{{"v":2,"client":"c","session":"s3","op":3,"key":"/k","kind":"read","invoke_t":7,"complete_t":8,"outcome":"ok","result":"{v}"}}
{{"v":2,"client":"c","session":"s4","op":4,"key":"/k","kind":"write","value":"{v}","invoke_t":9,"complete_t":10,"outcome":"ok"}}
{{"v":2,"client":"c","session":"s3","op":5,"key":"/k","kind":"read","invoke_t":11,"complete_t":12,"outcome":"ok","result":"{v}"}}
"""
case("memo-keys-on-state-a", MEMO.format(v="a"), {"/k": "ok"}, reads="all")
case("memo-keys-on-state-b", MEMO.format(v="b"), {"/k": "ok"}, reads="all")

# Two blind writes nobody reads and no version recorded, so nothing tells them apart but their
# deadlines: x must land by t=2, y by t=10. The cas from version 1 (t=3..4) needs exactly one of
# them before it: x (it cannot wait), then y after the cas. Linearizable: create, x, cas, y. A
# search that tries such writes latest deadline first (y, then x) would miss it.
case("interchangeable-writes-deadline", """\
{"v":2,"client":"c","session":"s0","op":0,"key":"/k","kind":"create","value":"c","invoke_t":-2,"complete_t":-1,"outcome":"ok","result_version":0}
{"v":2,"client":"c","session":"s1","op":1,"key":"/k","kind":"write","value":"x","invoke_t":0,"complete_t":2,"outcome":"ok"}
{"v":2,"client":"c","session":"s2","op":2,"key":"/k","kind":"write","value":"y","invoke_t":0,"complete_t":10,"outcome":"ok"}
{"v":2,"client":"c","session":"s3","op":3,"key":"/k","kind":"cas","version":1,"value":"z","invoke_t":3,"complete_t":4,"outcome":"ok","result_version":2}
""", {"/k": "ok"})

# Nine concurrent writes and nine concurrent reads of their values, plus a read of a value no
# one wrote (the case that once ran out of budget and passed). Violation, at once.
NINE = "".join(
    f'{{"v":2,"client":"c","session":"w{i}","op":{i},"key":"/k","kind":"write","value":"v{i}",'
    f'"invoke_t":{2 + i / 10},"complete_t":{10 + i / 10},"outcome":"ok"}}\n' for i in range(9)) + "".join(
    f'{{"v":2,"client":"c","session":"r{i}","op":{9 + i},"key":"/k","kind":"read","result":"v{8 - i}",'
    f'"invoke_t":{2.05 + i / 10},"complete_t":{10.05 + i / 10},"outcome":"ok"}}\n' for i in range(9))
case("nine-and-nine-and-nobody", """\
{"v":2,"client":"c","session":"s0","op":100,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok"}
""" + NINE + """\
{"v":2,"client":"c","session":"rx","op":101,"key":"/k","kind":"read","result":"nobody","invoke_t":3,"complete_t":9,"outcome":"ok"}
""", {"/k": "violation"}, {"read-state"}, reads="all", culprits={"/k": {"c#101"}})
case("nine-and-nine", """\
{"v":2,"client":"c","session":"s0","op":100,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok"}
""" + NINE, {"/k": "ok"}, reads="all")


# -- every read judged against the zxid order (plain reads included) ----------------------------

# A plain read of a value nobody wrote. Not searched (no sync), but it is no state the key ever
# had: read-state. (It once passed unless --reads all was given.)
case("plain-read-of-nothing", """\
{"v":2,"client":"c","session":"s0","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0,"zxid":1}
{"v":2,"client":"c","session":"s1","op":1,"key":"/k","kind":"read","invoke_t":2,"complete_t":3,"outcome":"ok","result":"ghost","result_version":0,"zxid":1}
""", {"/k": "ok"}, {"read-state"})

# A read from the future: it completed (t=3) before the only write of its value began (t=4).
case("read-from-the-future", """\
{"v":2,"client":"c","session":"s0","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0}
{"v":2,"client":"c","session":"s1","op":1,"key":"/k","kind":"read","invoke_t":2,"complete_t":3,"outcome":"ok","result":"a"}
{"v":2,"client":"c","session":"s2","op":2,"key":"/k","kind":"write","value":"a","invoke_t":4,"complete_t":5,"outcome":"ok","result_version":1}
""", {"/k": "ok"}, {"read-state"})

# A read whose zxid names a change that left another value: the write at 0x2 left a, not b.
case("read-at-wrong-zxid", """\
{"v":2,"client":"c","session":"s0","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0,"zxid":1}
{"v":2,"client":"c","session":"s1","op":1,"key":"/k","kind":"write","value":"a","invoke_t":2,"complete_t":3,"outcome":"ok","result_version":1,"zxid":2}
{"v":2,"client":"c","session":"s2","op":2,"key":"/k","kind":"write","value":"b","invoke_t":4,"complete_t":5,"outcome":"ok","result_version":2,"zxid":3}
{"v":2,"client":"c","session":"s3","op":3,"key":"/k","kind":"read","invoke_t":6,"complete_t":7,"outcome":"ok","result":"b","result_version":2,"zxid":2}
""", {"/k": "ok"}, {"read-state"})

# Back in time across a delete: session r saw x (0x1), then no znode (the delete at 0x3: it has
# now seen 0x3), then x at 0x1 again: x was gone from 0x3 on. stale-read.
case("back-in-time-across-delete", """\
{"v":2,"client":"c","session":"w","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0,"zxid":1}
{"v":2,"client":"c","session":"r","op":1,"key":"/k","kind":"read","invoke_t":2,"complete_t":3,"outcome":"ok","result":"x","result_version":0,"zxid":1}
{"v":2,"client":"c","session":"w","op":2,"key":"/k","kind":"delete","version":-1,"invoke_t":4,"complete_t":5,"outcome":"ok","zxid":3}
{"v":2,"client":"c","session":"r","op":3,"key":"/k","kind":"read","invoke_t":6,"complete_t":7,"outcome":"ok"}
{"v":2,"client":"c","session":"r","op":4,"key":"/k","kind":"read","invoke_t":8,"complete_t":9,"outcome":"ok","result":"x","result_version":0,"zxid":1}
""", {"/k": "ok"}, {"stale-read"})

# The other way: r saw y, created again at 0x5 after the delete at 0x3; then r finds no znode.
# The key had no znode only in [0, 0x1) and [0x3, 0x5): both before what r had seen. stale-read.
# (A read that failed with NO_NODE is the same observation as an ok read of no znode.)
case("back-in-time-to-before-a-create", """\
{"v":2,"client":"c","session":"w","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0,"zxid":1}
{"v":2,"client":"c","session":"w","op":1,"key":"/k","kind":"delete","version":-1,"invoke_t":2,"complete_t":3,"outcome":"ok","zxid":3}
{"v":2,"client":"c","session":"w","op":2,"key":"/k","kind":"create","value":"y","invoke_t":4,"complete_t":5,"outcome":"ok","result_version":0,"zxid":5}
{"v":2,"client":"c","session":"r","op":3,"key":"/k","kind":"read","invoke_t":6,"complete_t":7,"outcome":"ok","result":"y","result_version":0,"zxid":5}
{"v":2,"client":"c","session":"r","op":4,"key":"/k","kind":"read","invoke_t":8,"complete_t":9,"outcome":"fail","error":"NO_NODE"}
""", {"/k": "ok"}, {"stale-read"})

# Allowed: r saw x at 0x1 and then no znode (deleted at 0x3, still gone): forward in time. And
# a plain read lagging behind a write it never saw is allowed too (r never saw 0x7).
case("forward-across-delete", """\
{"v":2,"client":"c","session":"w","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0,"zxid":1}
{"v":2,"client":"c","session":"r","op":1,"key":"/k","kind":"read","invoke_t":2,"complete_t":3,"outcome":"ok","result":"x","result_version":0,"zxid":1}
{"v":2,"client":"c","session":"w","op":2,"key":"/k","kind":"delete","version":0,"invoke_t":4,"complete_t":5,"outcome":"ok","zxid":3}
{"v":2,"client":"c","session":"r","op":3,"key":"/k","kind":"read","invoke_t":6,"complete_t":7,"outcome":"ok"}
{"v":2,"client":"c","session":"w","op":4,"key":"/j","kind":"create","value":"q","invoke_t":8,"complete_t":9,"outcome":"ok","result_version":0,"zxid":7}
{"v":2,"client":"c","session":"r","op":5,"key":"/j","kind":"read","invoke_t":10,"complete_t":11,"outcome":"ok"}
""", {"/k": "ok", "/j": "ok"})

# FIFO: session s saw zxid 0x5 (its own write of /a), then its delete of /k committed at 0x3.
case("fifo-delete-before-what-was-seen", """\
{"v":2,"client":"c","session":"w","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0,"zxid":1}
{"v":2,"client":"c","session":"s","op":1,"key":"/a","kind":"create","value":"a","invoke_t":2,"complete_t":3,"outcome":"ok","result_version":0,"zxid":5}
{"v":2,"client":"c","session":"s","op":2,"key":"/k","kind":"delete","version":-1,"invoke_t":4,"complete_t":5,"outcome":"ok","zxid":3}
""", {"/k": "ok", "/a": "ok"}, {"fifo"})

# In zxid order the cas from version 1 came right after the create (version 0): impossible
# there, whatever the clocks say (here they agree: it is not linearizable either).
case("zxid-order-cas", """\
{"v":2,"client":"c","session":"w","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0,"zxid":1}
{"v":2,"client":"c","session":"s","op":1,"key":"/k","kind":"cas","version":1,"value":"a","invoke_t":2,"complete_t":3,"outcome":"ok","result_version":2,"zxid":2}
""", {"/k": "violation"}, {"zxid-order"})

# -- multi: atomic and isolated ------------------------------------------------------------------

# A committed multi writes /a and /b at 0x5. Session r sees /a at 0x5, then /b from before it:
# half of a transaction. stale-read (the multi's /b change at 0x5 is at or below what r saw).
case("multi-fractured-read", """\
{"v":2,"client":"c","session":"w","op":0,"key":"/a","kind":"create","value":"a0","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0,"zxid":1}
{"v":2,"client":"c","session":"w","op":1,"key":"/b","kind":"create","value":"b0","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0,"zxid":2}
{"v":2,"client":"c","session":"m","op":2,"key":"/a","kind":"write","value":"a1","version":-1,"invoke_t":2,"complete_t":3,"outcome":"ok","result_version":1,"zxid":5,"multi":2}
{"v":2,"client":"c","session":"m","op":3,"key":"/b","kind":"write","value":"b1","version":-1,"invoke_t":2,"complete_t":3,"outcome":"ok","result_version":1,"zxid":5,"multi":2}
{"v":2,"client":"c","session":"r","op":4,"key":"/a","kind":"read","invoke_t":4,"complete_t":5,"outcome":"ok","result":"a1","result_version":1,"zxid":5}
{"v":2,"client":"c","session":"r","op":5,"key":"/b","kind":"read","invoke_t":6,"complete_t":7,"outcome":"ok","result":"b0","result_version":0,"zxid":2}
""", {"/a": "ok", "/b": "ok"}, {"stale-read"})

# The same multi with an unknown outcome: the read of a1 at 0x5 reveals it committed there, so
# its /b write is a change at 0x5 too, and the read of b0 after it goes back in time.
case("unknown-multi-revealed-then-fractured", """\
{"v":2,"client":"c","session":"w","op":0,"key":"/a","kind":"create","value":"a0","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0,"zxid":1}
{"v":2,"client":"c","session":"w","op":1,"key":"/b","kind":"create","value":"b0","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0,"zxid":2}
{"v":2,"client":"c","session":"m","op":2,"key":"/a","kind":"write","value":"a1","version":-1,"invoke_t":2,"complete_t":3,"outcome":"unknown","error":"CONNECTION_LOSS","multi":2}
{"v":2,"client":"c","session":"m","op":3,"key":"/b","kind":"write","value":"b1","version":-1,"invoke_t":2,"complete_t":3,"outcome":"unknown","error":"CONNECTION_LOSS","multi":2}
{"v":2,"client":"c","session":"r","op":4,"key":"/a","kind":"read","invoke_t":4,"complete_t":5,"outcome":"ok","result":"a1","result_version":1,"zxid":5}
{"v":2,"client":"c","session":"r","op":5,"key":"/b","kind":"read","invoke_t":6,"complete_t":7,"outcome":"ok","result":"b0","result_version":0,"zxid":2}
""", {"/a": "ok", "/b": "ok"}, {"stale-read"})

# An unknown multi seen committing at two zxids: /a's write at 0x5, /b's at 0x6. Not atomic.
case("unknown-multi-two-zxids", """\
{"v":2,"client":"c","session":"w","op":0,"key":"/a","kind":"create","value":"a0","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0,"zxid":1}
{"v":2,"client":"c","session":"w","op":1,"key":"/b","kind":"create","value":"b0","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0,"zxid":2}
{"v":2,"client":"c","session":"m","op":2,"key":"/a","kind":"write","value":"a1","version":-1,"invoke_t":2,"complete_t":3,"outcome":"unknown","multi":2}
{"v":2,"client":"c","session":"m","op":3,"key":"/b","kind":"write","value":"b1","version":-1,"invoke_t":2,"complete_t":3,"outcome":"unknown","multi":2}
{"v":2,"client":"c","session":"r","op":4,"key":"/a","kind":"read","invoke_t":4,"complete_t":5,"outcome":"ok","result":"a1","result_version":1,"zxid":5}
{"v":2,"client":"c","session":"q","op":5,"key":"/b","kind":"read","invoke_t":4,"complete_t":5,"outcome":"ok","result":"b1","result_version":1,"zxid":6}
""", {"/a": "ok", "/b": "ok"}, {"multi-atomic"})

# A failed multi (its check failed: BAD_VERSION) changed nothing, yet its /b value is read.
case("failed-multi-visible", """\
{"v":2,"client":"c","session":"w","op":0,"key":"/a","kind":"create","value":"a0","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0,"zxid":1}
{"v":2,"client":"c","session":"w","op":1,"key":"/b","kind":"create","value":"b0","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0,"zxid":2}
{"v":2,"client":"c","session":"m","op":2,"key":"/a","kind":"check","version":7,"invoke_t":2,"complete_t":3,"outcome":"fail","error":"BAD_VERSION","multi":2}
{"v":2,"client":"c","session":"m","op":3,"key":"/b","kind":"write","value":"b1","version":-1,"invoke_t":2,"complete_t":3,"outcome":"fail","error":"BAD_VERSION","multi":2}
{"v":2,"client":"c","session":"r","op":4,"key":"/b","kind":"read","invoke_t":4,"complete_t":5,"outcome":"ok","result":"b1","result_version":1}
""", {"/a": "ok", "/b": "ok"}, {"multi-atomic"})

# A multi that sets /a twice (a1 then a2) commits a2; reading a1, at the multi's zxid, is
# reading a state that never was (an intermediate read).
case("multi-intermediate-read", """\
{"v":2,"client":"c","session":"w","op":0,"key":"/a","kind":"create","value":"a0","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0,"zxid":1}
{"v":2,"client":"c","session":"m","op":1,"key":"/a","kind":"write","value":"a1","version":-1,"invoke_t":2,"complete_t":3,"outcome":"ok","result_version":1,"zxid":5,"multi":1}
{"v":2,"client":"c","session":"m","op":2,"key":"/a","kind":"write","value":"a2","version":-1,"invoke_t":2,"complete_t":3,"outcome":"ok","result_version":2,"zxid":5,"multi":1}
{"v":2,"client":"c","session":"r","op":3,"key":"/a","kind":"read","invoke_t":4,"complete_t":5,"outcome":"ok","result":"a1","result_version":1,"zxid":5}
""", {"/a": "ok"}, {"multi-isolated"})

# A multi whose check of /a at version 0 committed at 0x4, but /a was at version 1 from 0x3 on:
# in zxid order the check cannot hold (isolation). The clocks alone allow it (the check could
# precede the write, they overlap): only the zxid order catches it.
case("multi-check-isolation", """\
{"v":2,"client":"c","session":"w","op":0,"key":"/a","kind":"create","value":"a0","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0,"zxid":1}
{"v":2,"client":"c","session":"v","op":1,"key":"/b","kind":"create","value":"b0","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0,"zxid":2}
{"v":2,"client":"c","session":"w","op":2,"key":"/a","kind":"write","value":"a1","version":-1,"invoke_t":2,"complete_t":3,"outcome":"ok","result_version":1,"zxid":3}
{"v":2,"client":"c","session":"m","op":3,"key":"/a","kind":"check","version":0,"invoke_t":2.5,"complete_t":4,"outcome":"ok","zxid":4,"multi":3}
{"v":2,"client":"c","session":"m","op":4,"key":"/b","kind":"write","value":"b1","version":-1,"invoke_t":2.5,"complete_t":4,"outcome":"ok","result_version":1,"zxid":4,"multi":3}
""", {"/a": "ok", "/b": "ok"}, {"multi-isolated"})

# Two cas from version 0 of /a, one of them inside a committed multi: only one can succeed.
case("multi-double-cas", """\
{"v":2,"client":"c","session":"w","op":0,"key":"/a","kind":"create","value":"a0","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0}
{"v":2,"client":"c","session":"m","op":1,"key":"/a","kind":"cas","version":0,"value":"a1","invoke_t":2,"complete_t":4,"outcome":"ok","result_version":1,"multi":1}
{"v":2,"client":"c","session":"m","op":2,"key":"/b","kind":"create","value":"b0","invoke_t":2,"complete_t":4,"outcome":"ok","result_version":0,"multi":1}
{"v":2,"client":"c","session":"n","op":3,"key":"/a","kind":"cas","version":0,"value":"a2","invoke_t":3,"complete_t":5,"outcome":"ok","result_version":1}
""", {"/a": "violation", "/b": "ok"})

# A clean multi history: committed at 0x3, read whole by one session, then by another after a
# sync. Everything holds.
case("multi-clean", """\
{"v":2,"client":"c","session":"w","op":0,"key":"/a","kind":"create","value":"a0","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0,"zxid":1}
{"v":2,"client":"c","session":"w","op":1,"key":"/b","kind":"create","value":"b0","invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0,"zxid":2}
{"v":2,"client":"c","session":"m","op":2,"key":"/a","kind":"check","version":0,"invoke_t":2,"complete_t":3,"outcome":"ok","zxid":3,"multi":2}
{"v":2,"client":"c","session":"m","op":3,"key":"/b","kind":"write","value":"b1","version":-1,"invoke_t":2,"complete_t":3,"outcome":"ok","result_version":1,"zxid":3,"multi":2}
{"v":2,"client":"c","session":"r","op":4,"key":"/b","kind":"read","invoke_t":4,"complete_t":5,"outcome":"ok","result":"b1","result_version":1,"zxid":3}
{"v":2,"client":"c","session":"r","op":5,"key":"/a","kind":"read","invoke_t":6,"complete_t":7,"outcome":"ok","result":"a0","result_version":0,"zxid":1}
{"v":2,"client":"c","session":"q","op":6,"key":"/","kind":"sync","invoke_t":8,"complete_t":9,"outcome":"ok","zxid":3}
{"v":2,"client":"c","session":"q","op":7,"key":"/b","kind":"read","invoke_t":9,"complete_t":10,"outcome":"ok","result":"b1","result_version":1,"zxid":3}
""", {"/a": "ok", "/b": "ok"})

# A version 1 file (no multi, no zxid on creates) still reads, and is judged as before.
case("schema-v1", """\
{"v":1,"client":"c","session":"s0","op":0,"key":"/k","kind":"create","value":"x","version":null,"invoke_t":0,"complete_t":1,"outcome":"ok","result":null,"result_version":0,"zxid":null,"error":null,"replica":1}
{"v":1,"client":"c","session":"s1","op":1,"key":"/k","kind":"write","value":"a","version":null,"invoke_t":2,"complete_t":3,"outcome":"ok","result":null,"result_version":1,"zxid":2,"error":null,"replica":1}
{"v":1,"client":"c","session":"s2","op":2,"key":"/k","kind":"sync","value":null,"version":null,"invoke_t":4,"complete_t":5,"outcome":"ok","result":null,"result_version":null,"zxid":3,"error":null,"replica":2}
{"v":1,"client":"c","session":"s2","op":3,"key":"/k","kind":"read","value":null,"version":null,"invoke_t":5,"complete_t":6,"outcome":"ok","result":"x","result_version":0,"zxid":1,"error":null,"replica":2}
""", {"/k": "violation"}, {"stale-read"})


def write_run(root: Path, text: str, name: str = "c.jsonl") -> Path:
    """A run directory holding one history file with ``text``."""
    (root / "histories").mkdir(parents=True, exist_ok=True)
    (root / "histories" / name).write_text(text)
    return root


def outcome(rep: Any) -> tuple[dict[str, str], set[str]]:
    """(key -> linearizability verdict, the other properties violated) of a HistoryReport."""
    lin = {v["key"]: "violation" for v in rep.violations} | {v["key"]: "unknown" for v in rep.unknown}
    return lin, {v["property"] for v in rep.session}
