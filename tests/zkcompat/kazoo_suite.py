"""kazoo 2.11's own test suite, unchanged, against zabray and against Apache ZooKeeper 3.8.

The suite ships inside the installed package (``kazoo/tests``). Its harness
(``kazoo.testing.harness``) starts its own 3-server ZooKeeper cluster from
``ZOOKEEPER_CLASSPATH`` (here Debian's ``/usr/share/java/zookeeper.jar``), with every
four-letter word allowed, reconfiguration and read-only mode on and a superuser digest. For
zabray the same harness gets a 3-replica zabray ensemble instead (``tests.zkcompat.kazoo_zabray``
swaps the one function through which every kazoo test reaches its servers). Each run records
every test's outcome by id (passed, failed, skipped); the comparison lists the tests whose
outcomes differ, not the counts.

    python tests/zkcompat/kazoo_suite.py [--target both|apache|zabray] [--out DIR] [-k EXPR] [TEST ...]
    python tests/zkcompat/kazoo_suite.py --compare DIR/apache.json DIR/zabray.json

A TEST is a kazoo test id as this script prints them (``test_client.py::TestClient::test_create``)
or a prefix of one (``test_lock.py``). Exit 0 when zabray passes every test Apache ZooKeeper
passes, apart from ``NEEDS_RECONFIG``; 1 otherwise; 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
ZK_JAR = "/usr/share/java/zookeeper.jar"
# The server's classpath: Debian's jar (its manifest names the rest) and the two Netty jars its
# manifest leaves out (kazoo's harness runs ZooKeeper with the Netty connection factory).
CLASSPATH = f"/etc/zookeeper/conf:{ZK_JAR}:/usr/share/java/netty-resolver.jar:/usr/share/java/netty-codec.jar"
REPORT_ENV = "KAZOO_SUITE_REPORT"
TARGETS = ("apache", "zabray")

NEEDS_RECONFIG = frozenset({
    "test_client.py::TestReconfig::test_add_remove_observer",
    "test_client.py::TestReconfig::test_bad_input",
    "test_client.py::TestReconfig::test_no_super_auth",
})
"""Tests that pass on Apache ZooKeeper only because it reconfigures its membership live
(issue 45's dynamic reconfiguration, not served by zabray yet)."""


@dataclass(frozen=True)
class Outcome:
    outcome: str  # passed | failed | skipped
    detail: str = ""  # for a failure: the phase and the error's last line; for a skip: why


def test_id(nodeid: str) -> str:
    """``test_client.py::TestClient::test_create`` from pytest's node id, wherever kazoo is installed."""
    return nodeid.rsplit("kazoo/tests/", 1)[-1]


def zookeeper_version() -> str:
    """The version of Debian's ZooKeeper jar (kazoo's harness needs ``ZOOKEEPER_VERSION``)."""
    with zipfile.ZipFile(ZK_JAR) as z:
        props = z.read("META-INF/maven/org.apache.zookeeper/zookeeper/pom.properties").decode()
    for line in props.splitlines():
        if line.startswith("version="):
            return line.split("=", 1)[1].strip()
    raise RuntimeError(f"no version in {ZK_JAR}")


def free_port_block(size: int = 40) -> int:
    """A base port with ``size`` free ports above it (kazoo's harness and zabray use base + n)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + size >= 65000:
            continue
        ok = True
        for p in range(base, base + size):
            with socket.socket() as t:
                try:
                    t.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no block of free ports found")


def run_suite(target: str, tests: Sequence[str] = (), keyword: str | None = None, out: Path | None = None,
              timeout: float = 4 * 3600, per_test_timeout: int = 300, zabray_tree: Path | None = None
              ) -> dict[str, Outcome]:
    """Run kazoo's tests (all, or those whose id starts with one of ``tests``) against ``target``
    in a pytest of their own; returns each test's outcome by id. ``zabray_tree``: another
    checkout of zabray to run (e.g. an older commit, for a before-and-after list); its modules
    come first on the path, this checkout's harness plugins after them."""
    if target not in TARGETS:
        raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
    import kazoo.tests

    kdir = Path(kazoo.tests.__file__).parent
    work = Path(tempfile.mkdtemp(prefix=f"kazoo-suite-{target}-"))
    (work / "pytest.ini").write_text("[pytest]\n")
    report = work / "report.json"
    env = dict(os.environ)
    env.update(ZOOKEEPER_CLASSPATH=CLASSPATH, ZOOKEEPER_VERSION=zookeeper_version(),
               ZOOKEEPER_PORT_OFFSET=str(free_port_block()),
               PYTHONPATH=os.pathsep.join([*([str(zabray_tree)] if zabray_tree else []), str(REPO),
                                           env.get("PYTHONPATH", "")]))
    env[REPORT_ENV] = str(report)
    for k in ("CI", "ZOOKEEPER_PATH", "ZOOKEEPER_JAAS_AUTH", "ZOOKEEPER_LOCAL_SESSION_RO", "KRB5_TEST_ENV"):
        env.pop(k, None)  # (CI would make kazoo's tests trust ZOOKEEPER_VERSION over the server's envi)
    args = _selection(kdir, tests)
    cmd = [sys.executable, "-m", "pytest", *args, "-c", str(work / "pytest.ini"), "--rootdir", str(kdir),
           "-p", "no:cacheprovider", "-p", "tests.zkcompat.kazoo_suite", "-q", "-rN",
           f"--timeout={per_test_timeout}"]
    if target == "zabray":
        cmd += ["-p", "tests.zkcompat.kazoo_zabray"]
    if keyword:
        cmd += ["-k", keyword]
    log_path = out.with_suffix(".log") if out is not None else work / "pytest.log"
    with open(log_path, "w") as logf:
        rc = subprocess.run(cmd, cwd=work, env=env, stdout=logf, stderr=subprocess.STDOUT, timeout=timeout,
                            check=False).returncode
    # 0: all passed, 1: some failed; anything else (a collection error, an internal error, no
    # test selected) is no result at all, never an empty list to compare.
    if rc not in (0, 1) or not report.exists():
        raise RuntimeError(f"kazoo's suite against {target} did not run (pytest exit {rc}); see {log_path}")
    raw = json.loads(report.read_text())
    results = {k: Outcome(v["outcome"], v.get("detail", "")) for k, v in raw.items()}
    if out is not None:
        out.write_text(json.dumps({k: {"outcome": o.outcome, "detail": o.detail} for k, o in sorted(results.items())},
                                  indent=1) + "\n")
    return results


def _selection(kdir: Path, tests: Sequence[str]) -> list[str]:
    if not tests:
        return [str(kdir)]
    return [str(kdir / t) for t in tests]


def load(path: Path) -> dict[str, Outcome]:
    raw = json.loads(Path(path).read_text())
    return {k: Outcome(v["outcome"], v.get("detail", "")) for k, v in raw.items()}


def counts(results: dict[str, Outcome]) -> dict[str, int]:
    c = {"passed": 0, "failed": 0, "skipped": 0}
    for o in results.values():
        c[o.outcome] += 1
    return c


@dataclass(frozen=True)
class Difference:
    test: str
    apache: str
    zabray: str
    detail: str


def compare(apache: dict[str, Outcome], zabray: dict[str, Outcome]) -> list[Difference]:
    """Every test whose outcome differs (a test run on one side only counts as 'absent')."""
    out = []
    for t in sorted(set(apache) | set(zabray)):
        a = apache[t].outcome if t in apache else "absent"
        z = zabray[t].outcome if t in zabray else "absent"
        if a != z:
            out.append(Difference(t, a, z, zabray[t].detail if t in zabray else ""))
    return out


def unexplained(diffs: Iterable[Difference]) -> list[Difference]:
    """The differences that count against zabray: a test Apache ZooKeeper passes and zabray does
    not, other than one that needs reconfiguration. (zabray passing what ZooKeeper fails or
    skips is listed, never excused silently, but is not a failure of zabray's.)"""
    return [d for d in diffs if d.apache == "passed" and d.test not in NEEDS_RECONFIG]


def summary(apache: dict[str, Outcome] | None, zabray: dict[str, Outcome] | None) -> str:
    lines = []
    for name, res in (("apache", apache), ("zabray", zabray)):
        if res is not None:
            c = counts(res)
            lines.append(f"{name}: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped")
    if apache is not None and zabray is not None:
        diffs = compare(apache, zabray)
        lines.append(f"{len(diffs)} tests differ:" if diffs else "no test differs")
        for d in diffs:
            mark = "  (needs reconfiguration)" if d.test in NEEDS_RECONFIG else ""
            lines.append(f"  {d.test}: apache {d.apache}, zabray {d.zabray}{mark}")
            if d.detail:
                lines.append(f"      {d.detail}")
    return "\n".join(lines)


# -- the reporting plugin (loaded into the suite's pytest with -p) -------------------------------

_results: dict[str, dict[str, str]] = {}


def _last_line(report: Any) -> str:
    text = str(report.longrepr) if report.longrepr is not None else ""
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errs = [ln for ln in lines if ln.startswith("E ")]
    return (errs[-1] if errs else lines[-1] if lines else "")[:300]


def pytest_runtest_logreport(report: Any) -> None:
    if os.environ.get(REPORT_ENV) is None:
        return
    tid = test_id(report.nodeid)
    cur = _results.get(tid)
    if report.when == "call" or cur is None or cur["outcome"] == "passed":
        if report.failed:
            _results[tid] = {"outcome": "failed", "detail": f"{report.when}: {_last_line(report)}"}
        elif report.skipped:
            _results[tid] = {"outcome": "skipped", "detail": _last_line(report)}
        elif cur is None or report.when == "call":
            _results[tid] = {"outcome": "passed", "detail": ""}


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    path = os.environ.get(REPORT_ENV)
    if path is not None:
        Path(path).write_text(json.dumps(_results, indent=1, sort_keys=True))


# -- the command line --------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kazoo_suite.py", description=__doc__.split("\n\n")[0])
    p.add_argument("tests", nargs="*", help="kazoo test ids or prefixes (default: the whole suite)")
    p.add_argument("--target", choices=("both", *TARGETS), default="both")
    p.add_argument("--out", type=Path, default=None, help="directory for apache.json, zabray.json and their logs")
    p.add_argument("-k", dest="keyword", default=None, help="pytest's -k, passed on")
    p.add_argument("--zabray-tree", type=Path, default=None,
                   help="run another checkout of zabray (its zabray/ and actors/ come first on the path)")
    p.add_argument("--compare", nargs=2, type=Path, metavar=("APACHE_JSON", "ZABRAY_JSON"),
                   help="compare two earlier runs instead of running")
    a = p.parse_args(argv)
    if a.compare:
        for f in a.compare:
            if not f.is_file():
                print(f"kazoo_suite.py: {f} does not exist", file=sys.stderr)
                return 2
        apache, zabray = load(a.compare[0]), load(a.compare[1])
    else:
        out = a.out or Path(tempfile.mkdtemp(prefix="kazoo-suite-"))
        out.mkdir(parents=True, exist_ok=True)
        res: dict[str, dict[str, Outcome]] = {}
        for t in TARGETS:
            if a.target in ("both", t):
                t0 = time.monotonic()
                res[t] = run_suite(t, a.tests, a.keyword, out / f"{t}.json", zabray_tree=a.zabray_tree)
                print(f"{t}: ran in {time.monotonic() - t0:.0f} s; {out / f'{t}.json'}", flush=True)
        apache, zabray = res.get("apache"), res.get("zabray")  # type: ignore[assignment]
    print(summary(apache, zabray))
    if apache is not None and zabray is not None:
        return 1 if unexplained(compare(apache, zabray)) else 0
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
