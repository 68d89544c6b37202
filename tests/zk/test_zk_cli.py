"""`zabray create|get|set|ls|rm|stat --name N` against a live ZooKeeper ensemble; exit codes 0/1/2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from zabray.cli.main import main
from zabray.tree import Create

pytestmark = pytest.mark.ray


def test_cli_verbs(zk, capsys) -> None:
    n = ["--name", zk.name]

    def run(*argv: str) -> tuple[int, str]:
        capsys.readouterr()
        code = main([argv[0], *n, *argv[1:]])
        return code, capsys.readouterr().out.strip()

    assert run("create", "/cli", "hello") == (0, "/cli")
    assert run("create", "/cli/s-", "--sequential") == (0, "/cli/s-0000000000")
    assert run("get", "/cli") == (0, "hello")
    with zk.session(timeout=5) as own:  # null data (a Java client's null) prints as zkCli prints it
        own.multi(Create("/cli-null", None))
    assert run("get", "/cli-null") == (0, "null")
    assert run("set", "/cli", "bye", "--version", "0") == (0, "1")
    assert run("set", "/cli", "again", "--version", "0")[0] == 1  # bad version
    assert run("ls", "/cli") == (0, "s-0000000000")
    code, out = run("stat", "/cli")
    st = json.loads(out)
    assert code == 0 and st["version"] == 1
    assert all(":" in st[f] for f in ("czxid", "mzxid", "pzxid"))  # epoch:counter, as everywhere else
    assert st["mzxid"] != st["czxid"]
    assert run("rm", "/cli")[0] == 1  # not empty
    assert run("rm", "/cli/s-0000000000")[0] == 0
    assert run("rm", "/cli")[0] == 0
    assert run("get", "/cli")[0] == 1  # no node
    assert run("stat", "/cli")[0] == 1
    assert run("create", "bad-path")[0] == 1
    assert main(["get", "--name", "no-such-ensemble-here", "/x"]) == 1


def test_cli_recursive_listing_and_version_check(zk, capsys) -> None:
    n = ["--name", zk.name]

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main([argv[0], *n, *argv[1:]])
        out = capsys.readouterr()
        return code, out.out.strip(), out.err.strip()

    for p in ("/tree", "/tree/b", "/tree/a", "/tree/a/x", "/tree/a/y"):
        assert run("create", p)[0] == 0
    assert run("ls", "/tree", "-R")[1].splitlines() == ["/tree/a", "/tree/a/x", "/tree/a/y", "/tree/b"]
    assert run("set", "/tree/b", "v1", "--version", "0")[:2] == (0, "1")
    code, _, err = run("set", "/tree/b", "lost update", "--version", "0")  # someone else got there first
    assert code == 1 and "version" in err.lower()
    assert run("rm", "/tree/b", "--version", "0")[0] == 1
    assert run("rm", "/tree/b", "--version", "1")[0] == 0


def test_cli_watch_prints_each_change(zk, capsys) -> None:
    s = zk.session()
    s.create("/watched", b"0")
    result: list[int] = []
    t = threading.Thread(target=lambda: result.append(
        main(["watch", "--name", zk.name, "/watched", "--count", "2", "--timeout", "120"])))
    t.start()
    i = 0
    while t.is_alive():  # keep changing it until the watcher has seen two changes
        i += 1
        s.set("/watched", str(i).encode())
        t.join(0.05)
    s.close()
    assert result == [0]
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("changed")]
    assert len(lines) == 2 and all(ln.split()[1] == "/watched" and ":" in ln.split()[2] for ln in lines)


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 0), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_cli_ephemeral_lives_as_long_as_the_command(zk, sig: int, code: int) -> None:
    # Ctrl-C ends the hold; so does a SIGTERM (kill, timeout), which Ray's own handler turned
    # into a stack dump and an exit that left the session to expire.
    import ray

    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    addr = ray.get_runtime_context().gcs_address
    proc = subprocess.Popen([sys.executable, "-m", "zabray.cli.main", "create", "--name", zk.name, "--address", addr,
                             "/eph", "mine", "--ephemeral"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    s = zk.session()
    try:
        # The command says when it holds; a Ctrl-C before that (create still in flight) is an
        # interrupted command, exit 130, so wait for the line rather than for the znode.
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:  # ends at EOF if the command dies
            seen.append(line)
            if line.startswith("holding session"):
                break
        assert proc.poll() is None, (seen, proc.communicate())
        st = s.exists("/eph")
        assert st is not None and st.ephemeral_owner != 0
        proc.send_signal(sig)  # the command ends, and closes its session as it goes
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == code, err
        assert out.strip() == "/eph" and "SIGTERM received" not in err, err
        s.sync("/")
        assert s.exists("/eph") is None  # closed, not left to expire
    finally:
        if proc.poll() is None:
            proc.kill()
        s.close()
