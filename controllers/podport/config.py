"""The ``podport`` controller's settings (section ``controllers.podport``).

Frozen dataclasses, loaded by the strict configuration loader (camelCase in YAML);
``validate()`` adds the cross-field checks: every CIDR parses with its host bits zero,
gateways and exclusions lie inside their network, network names are DNS labels and
unique, the default network exists, the MAC prefix is locally administered, the label
selector parses.

Thread-safe: immutable values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from controllers.podport.ipam import Pool, is_dns_label, parse_mac_prefix
from manager import LabelSelector

__all__ = ["Network", "PodPortConfig"]


def _f(default: Any, help: str, **meta: Any) -> Any:
    return field(default=default, metadata={"help": help, **meta})


@dataclass(frozen=True, kw_only=True, slots=True)
class Network:
    """One network pods can get a port on."""

    name: str = _f("", "network name: a DNS label, at most 63 characters (required)")
    cidr: str = _f("", "IPv4 or IPv6 CIDR with zero host bits, e.g. 10.16.0.0/16 (required)")
    gateway: str = _f("", 'gateway address inside the CIDR ("" = the first host address)')
    exclude: tuple[str, ...] = _f(
        (), 'addresses never handed out: "10.16.0.7", ranges "a-b", or CIDRs'
    )

    def validate(self) -> list[str]:
        problems = []
        if not self.name:
            problems.append("name: required")
        elif not is_dns_label(self.name):
            problems.append(f'name: "{self.name}" is not a DNS label (a-z, 0-9, "-", <= 63)')
        if not self.cidr:
            problems.append("cidr: required")
            return problems
        try:
            self.pool()
        except ValueError as exc:
            problems.append(f"cidr: {exc}")
        return problems

    def pool(self) -> Pool:
        """The network's address pool.

        Raises:
            ValueError: the CIDR, gateway or an exclusion is invalid.
        """
        return Pool.build(self.name, self.cidr, self.gateway, self.exclude)


@dataclass(frozen=True, kw_only=True, slots=True)
class PodPortConfig:
    """Logical ports (IP + MAC) for pods, recorded as LogicalPort objects."""

    networks: tuple[Network, ...] = _f(
        (Network(name="default", cidr="10.16.0.0/16", gateway="10.16.0.1"),),
        "the networks addresses come from",
    )
    default_network: str = _f(
        "default", "network of pods without an overseer.io/network annotation"
    )
    mac_prefix: str = _f(
        "0a:58", "MAC prefix, 1-3 octets, locally administered; the address fills the rest"
    )
    namespaces: tuple[str, ...] = _f((), "only pods in these namespaces ([] = every namespace)")
    label_selector: str = _f("", 'only pods matching this label selector ("" = every pod)')
    gc_interval: float = _f(300.0, "seconds between sweeps for ports whose pod is gone", min=1.0)
    install_crd: bool = _f(False, "create the LogicalPort CRD at start-up if it is missing")

    def validate(self) -> list[str]:
        problems = []
        if not self.networks:
            problems.append("networks: at least one network is required")
        names = [n.name for n in self.networks]
        for dup in sorted({n for n in names if names.count(n) > 1}):
            problems.append(f'networks: network "{dup}" is defined more than once')
        if self.networks and self.default_network not in names:
            problems.append(f'defaultNetwork: "{self.default_network}" is not one of the networks')
        try:
            parse_mac_prefix(self.mac_prefix)
        except ValueError as exc:
            problems.append(f"macPrefix: {exc}")
        for i, ns in enumerate(self.namespaces):
            if not is_dns_label(ns):
                problems.append(f'namespaces[{i}]: "{ns}" is not a namespace name')
        if self.label_selector:
            try:
                LabelSelector.parse(self.label_selector)
            except ValueError as exc:
                problems.append(f"labelSelector: {exc}")
        return problems

    def pools(self) -> dict[str, Pool]:
        """Every network's pool by name (the config must be valid)."""
        return {n.name: n.pool() for n in self.networks}

    def selector(self) -> LabelSelector | None:
        """The parsed label selector, or None for every pod."""
        return LabelSelector.parse(self.label_selector) if self.label_selector else None
