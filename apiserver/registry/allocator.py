"""Service cluster IPs and node ports: the allocators behind kube's Service registry.

kube-apiserver hands every Service a cluster IP from its service range and every
``NodePort``/``LoadBalancer`` port a node port from 30000-32767; a requested IP or
port outside the range, or one another Service holds, is refused (422 on
``spec.clusterIPs`` / ``spec.ports[i].nodePort``). A PUT that omits what was allocated
keeps it; a Service that turns into a ``NodePort`` gets its ports.

What is allocated is read from the stored Services, so nothing is kept only in memory
and a deleted Service frees what it held.

Thread-safety: call under the storage lock (allocation reads and the write that follows
must not interleave with another write).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any, Final

from apiserver.api.field import AdmissionError, Cause, str_list

__all__ = ["NODE_PORTS", "SERVICE_RANGE", "ServiceAllocator"]

SERVICE_RANGE: Final = ipaddress.ip_network("10.96.0.0/12")
NODE_PORTS: Final = range(30000, 32768)

JsonDict = dict[str, Any]


def _spec(svc: Mapping[str, Any] | None) -> Mapping[str, Any]:
    spec = (svc or {}).get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _needs_node_ports(spec: Mapping[str, Any]) -> bool:
    stype = spec.get("type") or "ClusterIP"
    if stype == "NodePort":
        return True
    return stype == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is not False


class ServiceAllocator:
    """Cluster IPs and node ports over the Services stored so far."""

    def __init__(self, services: Any) -> None:
        """``services()`` returns every stored Service (all namespaces)."""
        self._services = services
        self._next_ip = 10

    def _used(self, skip: tuple[str, str] | None) -> tuple[set[str], set[int]]:
        ips: set[str] = set()
        ports: set[int] = set()
        for svc in self._services():
            meta = svc.get("metadata") or {}
            if (
                skip is not None
                and (str(meta.get("namespace") or ""), str(meta.get("name") or "")) == skip
            ):
                continue
            spec = _spec(svc)
            ips.update(str(ip) for ip in spec.get("clusterIPs") or [] if ip and ip != "None")
            if spec.get("clusterIP") and spec["clusterIP"] != "None":
                ips.add(str(spec["clusterIP"]))
            for port in spec.get("ports") or []:
                if isinstance(port, Mapping) and isinstance(port.get("nodePort"), int):
                    ports.add(port["nodePort"])
        return ips, ports

    def next_ip(self) -> str:
        """A free cluster IP (the defaulting hook of a new Service)."""
        ips, _ = self._used(None)
        hosts = SERVICE_RANGE.num_addresses - 2
        for _ in range(hosts):
            n = self._next_ip
            self._next_ip = self._next_ip + 1 if self._next_ip < hosts else 1
            candidate = str(SERVICE_RANGE.network_address + n)
            if candidate not in ips:
                return candidate
        raise AdmissionError(
            "Service", "", "", [], status=500, reason="InternalError", message="range is full"
        )

    def admit(self, svc: JsonDict, old: Mapping[str, Any] | None, requested: Iterable[str]) -> None:
        """Check requested IPs and node ports, allocate missing node ports (in place).

        Args:
            svc: the defaulted Service about to be stored.
            old: the stored Service on an update (None on create).
            requested: cluster IPs the client asked for (not allocated by the server).

        Raises:
            AdmissionError: 422 for an IP out of range or in use, a node port in use.
        """
        meta = svc.get("metadata") or {}
        name = str(meta.get("name") or "")
        me = (str(meta.get("namespace") or ""), name)
        used_ips, used_ports = self._used(me)
        spec = svc.get("spec")
        if not isinstance(spec, dict):
            return
        old_spec = _spec(old)
        for ip in requested:
            if ip in (old_spec.get("clusterIPs") or []):
                continue
            problem = None
            try:
                address = ipaddress.ip_address(ip)
            except ValueError:
                continue  # validation reports it
            if address not in SERVICE_RANGE:
                problem = "the provided network does not match the current range"
            elif ip in used_ips:
                problem = "provided IP is already allocated"
            if problem is not None:
                shown = str_list(spec.get("clusterIPs") or [ip]).text
                message = f"failed to allocate IP {ip}: {problem}"
                raise AdmissionError(
                    "Service",
                    "",
                    name,
                    [
                        Cause(
                            "FieldValueInvalid",
                            f"Invalid value: {shown}: {message}",
                            "spec.clusterIPs",
                        )
                    ],
                )
        ports = spec.get("ports")
        if not isinstance(ports, list):
            return
        if not _needs_node_ports(spec):
            return
        old_ports = [p for p in old_spec.get("ports") or [] if isinstance(p, Mapping)]
        taken = set(used_ports)
        causes: list[Cause] = []
        for i, port in enumerate(ports):
            if not isinstance(port, dict):
                continue
            wanted = port.get("nodePort")
            if not wanted:
                # patchAllocatedValues: by port name, unless another port now uses it.
                kept = next(
                    (
                        o.get("nodePort")
                        for o in old_ports
                        if o.get("nodePort") and (o.get("name") or "") == (port.get("name") or "")
                    ),
                    None,
                )
                asked = {p.get("nodePort") for p in ports if isinstance(p, dict)}
                if kept and kept not in asked:
                    port["nodePort"] = kept
                    taken.add(int(kept))
                    continue
                free = next((p for p in NODE_PORTS if p not in taken), None)
                if free is None:
                    raise AdmissionError(
                        "Service",
                        "",
                        name,
                        [],
                        status=500,
                        reason="InternalError",
                        message="range is full",
                    )
                port["nodePort"] = free
                taken.add(free)
                continue
            if not isinstance(wanted, int) or wanted not in NODE_PORTS:
                continue  # validation reports the range
            mine = any(o.get("nodePort") == wanted for o in old_ports)
            if wanted in taken and not mine:
                causes.append(
                    Cause(
                        "FieldValueInvalid",
                        f"Invalid value: {wanted}: provided port is already allocated",
                        f"spec.ports[{i}].nodePort",
                    )
                )
            taken.add(wanted)
        if causes:
            raise AdmissionError("Service", "", name, causes)
