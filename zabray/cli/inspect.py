"""``zabray inspect SID``: a read-only look at one replica's disk (``storage.diskview``).

With ``--data-dir`` it reads the directory itself and needs no Ray (a stopped ensemble, a copied
directory); otherwise it asks the named ensemble where the replica keeps its disk
(``Ensemble.inspect``). Exit codes: 0 shown, 1 the disk is damaged or unreadable (a
``CorruptionError`` names the file and offset), 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import TYPE_CHECKING

from zabray.cli import common
from zabray.errors import ConfigError
from zabray.protocol.zxid import Zxid, fmt

if TYPE_CHECKING:
    from storage.diskview import DiskView

DEFAULT_TAIL = 20


def register(sub: argparse._SubParsersAction) -> None:

    help_ = "show what a replica holds on disk: epochs, snapshots, the log's last txns (read-only)"
    p = sub.add_parser("inspect", help=help_, description=help_)
    p.add_argument("sid", type=int, help="the replica")
    common.add_name(p)
    p.add_argument("--address", default=None, help="Ray cluster address (default: RAY_ADDRESS or a local one)")
    p.add_argument("--data-dir", default=None,
                   help="read this directory instead of asking the ensemble: the replica's own, or the "
                        "config's data_dir (NAME/replica-SID under it); needs no Ray")
    p.add_argument("--json", action="store_true", help="everything as JSON (the whole log unless --tail)")
    p.add_argument("--tail", type=int, default=None, help=f"log entries to show (default {DEFAULT_TAIL})")
    p.set_defaults(func=lambda a: common.guard(inspect, a))


def replica_dir(data_dir: str, name: str | None, sid: int) -> str:
    """``data_dir`` itself, or the replica's directory under it when it is an ensemble's root
    (``NAME/replica-SID``; without ``--name``, the only ensemble directory there)."""
    if name is None:
        names = [d for d in os.listdir(data_dir) if os.path.isdir(os.path.join(data_dir, d, f"replica-{sid}"))] \
            if os.path.isdir(data_dir) else []
        if len(names) > 1:
            raise ConfigError(f"{data_dir} holds replica {sid} of several ensembles ({', '.join(sorted(names))}): "
                              "pick one with --name")
        name = names[0] if names else "default"
    for cand in (os.path.join(data_dir, name, f"replica-{sid}"), os.path.join(data_dir, f"replica-{sid}")):
        if os.path.isdir(cand):
            return cand
    return data_dir


def inspect(args: argparse.Namespace) -> int:
    from storage.diskview import read_disk

    if args.tail is not None and args.tail < 0:
        raise ConfigError("--tail must be at least 0")
    delivered = None  # what the running replica has delivered: those txns are committed
    if args.data_dir is not None:
        view = read_disk(replica_dir(args.data_dir, args.name, args.sid))
    else:
        ens = common.connect(args)
        view = ens.inspect(args.sid)
        live = [s for s in ens.status() if s.sid == args.sid and s.alive and s.state not in ("DOWN", "PAUSED")]
        delivered = live[0].applied if live else None
    if args.json:
        d = view.to_dict()
        if args.tail is not None:
            d["log"] = d["log"][len(d["log"]) - args.tail:] if args.tail else []
        print(json.dumps(d, indent=2))
        return 0
    print("\n".join(render(view, args.sid, DEFAULT_TAIL if args.tail is None else args.tail, delivered)))
    return 0


def render(view: DiskView, sid: int, tail: int, delivered: Zxid | None = None) -> list[str]:
    """The human-readable report: header, epochs, snapshots, segments, the log's last ``tail`` txns.
    ``delivered``: the running replica's last delivered zxid (None for a replica that is down,
    or a directory read without Ray): a txn it delivered is committed, whatever the disk says."""
    inc = f", incarnation {view.incarnation}" if view.incarnation is not None else ""
    out = [f"replica {sid}: {view.path}{inc}",
           f"epochs: accepted {view.accepted_epoch} (leader {view.accepted_leader}), current {view.current_epoch}"
           + (" (rejoining: wiped, not yet synced by a leader; it counts in no quorum)" if view.rejoining else ""),
           f"snapshots (generation {view.generation}):" if view.snapshots else
           "snapshots: none (recovery starts from the empty initial state)"]
    if view.snapshots:
        out.append(f"  {'zxid':>12} {'bytes':>12}    file")
    for s in view.snapshots:
        note = " stale (older generation)" if s.stale else ""
        note += f"  DAMAGED: {s.problem}" if s.problem else ""
        out.append(f"  {fmt(s.zxid):>12} {s.size:>12,}    {s.name}{note}")
    log = view.log
    after = view.not_known_committed()
    out.append(f"log: {len(view.segments)} segment(s), {len(log):,} txns"
               + (f" {fmt(log[0].zxid)} .. {fmt(log[-1].zxid)}" if log else "")
               + f"; last zxid {fmt(view.last_zxid)}")
    out.append(f"committed through {fmt(view.committed_through)}: the snapshot recovery starts from "
               "(a snapshot holds only committed txns)")
    if after:
        done = [e for e in after if delivered is not None and e.zxid <= delivered]
        out.append(f"{len(after):,} logged txn(s) after it: durable here; a log records proposals, not "
                   "commits, so the disk alone cannot say which committed"
                   + (f"; the running replica has delivered {len(done):,} of them, so those did"
                      if delivered is not None else ""))
    for seg in view.segments:
        if seg.problem:
            out.append(f"  DAMAGED segment {seg.name} (no longer needed by recovery): {seg.problem}")
    if view.torn_at:
        out.append(f"torn last record in {view.torn_at[0]} at offset {view.torn_at[1]}: cut off at the next start")
    if view.leftovers:
        out.append("ignored by recovery: " + ", ".join(view.leftovers))
    if view.spares:
        out.append("kept to become later log segments: " + ", ".join(view.spares))
    shown = log[len(log) - tail:] if tail else ()
    if shown:
        out.append(f"last {len(shown)} txn(s):")
        out.append(f"  {'zxid':>12} {'bytes':>9}  {'digest':<16}  {'segment':<21} {'offset':>10}  status")
        for e in shown:
            status = ("committed (snapshot)" if e.committed else
                      "committed (delivered)" if delivered is not None and e.zxid <= delivered else
                      "logged (commit not on disk)")
            out.append(f"  {fmt(e.zxid):>12} {e.size:>9,}  {e.digest:<16}  {e.segment:<21} {e.offset:>10}  {status}")
    return out
