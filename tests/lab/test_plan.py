"""The lab's pure plan: names within the kernel's limits, addresses in its own subnet, the routes
a partition needs, what clashes with the machine's own network, and its state file."""

from __future__ import annotations

import json

import pytest

from zabray.errors import ConfigError
from zabray.lab.plan import (
    HOST_LABEL,
    LabSpec,
    RaySettings,
    clashes,
    parse_groups,
    parse_rate,
    tbf_args,
)
from zabray.lab.state import LabState, Limit


def test_names_fit_the_kernels_15_characters_and_addresses_stay_in_the_subnet() -> None:
    spec = LabSpec(name="abcdefgh", hosts=99, subnet="10.213.7.0/24")
    names = [spec.bridge, *(spec.veth(h) for h in spec.host_ids)]
    assert max(len(n) for n in names) <= 15
    assert len(set(names)) == len(names)
    assert spec.ip(1) == "10.213.7.1" and spec.ip(99) == "10.213.7.99" and spec.gateway_ip == "10.213.7.254"
    assert spec.host_of_ip("10.213.7.42") == 42 and spec.host_of_ip("10.213.8.1") is None


@pytest.mark.parametrize("kw, what", [
    ({"name": "Lab"}, "lab name"), ({"name": "toolongname"}, "lab name"), ({"hosts": 0}, "hosts"),
    ({"hosts": 201}, "hosts"), ({"subnet": "8.8.8.0/24"}, "private IPv4 /24"), ({"subnet": "10.0.0.0/16"}, "/24"),
    ({"subnet": "10.213.0.1/24"}, "host bits"), ({"ray": RaySettings(health_failures=0)}, "health_failures"),
])
def test_a_bad_spec_names_what_to_fix(kw: dict[str, object], what: str) -> None:
    with pytest.raises(ConfigError, match=what):
        LabSpec(**kw)  # type: ignore[arg-type]


def test_head_and_joining_nodes_carry_their_ip_temp_dir_label_and_resource() -> None:
    spec = LabSpec(hosts=3)
    head, other = spec.ray_start(1, "ray"), spec.ray_start(3, "ray")
    assert "--head" in head and "--node-ip-address=10.213.0.1" in head and "--block" in head
    assert f"--address={spec.head_address}" in other and "--head" not in other
    assert "--node-ip-address=10.213.0.3" in other and f"--temp-dir={spec.ray_temp(3)}" in other
    labels = json.loads(next(a for a in other if a.startswith("--labels=")).split("=", 1)[1])
    assert labels == {HOST_LABEL: "h3"}
    assert len(spec.ray_temp(3)) < 40  # Ray's unix sockets live below it (108 bytes in all)
    with pytest.raises(ConfigError, match="no host 4"):
        spec.ray_start(4, "ray")


def test_ray_settings_become_ray_variables_with_the_token() -> None:
    env = LabSpec(ray=RaySettings(health_period_ms=500, health_failures=4)).env()
    assert env["RAY_health_check_period_ms"] == "500" and env["RAY_health_check_failure_threshold"] == "4"
    assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN_PATH"].endswith("/lab/auth_token")
    assert env["RAY_ADDRESS"] == "10.213.0.1:6379"
    assert LabSpec(ray=RaySettings(token=False)).env()["RAY_AUTH_MODE"] == "disabled"


def test_a_partition_blocks_every_address_across_groups_and_none_within() -> None:
    spec = LabSpec(hosts=5)
    routes = spec.partition_routes([[1, 2], [3]])  # 4 and 5 form the third group
    assert routes[1] == ["10.213.0.3", "10.213.0.4", "10.213.0.5"]
    assert routes[3] == ["10.213.0.1", "10.213.0.2", "10.213.0.4", "10.213.0.5"]
    assert routes[4] == ["10.213.0.1", "10.213.0.2", "10.213.0.3"]
    for h, ips in routes.items():
        assert spec.ip(h) not in ips
    with pytest.raises(ConfigError, match="disjoint"):
        spec.partition_routes([[1, 2], [2, 3]])
    with pytest.raises(ConfigError, match="two groups"):
        spec.partition_routes([[1, 2, 3, 4, 5]])
    with pytest.raises(ConfigError, match="no host 9"):
        spec.partition_routes([[9]])


