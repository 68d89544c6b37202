"""A replica bound to a wildcard address advertises an address other hosts can dial."""

from __future__ import annotations

import pytest
import ray

from actors.replica import advertised_host


def test_a_concrete_bind_address_is_advertised_as_is() -> None:
    assert advertised_host("127.0.0.1") == "127.0.0.1"
    assert advertised_host("10.1.2.3") == "10.1.2.3"


@pytest.mark.ray
def test_a_wildcard_bind_advertises_the_node_ip() -> None:
    if ray.is_initialized():  # a Ray another module's tests left connected, whatever the order
        ray.shutdown()
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        ip = ray.util.get_node_ip_address()
        assert advertised_host("0.0.0.0") == ip and advertised_host("::") == ip
        assert ip not in ("0.0.0.0", "::", "")
    finally:
        ray.shutdown()
