"""Errors raised inside the controller or the fault injector reach the API as the typed
``ZabError`` itself, with its one-line message: never a nested Ray traceback."""

from __future__ import annotations

import asyncio
import os

import pytest

from tests.ensemble.conftest import ray_local, start  # noqa: F401
from zabray.errors import ConfigError, NotRunningError, ZabError

pytestmark = pytest.mark.ray


def one_line(e: pytest.ExceptionInfo[ZabError], cls: type[ZabError]) -> str:
    assert type(e.value) is cls, type(e.value).__mro__
    msg = str(e.value)
    assert "\n" not in msg and "Traceback" not in msg and "RayTaskError" not in msg, msg
    return msg


def test_controller_and_injector_errors_are_typed_one_liners(start) -> None:  # noqa: F811
    ens = start(3)
    ens.wait_for_leader()
    with pytest.raises(ConfigError) as e:
        ens.kill(9)
    assert one_line(e, ConfigError) == f"no replica 9 in ensemble {ens.name!r} (replicas are [1, 2, 3])"
    with pytest.raises(ConfigError) as e:
        ens.kill("1")  # type: ignore[arg-type]
    assert one_line(e, ConfigError).startswith("no replica '1' in ensemble")  # not "no replica 1 ... [1, 2, 3]"
    # A value that is not bytes is refused before anything is sent: in submit_many it used to
    # reach the encoder, which dropped the client's connection and made every write uncertain.
    with pytest.raises(ConfigError) as e:
        ens.submit_many([b"fine", "text"])  # type: ignore[list-item]
    assert one_line(e, ConfigError) == "submit_many: value 1 takes bytes, got str"
    with pytest.raises(ConfigError, match="submit takes bytes, got str"):
        asyncio.run(ens.submit_async("text"))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="submit takes bytes, got str"):
        ens.submit("text")  # type: ignore[arg-type]
    results = ens.submit_many([b"a", bytearray(b"b"), memoryview(b"c")])  # bytes-like values are fine
    assert all(isinstance(z, int) for z in results), results
    with pytest.raises(ConfigError) as e:
        ens.restart(1)
    assert one_line(e, ConfigError) == "replica 1 is running; kill it before restarting it"
    with pytest.raises(ConfigError) as e:
        ens.disk_fault(2, "melt")
    assert one_line(e, ConfigError).startswith("unknown disk fault 'melt'")
    with pytest.raises(ConfigError) as e:
        ens.disk_fault(9, "clear")
    assert "no replica 9" in one_line(e, ConfigError)
    with pytest.raises(ConfigError) as e:
        ens.partition([1], [2, 7])
    assert "unknown replica(s) 7" in one_line(e, ConfigError)
    with pytest.raises(ConfigError) as e:
        ens.delay([1], [8], 10)
    assert "no replica 8" in one_line(e, ConfigError)
    ens.kill(3)
    with pytest.raises(NotRunningError) as e2:
        ens.kill(3)
    assert one_line(e2, NotRunningError) == "replica 3 is not running"
    with pytest.raises(NotRunningError) as e2:
        ens.disk_fault(3, "fsync-fail")
    assert one_line(e2, NotRunningError) == "replica 3 is not running"
    from zabray.driver.ensemble import Ensemble

    with pytest.raises(ConfigError) as e:
        Ensemble.start(3, name=ens.name)
    assert one_line(e, ConfigError) == f"an ensemble named {ens.name!r} is already running; stop it or pick another name"


def test_stop_wipe_deletes_the_data_directories(start, tmp_path) -> None:  # noqa: F811
    ens = start(3)
    ens.wait_for_leader()
    ens.submit(b"x")
    dirs = [tmp_path / "data" / ens.name / f"replica-{s}" for s in (1, 2, 3)]
    assert all(d.is_dir() and any(d.rglob("*")) for d in dirs)
    wiped = ens.stop(wipe=True)
    assert sorted(wiped) == sorted(str(d) for d in dirs)
    assert not (tmp_path / "data" / ens.name).exists()


def test_a_port_in_use_or_a_bad_data_dir_is_a_config_error_and_leaves_nothing_behind(ray_local, tmp_path) -> None:  # noqa: F811
    import socket

    from zabray.driver.ensemble import Ensemble

    name = f"port-{os.getpid()}"
    dirs = {"data_dir": str(tmp_path / "data"), "run_dir": str(tmp_path / "run")}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError) as e:
            Ensemble.start(3, name=name, client_port=port - 2, **dirs)  # replica 2 listens on base + 2
        msg = one_line(e, ConfigError)
        assert f"127.0.0.1:{port} (client_port): Address already in use; set client_port" in msg, msg
    (tmp_path / "file").write_text("")  # a data directory no replica can create
    with pytest.raises(ConfigError) as e:
        Ensemble.start(3, name=name, data_dir=str(tmp_path / "file" / "data"), run_dir=dirs["run_dir"])
    assert "(data_dir): Not a directory; set data_dir to a writable directory" in one_line(e, ConfigError)
    # Nothing of the failed start lingers: the controller's and the replicas' names are free again.
    ens = Ensemble.start(3, name=name, **dirs)
    try:
        assert ens.wait_for_leader(timeout=60) in (1, 2, 3)
    finally:
        ens.stop()
