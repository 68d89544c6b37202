"""`zabray down --stop-ray` waits for the head's processes to end, and a zombie has ended.

A process killed while its parent does not reap it (a container whose init does not, a raylet
that is itself going away) stays in /proc as a zombie; waiting for it to vanish held `down`
for its whole grace period.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tests.polling import wait_until
from zabray.driver.rayhead import _running


def test_a_zombie_is_not_running_and_a_live_process_is() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert _running(child.pid)
        os.kill(child.pid, signal.SIGKILL)
        wait_until(lambda: not _running(child.pid), 30, "the killed child to be a zombie")  # killed, not reaped
        with open(f"/proc/{child.pid}/stat") as f:
            assert f.read().rsplit(")", 1)[-1].split()[0] == "Z"  # still in /proc: it was the zombie
    finally:
        child.kill()
        child.wait()
    assert not _running(child.pid)  # reaped: gone from /proc


def test_starting_a_head_on_a_taken_port_says_how_to_join_it_instead() -> None:
    # A head whose record a `ray stop` elsewhere removed still holds its port; `ray start` then
    # failed with "Session name ... does not match persisted value".
    import socket

    import pytest

    from zabray.driver.rayhead import start_head
    from zabray.errors import NotRunningError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(NotRunningError, match=f"port {port} is taken.*--address 127.0.0.1:{port}"):
            start_head(port)
