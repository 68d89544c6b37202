"""Watch tables of one replica's ZooKeeper service, pure: who is told what when a txn lands.

The rules are ZooKeeper 3.8's (DataTree and WatchManager):

- Two tables, data and child. getData/exists register a one-shot watch in the data table,
  getChildren one in the child table. ``addWatch`` registers in both tables (3.8's
  DataTree.addWatch, whatever the mode) and is never consumed; PERSISTENT_RECURSIVE also watches
  every descendant. So checkWatches/removeWatches of CHILDREN find a recursive watch too, and
  removing one table's entry leaves the other. One mode per (session, path, table): the latest registration wins (3.8's
  WatcherModeManager).
- A change fires one table at a time, each session at most once per firing: create ->
  data(path, CREATED) and child(parent, CHILD); set -> data(path, CHANGED); delete ->
  data(path, DELETED), then child(path, DELETED) for sessions the data firing did not already
  tell, then child(parent, CHILD). Recursive watches on a path or any ancestor see every event
  but CHILD.
- ``set_watches`` is ZooKeeper's SetWatches(2) for a session that moved: a watch whose change
  it missed (the znode changed after ``last_zxid``, or is gone / exists now) fires at once
  instead of being registered; persistent ones are registered again, never fired.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from zabray.tree import DataTree, EventType
from zabray.tree.codes import WatcherType


class WatchMode(enum.Enum):
    STANDARD = 0
    PERSISTENT = 1
    RECURSIVE = 2


WatchKind = WatcherType
"""What checkWatches/removeWatches name: ZooKeeper's WatcherType, from the codec."""


@dataclass(frozen=True, slots=True)
class Fired:
    """Tell ``session`` that ``event`` happened to ``path``; ``kind`` is the table ("data"/"child")."""

    session: int
    kind: str
    path: str
    event: str


_Table = dict[str, dict[int, WatchMode]]


def _parents(path: str) -> list[str]:
    """``path``'s ancestors, nearest first, ending with "/"."""
    out = []
    while path != "/":
        path = path.rsplit("/", 1)[0] or "/"
        out.append(path)
    return out


