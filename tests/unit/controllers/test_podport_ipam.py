"""podport's pure parts: address pools (IPv4, IPv6), exclusions, lowest free address,
exhaustion, MAC derivation, LogicalPort names, configuration checks, the allocator."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
import yaml

from controllers.podport import Network, PodPortConfig
from controllers.podport.allocator import Allocator
from controllers.podport.crd import CRD
from controllers.podport.ipam import (
    Pool,
    is_dns_subdomain,
    mac_for,
    parse_mac_prefix,
    parse_port_name,
    port_name,
)
from manager import Request
from manager.config import parse

ROOT = Path(__file__).resolve().parents[3]


def addresses(pool: Pool, n: int) -> list[str]:
    taken: set[int] = set()
    out = []
    for _ in range(n):
        off = pool.lowest_free(taken.__contains__)
        if off is None:
            break
        taken.add(off)
        out.append(str(pool.address(off)))
    return out


def test_ipv4_pool_reserves_network_broadcast_and_gateway() -> None:
    pool = Pool.build("n", "10.0.0.0/29")
    assert pool.gateway == ipaddress.ip_address("10.0.0.1")
    assert pool.capacity == 5
    assert addresses(pool, 10) == [f"10.0.0.{i}" for i in range(2, 7)]


def test_exhaustion_of_a_slash_29_and_reuse_of_the_lowest() -> None:
    pool = Pool.build("n", "10.0.0.0/29", "10.0.0.6")
    taken = {pool.lowest_free(lambda o: False)}
    while (off := pool.lowest_free(taken.__contains__)) is not None:
        taken.add(off)
    assert len(taken) == 5 and pool.offset("10.0.0.6") not in taken
    taken.discard(pool.offset("10.0.0.3"))
    assert pool.lowest_free(taken.__contains__) == 3


def test_exclusions_ips_ranges_and_cidrs() -> None:
    pool = Pool.build("n", "10.0.0.0/24", exclude=("10.0.0.2", "10.0.0.4-10.0.0.9", "10.0.0.16/28"))
    got = addresses(pool, 12)
    assert got[:3] == ["10.0.0.3", "10.0.0.10", "10.0.0.11"]
    assert "10.0.0.16" not in got and got[-1] == "10.0.0.36"
    assert pool.capacity == 256 - 3 - 1 - 6 - 16
    assert not pool.is_allocatable(pool.offset("10.0.0.20") or 0)


def test_ipv6_pool_reserves_anycast_and_gateway_only() -> None:
    pool = Pool.build("n", "fd00::/64", "fd00::1", ("fd00::3",))
    assert addresses(pool, 3) == ["fd00::2", "fd00::4", "fd00::5"]
    assert pool.capacity == 2**64 - 3
    last = pool.network.num_addresses - 1
    assert pool.is_allocatable(last)  # no broadcast in IPv6


def test_lowest_free_starts_at_a_hint() -> None:
    pool = Pool.build("n", "10.0.0.0/24")
    assert pool.lowest_free(lambda o: o < 50, start=10) == 50
    assert pool.next_allocatable(255) is None


@pytest.mark.parametrize(
    ("cidr", "gateway", "exclude", "message"),
    [
        ("10.0.0.0/33", "", (), "does not appear"),
        ("10.0.0.1/24", "", (), "host bits"),
        ("10.0.0.0/24", "10.0.1.1", (), "not inside"),
        ("10.0.0.0/24", "10.0.0.255", (), "broadcast"),
        ("10.0.0.0/24", "", ("10.0.0.9-10.0.0.3",), "start is after end"),
        ("10.0.0.0/24", "", ("fd00::1",), "not IPv4"),
        ("10.0.0.0/24", "", ("10.0.9.0/24",), "outside"),
    ],
)
def test_bad_pools(cidr: str, gateway: str, exclude: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Pool.build("n", cidr, gateway, exclude)


def test_mac_is_derived_from_the_address() -> None:
    prefix = parse_mac_prefix("0a:58")
    assert mac_for(ipaddress.ip_address("10.16.0.5"), prefix) == "0a:58:0a:10:00:05"
    assert mac_for(ipaddress.ip_address("fd00::1:2"), prefix) == "0a:58:00:01:00:02"
    assert mac_for(ipaddress.ip_address("10.16.0.5"), parse_mac_prefix("02")) == (
        "02:00:0a:10:00:05"
    )


@pytest.mark.parametrize(
    ("prefix", "message"),
    [("00:58", "locally administered"), ("0b:00", "multicast"), ("0a:5", "hex"), ("", "hex")],
)
def test_mac_prefix_checks(prefix: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_mac_prefix(prefix)


@pytest.mark.parametrize("ip", ["10.0.0.5", "fd00::5", "::1", "fd00::", "2001:db8::ff00:42:8329"])
def test_port_names_are_dns_subdomains_and_round_trip(ip: str) -> None:
    addr = ipaddress.ip_address(ip)
    name = port_name("net-a", addr)
    assert is_dns_subdomain(name), name
    assert parse_port_name(name) == ("net-a", addr)


def test_port_names_of_distinct_addresses_differ() -> None:
    names = {port_name("n", ipaddress.ip_address(f"fd00::{i:x}")) for i in range(1000)}
    assert len(names) == 1000


def _problems(section: dict[str, object]) -> list[str]:
    from manager.errors import ConfigError

    try:
        parse({"controllers": {"podport": section}}, {"podport": PodPortConfig})
    except ConfigError as exc:
        return list(exc.problems)
    return []


def test_default_config_is_valid() -> None:
    assert PodPortConfig().validate() == []
    assert _problems({}) == []


def test_config_from_yaml() -> None:
    _, controllers = parse(
        {
            "controllers": {
                "podport": {
                    "networks": [
                        {"name": "blue", "cidr": "10.1.0.0/16", "exclude": ["10.1.0.2-10.1.0.9"]},
                        {"name": "six", "cidr": "fd00:1::/64"},
                    ],
                    "defaultNetwork": "blue",
                    "macPrefix": "0e:00",
                    "gcInterval": 60,
                    "installCrd": True,
                }
            }
        },
        {"podport": PodPortConfig},
    )
    _, config = controllers["podport"]
    assert config.networks[1] == Network(name="six", cidr="fd00:1::/64")
    assert config.install_crd and config.gc_interval == 60.0
    assert set(config.pools()) == {"blue", "six"}


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        (
            {
                "networks": [{"name": "Bad_Name", "cidr": "10.0.0.0/24"}],
                "defaultNetwork": "Bad_Name",
            },
            'controllers.podport.networks[0].name: "Bad_Name" is not a DNS label',
        ),
        (
            {"networks": [{"name": "a", "cidr": "10.0.0.0/33"}], "defaultNetwork": "a"},
            "controllers.podport.networks[0].cidr:",
        ),
        (
            {
                "networks": [{"name": "a", "cidr": "10.0.0.0/24", "gateway": "10.9.0.1"}],
                "defaultNetwork": "a",
            },
            "is not inside",
        ),
        ({"networks": [{"name": "a"}], "defaultNetwork": "a"}, "cidr: required"),
        ({"defaultNetwork": "nope"}, 'defaultNetwork: "nope" is not one of the networks'),
        (
            {
                "networks": [
                    {"name": "a", "cidr": "10.0.0.0/24"},
                    {"name": "a", "cidr": "10.1.0.0/24"},
                ],
                "defaultNetwork": "a",
            },
            'network "a" is defined more than once',
        ),
        ({"networks": []}, "at least one network"),
        ({"macPrefix": "00:00"}, "macPrefix: "),
        ({"labelSelector": "a in (b"}, "labelSelector: "),
        ({"gcInterval": 0}, "gcInterval: expected"),
        ({"unknown": 1}, "unknown key"),
    ],
)
def test_config_errors(section: dict[str, object], expected: str) -> None:
    problems = _problems(section)
    assert any(expected in p for p in problems), problems


# -- allocator ---------------------------------------------------------------------------


def _port(name: str, network: str, ip: str, uid: str = "u") -> dict[str, object]:
    return {
        "metadata": {"name": name, "uid": f"lp-{name}"},
        "spec": {"network": network, "ip": ip, "podUID": uid, "podNamespace": "ns", "podName": uid},
    }


def test_allocator_view_is_cache_plus_reservations() -> None:
    now = [0.0]
    alloc = Allocator({"n": Pool.build("n", "10.0.0.0/29")}, clock=lambda: now[0])
    alloc.on_add(_port("n.10.0.0.2", "n", "10.0.0.2"), True)
    assert alloc.reserve("n") == 3  # .2 in the cache
    assert alloc.reserve("n") == 4  # .3 reserved in flight
    alloc.release("n", 3)
    assert alloc.reserve("n") == 3
    alloc.taken("n", 5)  # AlreadyExists: held by someone else for a while
    assert alloc.reserve("n") == 6
    assert alloc.reserve("n") is None
    assert alloc.counts("n") == (5, 0)
    now[0] = 61.0  # reservations that never came back by watch expire
    alloc.on_add(_port("n.10.0.0.3", "n", "10.0.0.3"), False)
    assert alloc.counts("n") == (2, 3)
    assert alloc.reserve("n") == 4


def test_allocator_wakes_waiting_pods_when_a_port_goes() -> None:
    alloc = Allocator({"n": Pool.build("n", "10.0.0.0/30")})  # one address: .2
    woken: list[Request] = []
    alloc.set_waker(woken.append)
    alloc.on_add(_port("n.10.0.0.2", "n", "10.0.0.2"), True)
    assert alloc.reserve("n") is None
    alloc.wait("n", Request("ns", "late"))
    alloc.on_delete(_port("n.10.0.0.2", "n", "10.0.0.2"))
    assert woken == [Request("ns", "late")]
    assert alloc.reserve("n") == 2


def test_allocator_remembers_a_created_port_until_the_cache_has_it() -> None:
    alloc = Allocator({"n": Pool.build("n", "10.0.0.0/24")})
    off = alloc.reserve("n")
    assert off == 2
    port = _port("n.10.0.0.2", "n", "10.0.0.2", uid="pod-1")
    alloc.created("n", off, "pod-1", port)
    assert alloc.pending_port("pod-1") is port
    alloc.on_add(port, False)
    assert alloc.pending_port("pod-1") is None


# -- the CRD -------------------------------------------------------------------------------


def test_crd_yaml_matches_the_python_manifest() -> None:
    path = ROOT / "deploy" / "crds" / "logicalports.network.overseer.io.yaml"
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert docs == [CRD]


def test_crd_schema_is_structural_with_printer_columns() -> None:
    version = CRD["spec"]["versions"][0]
    assert version["name"] == "v1alpha1" and CRD["spec"]["scope"] == "Cluster"
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    for want in ("Network", "IP", "MAC", "Pod", "Node", "Age"):
        assert want in columns
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert all(p["type"] == "string" for p in spec["properties"].values())
