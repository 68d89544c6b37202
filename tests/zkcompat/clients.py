"""ZooKeeper's own command-line client, scripted: zkCli.sh from Debian's zookeeper package."""

from __future__ import annotations

import subprocess

ZKCLI = "/usr/share/zookeeper/bin/zkCli.sh"


def zkcli(hosts: str, *commands: str, timeout: float = 120) -> str:
    """Run ``commands`` in one zkCli session (stdin, then quit); return what it printed."""
    script = "\n".join([*commands, "quit"]) + "\n"
    res = subprocess.run([ZKCLI, "-server", hosts], input=script, capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise RuntimeError(f"zkCli.sh exited {res.returncode}: {res.stderr[-2000:]}")
    return res.stdout + res.stderr
