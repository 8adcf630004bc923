"""IP address management, pure: address pools, MAC derivation, LogicalPort names.

A :class:`Pool` is one network's allocatable addresses: its CIDR minus the reserved
addresses (IPv4: network and broadcast, except in a /31 or /32; IPv6: the subnet-router
anycast address, the first one), the gateway and the configured exclusions. Addresses are
handled as *offsets* from the network address (plain ints), so an IPv6 /64 costs no more
than an IPv4 /24. The policy is *lowest free address first*: deterministic, so two
replicas that race for the same address collide on the LogicalPort name (the API server
refuses the second) instead of silently handing out two different answers.

The MAC of an address is the configured prefix (locally administered, unicast) followed
by the address's last bytes (``0a:58`` + ``10.16.0.5`` → ``0a:58:0a:10:00:05``, as
ovn-kubernetes does). Within one network it is unique as long as fewer than
``2 ** (8 * (6 - len(prefix)))`` addresses are in use (4 billion with a 2-byte prefix):
lowest-first allocation keeps offsets below that.

LogicalPort names are ``<network>.<address>``: IPv4 dotted as is, IPv6 fully exploded with
``-`` for ``:`` (``fd00-0000-...-0005``), so the name is a valid DNS subdomain, unique per
(network, address), and parsed back by :func:`parse_port_name`.

Thread-safe: pools are immutable.
"""

from __future__ import annotations

import bisect
import ipaddress
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "DNS_LABEL",
    "IPAddress",
    "IPNetwork",
    "Pool",
    "is_dns_label",
    "is_dns_subdomain",
    "mac_for",
    "parse_exclusion",
    "parse_mac_prefix",
    "parse_port_name",
    "port_name",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DNS_LABEL: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN: Final = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_MAC_OCTET: Final = re.compile(r"^[0-9a-fA-F]{2}$")


def is_dns_label(name: str) -> bool:
    """An RFC 1123 label: lower-case alphanumerics and ``-``, at most 63 characters."""
    return len(name) <= 63 and DNS_LABEL.match(name) is not None


def is_dns_subdomain(name: str) -> bool:
    """An RFC 1123 subdomain, as Kubernetes checks object names: at most 253 characters."""
    return len(name) <= 253 and _DNS_SUBDOMAIN.match(name) is not None


def parse_exclusion(text: str, network: IPNetwork) -> tuple[int, int]:
    """An exclusion (``"10.0.0.7"``, ``"10.0.0.10-10.0.0.20"``, ``"10.0.0.64/28"``) as
    an inclusive range of offsets in ``network``, clipped to it.

    Raises:
        ValueError: not an address, range or CIDR of the network's family; a range whose
            start is after its end; or nothing of it inside ``network``.
    """
    text = text.strip()
    if "/" in text:
        sub = ipaddress.ip_network(text, strict=False)
        first: IPAddress = sub.network_address
        last: IPAddress = sub.broadcast_address
    elif "-" in text:
        a, _, b = text.partition("-")
        first, last = ipaddress.ip_address(a.strip()), ipaddress.ip_address(b.strip())
        if first.version != last.version:
            raise ValueError(f"{text!r}: both ends must be of one IP family")
        if int(first) > int(last):
            raise ValueError(f"{text!r}: start is after end")
    else:
        first = last = ipaddress.ip_address(text)
    if first.version != network.version:
        raise ValueError(f"{text!r} is not IPv{network.version} like {network}")
    base = int(network.network_address)
    lo = max(int(first), base) - base
    hi = min(int(last), int(network.broadcast_address)) - base
    if lo > hi:
        raise ValueError(f"{text!r} is outside {network}")
    return lo, hi


