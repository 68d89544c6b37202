"""Hand-made history rows (``zabray.client.histories`` columns) with a tiny builder."""

from __future__ import annotations

from typing import Any


class H:
    """``h.op("s1", "write", 0, 1, value="a", rv=1)``: one row per call, issue counter per client."""

    def __init__(self, key: str = "/k") -> None:
        self.key = key
        self.rows: list[dict[str, Any]] = []

    def op(self, session: str, kind: str, t0: float, t1: float | None, *, outcome: str = "ok",
           value: str | None = None, version: int | None = None, result: str | None = None,
           rv: int | None = None, zxid: int | None = None, error: str | None = None,
           key: str | None = None, client: str = "c") -> str:
        n = len(self.rows)
        self.rows.append({"v": 1, "client": client, "session": session, "op": n, "key": key or self.key,
                          "kind": kind, "value": value, "version": version, "invoke_t": float(t0),
                          "complete_t": None if t1 is None else float(t1), "outcome": outcome,
                          "result": result, "result_version": rv, "zxid": zxid, "error": error,
                          "replica": None})
        return f"{client}#{n}"