def test_a_oneway_cut_blocks_only_what_the_sources_send() -> None:
    spec = LabSpec(hosts=3)
    assert spec.oneway_routes([1], [2, 3]) == {1: ["10.213.0.2", "10.213.0.3"]}
    with pytest.raises(ConfigError, match="both sides"):
        spec.oneway_routes([1], [1, 2])


def test_groups_and_rates_parse_or_say_what_is_wrong() -> None:
    assert parse_groups(["1", "2,3"]) == [[1], [2, 3]]
    with pytest.raises(ConfigError, match="bad host group"):
        parse_groups(["a"])
    assert parse_rate("10mbit") == 10_000_000 and parse_rate("500kbit") == 500_000 and parse_rate("1mbps") == 8_000_000
    for bad in ("fast", "1kbit", ""):
        with pytest.raises(ConfigError):
            parse_rate(bad)
    assert tbf_args(10_000_000)[:3] == ["tbf", "rate", "10000000bit"]


def test_the_machines_own_routes_and_addresses_in_the_subnet_clash_but_the_labs_do_not() -> None:
    routes = [{"dst": "default", "dev": "eth0"}, {"dst": "10.213.0.0/24", "dev": "zl-lab"},
              {"dst": "192.0.2.0/24", "dev": "eth0"}]
    addrs = [{"ifname": "zl-lab", "addr_info": [{"local": "10.213.0.254"}]}]
    assert clashes("10.213.0.0/24", routes, addrs, {"zl-lab"}) == []
    theirs = [*routes, {"dst": "10.213.0.0/16", "dev": "wg0"}, {"dst": "10.213.0.9", "dev": "tun1"}]
    assert clashes("10.213.0.0/24", theirs, addrs, {"zl-lab"}) == ["route 10.213.0.0/16 dev wg0",
                                                                  "route 10.213.0.9 dev tun1"]
    other = [{"ifname": "eth1", "addr_info": [{"local": "10.213.0.17"}]}]
    assert clashes("10.213.0.0/24", [], other, {"zl-lab"}) == ["address 10.213.0.17 on eth1"]


def test_the_state_file_round_trips_and_a_damaged_one_is_named() -> None:
    spec = LabSpec(hosts=3, ray=RaySettings(health_period_ms=500))
    st = LabState(spec, 123, 1.5, mountpoint_made=True).with_cut(2, True).with_crashed(3, True)
    st = st.with_blocked(spec.partition_routes([[1], [2, 3]]), "1 | 2,3").with_limit(2, Limit(10_000_000, None))
    back = LabState.from_json(st.to_json(), "x")
    assert back == st and back.spec.ray.health_period_ms == 500
    assert back.blocked_of(1) == ("10.213.0.2", "10.213.0.3") and back.healed().blocked == ()
    assert back.with_cut(2, False).cut == () and back.with_limit(2, None).limits == ()
    with pytest.raises(ConfigError, match="damaged"):
        LabState.from_json("{", "/var/tmp/zabray-lab/lab/state.json")


def test_a_schedules_host_faults_need_the_lab_they_act_on() -> None:
    from zabray.replay.schedule import parse

    step = {"fault": "host-cut", "target": "follower", "at": 1, "hold": 2}
    with pytest.raises(ConfigError, match="lab: NAME"):
        parse({"script": [step]})
    plan = parse({"lab": "lab", "script": [step, {**step, "fault": "host-crash", "at": 4}]})
    assert plan.lab == "lab" and [s.fault for s in plan.steps] == ["host-cut", "host-crash"]
    with pytest.raises(ConfigError, match="names a lab"):
        parse({"lab": 3, "script": [step]})