def _merge(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return tuple(merged)


@dataclass(frozen=True, slots=True)
class Pool:
    """One network's allocatable addresses (see the module docstring)."""

    name: str
    network: IPNetwork
    gateway: IPAddress
    reserved: tuple[tuple[int, int], ...]  # merged, sorted, inclusive offset ranges
    _starts: tuple[int, ...] = field(repr=False, compare=False)

    @classmethod
    def build(cls, name: str, cidr: str, gateway: str = "", exclude: Iterable[str] = ()) -> Pool:
        """The pool of ``cidr`` (host bits must be zero) with its gateway ("" = the first
        host address) and exclusions.

        Raises:
            ValueError: a bad CIDR, gateway or exclusion.
        """
        network = ipaddress.ip_network(cidr, strict=True)
        size = network.num_addresses
        ranges: list[tuple[int, int]] = []
        if network.version == 4 and size > 2:
            ranges += [(0, 0), (size - 1, size - 1)]  # network, broadcast
        elif network.version == 6 and size > 1:
            ranges.append((0, 0))  # subnet-router anycast
        gw = (
            ipaddress.ip_address(gateway)
            if gateway
            else network.network_address + (1 if size > 2 else 0)
        )
        if gw not in network:
            raise ValueError(f"gateway {gw} is not inside {network}")
        gw_offset = int(gw) - int(network.network_address)
        if any(lo <= gw_offset <= hi for lo, hi in ranges):
            raise ValueError(f"gateway {gw} is the network or broadcast address of {network}")
        ranges.append((gw_offset, gw_offset))
        ranges += [parse_exclusion(e, network) for e in exclude]
        merged = _merge(ranges)
        return cls(name, network, gw, merged, tuple(lo for lo, _ in merged))

    @property
    def version(self) -> int:
        return self.network.version

    @property
    def capacity(self) -> int:
        """How many addresses the pool can hand out."""
        return self.network.num_addresses - sum(hi - lo + 1 for lo, hi in self.reserved)

    def offset(self, ip: IPAddress | str) -> int | None:
        """The offset of ``ip`` in the network, or None if it is not inside."""
        addr = ipaddress.ip_address(ip) if isinstance(ip, str) else ip
        if addr.version != self.version or addr not in self.network:
            return None
        return int(addr) - int(self.network.network_address)

    def address(self, offset: int) -> IPAddress:
        """The address at ``offset``."""
        return self.network.network_address + offset

    def is_allocatable(self, offset: int) -> bool:
        """Inside the network and not reserved (network, broadcast, gateway, excluded)."""
        if not 0 <= offset < self.network.num_addresses:
            return False
        i = bisect.bisect_right(self._starts, offset) - 1
        return not (i >= 0 and self.reserved[i][0] <= offset <= self.reserved[i][1])

    def next_allocatable(self, offset: int) -> int | None:
        """The lowest allocatable offset ``>= offset``, or None past the end."""
        offset = max(offset, 0)
        i = bisect.bisect_right(self._starts, offset) - 1
        if i >= 0 and self.reserved[i][0] <= offset <= self.reserved[i][1]:
            # ranges are merged, so the next one starts beyond the first offset after this
            offset = self.reserved[i][1] + 1
        return offset if offset < self.network.num_addresses else None

    def lowest_free(self, taken: Callable[[int], bool], start: int = 0) -> int | None:
        """The lowest allocatable offset ``>= start`` for which ``taken`` is false.

        Cost: one ``taken`` call per allocatable offset skipped.
        """
        offset = self.next_allocatable(start)
        while offset is not None and taken(offset):
            offset = self.next_allocatable(offset + 1)
        return offset


def parse_mac_prefix(prefix: str) -> bytes:
    """The bytes of a MAC prefix (``"0a:58"``): 1 to 3 octets, locally administered
    (bit 0x02 of the first octet set) and unicast (bit 0x01 clear).

    Raises:
        ValueError: otherwise.
    """
    octets = prefix.split(":") if prefix else []
    if not 1 <= len(octets) <= 3 or not all(_MAC_OCTET.match(o) for o in octets):
        raise ValueError(f"{prefix!r} is not 1 to 3 hex octets separated by ':'")
    raw = bytes(int(o, 16) for o in octets)
    if not raw[0] & 0x02:
        raise ValueError(f"{prefix!r} is not locally administered (bit 0x02 of the first octet)")
    if raw[0] & 0x01:
        raise ValueError(f"{prefix!r} is a multicast prefix (bit 0x01 of the first octet)")
    return raw


def mac_for(ip: IPAddress, prefix: bytes) -> str:
    """The MAC of ``ip``: ``prefix`` followed by the address's last ``6 - len(prefix)``
    bytes (an IPv4 address zero-padded on the left), lower-case, colon-separated."""
    size = 6 - len(prefix)
    tail = ip.packed.rjust(size, b"\0")[-size:]
    return ":".join(f"{b:02x}" for b in prefix + tail)


def port_name(network: str, ip: IPAddress) -> str:
    """The LogicalPort name of ``ip`` on ``network`` (a DNS subdomain, see module doc)."""
    if ip.version == 4:
        return f"{network}.{ip}"
    return f"{network}.{ip.exploded.replace(':', '-')}"


def parse_port_name(name: str) -> tuple[str, IPAddress] | None:
    """``(network, ip)`` from a LogicalPort name, or None if it is not one."""
    network, sep, rest = name.partition(".")
    if not sep:
        return None
    try:
        ip: IPAddress = (
            ipaddress.IPv6Address(rest.replace("-", ":"))
            if "-" in rest
            else ipaddress.IPv4Address(rest)
        )
    except ValueError:
        return None
    return network, ip
