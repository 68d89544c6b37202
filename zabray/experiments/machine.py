"""What machine a figure was measured on: every benchmark prints ``machine_line()`` above its
figures, and every experiment row carries ``describe_machine()``, because a figure without its
machine (cores, CPU, load at the start) cannot be compared with another. Cheap to import: no
pandas, no Ray."""

from __future__ import annotations

import os
import platform
import socket
from typing import Any


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (Linux), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return " ".join(line.partition(":")[2].split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "?"


def describe_machine() -> dict[str, Any]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return {"host": socket.gethostname(), "platform": platform.platform(), "python": platform.python_version(),
            "cpus": os.cpu_count() or 0, "load1": load[0], "load5": load[1]}


def machine_line(*extra: str) -> str:
    """``machine: HOST, N cores (CPU), python X.Y.Z, PLATFORM, load L`` plus ``extra`` items: the
    first line of every benchmark's output. A load above the core count means the figures
    below were contended."""
    m = describe_machine()
    items = [f"{m['host']}", f"{m['cpus']} cores ({cpu_model()})", f"python {m['python']}", m["platform"],
             f"load {m['load1']:.1f}", *extra]
    return "machine: " + ", ".join(items)