class WatchTables:
    """Every watch on one replica, by path and session."""

    __slots__ = ("data", "child", "recursive")

    def __init__(self) -> None:
        self.data: _Table = {}
        self.child: _Table = {}
        self.recursive = 0  # recursive registrations: the ancestor walk is skipped while 0

    # -- registering ---------------------------------------------------------------------------

    def _add(self, table: _Table, path: str, sid: int, mode: WatchMode) -> None:
        old = table.setdefault(path, {}).get(sid)
        if old is WatchMode.RECURSIVE:
            self.recursive -= 1
        if mode is WatchMode.RECURSIVE:
            self.recursive += 1
        table[path][sid] = mode

    def watch_data(self, path: str, sid: int) -> None:
        self._add(self.data, path, sid, WatchMode.STANDARD)

    def watch_children(self, path: str, sid: int) -> None:
        self._add(self.child, path, sid, WatchMode.STANDARD)

    def add_watch(self, path: str, sid: int, recursive: bool) -> None:
        """ZooKeeper's addWatch: a persistent watch, optionally on the whole subtree."""
        mode = WatchMode.RECURSIVE if recursive else WatchMode.PERSISTENT
        self._add(self.data, path, sid, mode)
        self._add(self.child, path, sid, mode)

    # -- looking up and removing ---------------------------------------------------------------

    def _matches(self, kind: WatchKind, table: str, mode: WatchMode) -> bool:
        match kind:
            case WatchKind.ANY:
                return True
            case WatchKind.DATA:
                return table == "data"
            case WatchKind.CHILDREN:
                return table == "child"
            case WatchKind.PERSISTENT:
                return mode is WatchMode.PERSISTENT
            case WatchKind.PERSISTENT_RECURSIVE:
                return mode is WatchMode.RECURSIVE
        return False

    def has(self, path: str, sid: int, kind: WatchKind) -> bool:
        """checkWatches: does ``sid`` hold a watch of ``kind`` on ``path``?"""
        for name, table in (("data", self.data), ("child", self.child)):
            mode = table.get(path, {}).get(sid)
            if mode is not None and self._matches(kind, name, mode):
                return True
        return False

    def remove(self, path: str, sid: int, kind: WatchKind) -> bool:
        """removeWatches: drop ``sid``'s watches of ``kind`` on ``path``; False if there was none."""
        removed = False
        for name, table in (("data", self.data), ("child", self.child)):
            by = table.get(path)
            mode = None if by is None else by.get(sid)
            if by is not None and mode is not None and self._matches(kind, name, mode):
                del by[sid]
                if mode is WatchMode.RECURSIVE:
                    self.recursive -= 1
                if not by:
                    del table[path]
                removed = True
        return removed

    def drop_session(self, sid: int) -> None:
        for table in (self.data, self.child):
            for path in [p for p, by in table.items() if sid in by]:
                by = table[path]
                if by.pop(sid) is WatchMode.RECURSIVE:
                    self.recursive -= 1
                if not by:
                    del table[path]

    def count(self) -> int:
        return sum(len(by) for by in self.data.values()) + sum(len(by) for by in self.child.values())

    def data_by_session(self) -> dict[int, list[str]]:
        """Each session's data-table watches (ZooKeeper's ``wchs``/``wchc``/``wchp`` show only
        these: its DataTree.dumpWatches walks the data watch manager alone)."""
        out: dict[int, list[str]] = {}
        for path, by in self.data.items():
            for sid in by:
                out.setdefault(sid, []).append(path)
        return {s: sorted(out[s]) for s in sorted(out)}

    def by_path(self) -> dict[str, list[int]]:
        """Every watched path and its sessions (the ``wchp``/``wchs`` view), sorted."""
        out: dict[str, set[int]] = {}
        for table in (self.data, self.child):
            for path, by in table.items():
                out.setdefault(path, set()).update(by)
        return {p: sorted(out[p]) for p in sorted(out)}

    # -- firing ---------------------------------------------------------------------------------

    def _trigger(self, table: _Table, kind: str, path: str, event: EventType,
                 skip: set[int] | None = None) -> list[Fired]:
        by = table.get(path)
        if not by and not self.recursive:
            return []  # the common case, a change nobody watches: no set, no sort
        told: set[int] = set()
        if by:
            for sid, mode in list(by.items()):
                if mode is WatchMode.RECURSIVE:
                    if event is EventType.CHILD:
                        continue
                elif mode is WatchMode.STANDARD:
                    del by[sid]
                told.add(sid)
            if not by:
                del table[path]
        if self.recursive and event is not EventType.CHILD:
            for parent in _parents(path):
                for sid, mode in table.get(parent, {}).items():
                    if mode is WatchMode.RECURSIVE:
                        told.add(sid)
        if skip:
            told -= skip
        return [Fired(sid, kind, path, event.value) for sid in sorted(told)]

    def fire(self, path: str, event: EventType) -> list[Fired]:
        """The notifications one change of the tree sends (see the module docstring)."""
        match event:
            case EventType.CREATED | EventType.CHANGED:
                return self._trigger(self.data, "data", path, event)
            case EventType.DELETED:
                told = self._trigger(self.data, "data", path, event)
                return told + self._trigger(self.child, "child", path, event, {f.session for f in told})
            case EventType.CHILD:
                return self._trigger(self.child, "child", path, event)
        return []

    def set_watches(self, tree: DataTree, sid: int, last_zxid: int, data: tuple[str, ...],
                    exist: tuple[str, ...], child: tuple[str, ...], persistent: tuple[str, ...] = (),
                    recursive: tuple[str, ...] = ()) -> list[Fired]:
        """Re-register a moved session's watches; returns the ones that fire at once."""
        out: list[Fired] = []
        for path in data:
            stat = tree.exists(path)
            if stat is None:
                out.append(Fired(sid, "data", path, EventType.DELETED.value))
            elif stat.mzxid > last_zxid:
                out.append(Fired(sid, "data", path, EventType.CHANGED.value))
            else:
                self.watch_data(path, sid)
        for path in exist:
            if tree.exists(path) is not None:
                out.append(Fired(sid, "data", path, EventType.CREATED.value))
            else:
                self.watch_data(path, sid)
        for path in child:
            stat = tree.exists(path)
            if stat is None:
                out.append(Fired(sid, "child", path, EventType.DELETED.value))
            elif stat.pzxid > last_zxid:
                out.append(Fired(sid, "child", path, EventType.CHILD.value))
            else:
                self.watch_children(path, sid)
        for path in persistent:
            self.add_watch(path, sid, recursive=False)
        for path in recursive:
            self.add_watch(path, sid, recursive=True)
        return out
