"""A client-session actor: killing it is a client vanishing; the leader expires its session and
its ephemerals vanish after the timeout, while its watches worked while it lived."""

from __future__ import annotations

import pytest

from tests.client.conftest import wait_until

pytestmark = pytest.mark.ray


def test_killing_a_session_actor_expires_its_session_and_its_ephemerals_vanish(start) -> None:
    import ray

    ens = start(3)
    actor = ens.session_actor(timeout=2.0)
    ray.get(actor.create.remote("/owned", b"x", ephemeral=True))
    ray.get(actor.exists.remote("/watched", watch=True))
    observer = ens.session(timeout=10)
    observer.create("/watched", b"")
    wait_until(lambda: ray.get(actor.events.remote()) != [], timeout=20, what="the actor's watch firing")
    assert observer.exists("/owned") is not None
    ray.kill(actor)
    wait_until(lambda: observer.sync() and observer.exists("/owned") is None, timeout=30,
               what="the dead client's ephemeral vanishing")
    observer.close()
