"""ZooKeeper's own command-line client, scripted: zkCli.sh from Debian's zookeeper package."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

ZKCLI = "/usr/share/zookeeper/bin/zkCli.sh"
# The Java client's classpath: Debian's zookeeper.jar and the two Netty jars its manifest leaves
# out (the Netty client socket, which TLS needs, cannot load without them).
CLASSPATH = "/usr/share/java/zookeeper.jar:/usr/share/java/netty-resolver.jar:/usr/share/java/netty-codec.jar"
NETTY = "-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty"


def zkcli(hosts: str, *commands: str, timeout: float = 120, jvm_flags: Sequence[str] = ()) -> str:
    """Run ``commands`` in one zkCli session (stdin, then quit); return what it printed.
    With ``jvm_flags`` (``NETTY``, TLS settings) the same client runs with them."""
    script = "\n".join([*commands, "quit"]) + "\n"
    cmd = ["java", "-cp", CLASSPATH, *jvm_flags, "org.apache.zookeeper.ZooKeeperMain"] if jvm_flags else [ZKCLI]
    res = subprocess.run([*cmd, "-server", hosts], input=script, capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise RuntimeError(f"zkCli.sh exited {res.returncode}: {res.stderr[-2000:]}")
    return res.stdout + res.stderr
