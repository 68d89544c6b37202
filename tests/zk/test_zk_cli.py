"""`zabray create|get|set|ls|rm|stat --name N` against a live ZooKeeper ensemble; exit codes 0/1/2."""

from __future__ import annotations

import json

import pytest

from zabray.cli import main

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
    assert run("set", "/cli", "bye", "--version", "0") == (0, "1")
    assert run("set", "/cli", "again", "--version", "0")[0] == 1  # bad version
    assert run("ls", "/cli") == (0, "s-0000000000")
    code, out = run("stat", "/cli")
    assert code == 0 and json.loads(out)["version"] == 1
    assert run("rm", "/cli")[0] == 1  # not empty
    assert run("rm", "/cli/s-0000000000")[0] == 0
    assert run("rm", "/cli")[0] == 0
    assert run("get", "/cli")[0] == 1  # no node
    assert run("stat", "/cli")[0] == 1
    assert run("create", "bad-path")[0] == 1
    assert main(["get", "--name", "no-such-ensemble-here", "/x"]) == 1
