"""Joining a Ray cluster, and the errors that come back from its actors.

``init_ray`` joins the cluster ``ray.init`` would (an address, ``RAY_ADDRESS``, the head ``ray
start`` left running here) or starts a local one, and fails fast with a one-line
``NotRunningError`` where Ray would retry for minutes. ``actor_error`` turns what an actor raised
back into the ``ZabError`` it was, without Ray's wrapping.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from actors.names import NAMESPACE
from zabray.driver.rayhead import answers, is_local_head, running_head, unniced_workers, use_local_token
from zabray.errors import NotRunningError, ZabError

# Ray's notices while joining or starting a cluster, which are not news to a zabray user: that
# it enabled token authentication (for a local cluster, or a head that uses it), that other
# clusters run on the machine too (it joins the one `ray start` recorded, as said below).
_RAY_NOTICES = ("ray._private.authentication.authentication_token_setup", "ray._private.services")


def init_ray(address: str | None = None) -> None:
    """Join the cluster at ``address``/``RAY_ADDRESS``, else the head ``ray start`` left running
    on this machine (as ``ray.init()`` finds it, its token included), else start a local one
    (never joining whatever a stale address file names); idempotent."""
    import ray

    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS")
    kwargs: dict[str, Any] = dict(namespace=NAMESPACE, ignore_reinit_error=True, log_to_driver=False,
                                  logging_level=logging.WARNING)
    quiet = [logging.getLogger(n) for n in _RAY_NOTICES]
    levels = [q.level for q in quiet]
    for q in quiet:
        q.setLevel(logging.ERROR)
    try:
        if address:
            if not answers(address):  # Ray itself would retry for minutes before saying so
                raise NotRunningError(f"cannot join the Ray cluster at {address}: nothing listens there "
                                      "(is the head's port right, and is `ray start --head` running?)")
            if is_local_head(address):
                use_local_token()
            try:
                ray.init(address=address, **kwargs)
            except ConnectionError:
                raise NotRunningError(
                    f"cannot join the Ray cluster at {address}: no Ray head answers there, or it asks for a "
                    "token this process lacks (set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN to the head's "
                    "`ray get-auth-token`)") from None
        elif running_head() is not None:
            ray.init(**kwargs)  # Ray's own lookup of that head, which also enables its token
        else:
            unniced_workers()
            ray.init(address="local", **kwargs)
    finally:
        for q, level in zip(quiet, levels, strict=True):
            q.setLevel(level)


def actor_error(e: BaseException) -> BaseException:
    """The error an actor raised, without Ray's wrapping: a ``ZabError`` comes back as itself,
    with its one-line message, however many actors it passed through (injector -> controller)."""
    import ray  # (here: a driver that never calls Ray does not pay for importing it)

    from actors.ray_errors import innermost

    cause = innermost(e)
    if isinstance(cause, ZabError):
        plain = next(c for c in type(cause).__mro__ if issubclass(c, ZabError)
                     and not issubclass(c, ray.exceptions.RayTaskError))
        args = cause.args if not isinstance(cause, ray.exceptions.RayTaskError) else (str(cause).splitlines()[-1],)
        try:
            return plain(*args)
        except Exception:  # a subclass with another signature: keep the object itself
            return cause
    return e.as_instanceof_cause() if isinstance(e, ray.exceptions.RayTaskError) else e
