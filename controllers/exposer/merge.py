"""Merging the desired Service/Ingress into the observed one, field by field.

The exposer owns some fields of the objects it creates and no others. An update starts
from a copy of the observed object (so everything the API server or other controllers
set survives: ``clusterIP``/``clusterIPs``, ``nodePort`` values, ``status``, foreign
labels and annotations, ``metadata.resourceVersion`` for optimistic concurrency) and
overwrites only the owned fields:

* both: the ``app.kubernetes.io/managed-by`` label;
* Service: ``spec.type``, ``spec.selector``, ``spec.ports`` (name, port, targetPort,
  protocol; an allocated ``nodePort`` is carried over while the type keeps node ports);
* Ingress: ``spec.rules``, ``spec.tls``, ``spec.ingressClassName`` (only when configured:
  otherwise the cluster's default-class admission may set it), ``overseer.io/exposed-url``,
  and the annotations listed in ``overseer.io/managed-annotations``.

Each function returns ``None`` when the owned fields already match (no write), else an
:class:`Update` with the body to PUT and the names of the fields that changed.

Thread-safe: pure functions; inputs are never mutated (cached objects are shared). The
body starts as a copy of the object's top level, ``metadata`` and ``spec`` only: every
owned field is replaced by a new value, never edited in place, so deeper structures
(``status``, managed fields, untouched spec fields) are shared with the observed object
instead of deep-copied on every reconcile (most reconciles change nothing).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controllers.exposer.desired import (
    ANNOTATION_MANAGED_ANNOTATIONS,
    LABEL_MANAGED_BY,
    MANAGED_BY,
)
from manager import JsonDict

__all__ = ["Update", "controller_uid", "ingress_update", "service_update"]

_NODE_PORT_TYPES = ("NodePort", "LoadBalancer")


@dataclass(frozen=True, slots=True)
class Update:
    """A write to make: the full object to PUT, and what changed (for the Event)."""

    body: JsonDict
    changes: tuple[str, ...]


def controller_uid(obj: Mapping[str, Any]) -> str | None:
    """The uid of the object's controller owner (ownerReference with controller=true)."""
    meta = obj.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid") or "") or None
    return None


def earlier_incarnation(obj: Mapping[str, Any], owner_name: str, owner_uid: str) -> bool:
    """Whether ``obj`` is controlled by another incarnation of the Deployment
    ``owner_name`` (same name, another uid): one deleted and created again. Its object is
    not someone else's: it goes with its owner (the garbage collector), then the name is
    the new incarnation's."""
    meta = obj.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller"):
            return (
                ref.get("kind") == "Deployment"
                and ref.get("name") == owner_name
                and str(ref.get("uid") or "") != owner_uid
            )
    return False


def _labels_update(body: JsonDict, changes: list[str]) -> None:
    meta = body.setdefault("metadata", {})
    labels = meta.get("labels") or {}
    if labels.get(LABEL_MANAGED_BY) != MANAGED_BY:
        meta["labels"] = {**labels, LABEL_MANAGED_BY: MANAGED_BY}
        changes.append("labels")


def _port_key(port: Mapping[str, Any]) -> tuple[str, int, Any, str]:
    number = port.get("port")
    target = port.get("targetPort")
    return (
        str(port.get("name") or ""),
        int(number) if isinstance(number, int) else -1,
        number if target in (None, 0, "") else target,
        str(port.get("protocol") or "TCP"),
    )


def _working_copy(observed: JsonDict) -> JsonDict:
    """``observed`` copied down to ``metadata`` and ``spec`` (see the module docstring)."""
    body = dict(observed)
    body["metadata"] = dict(observed.get("metadata") or {})
    body["spec"] = dict(observed.get("spec") or {})
    return body


def service_update(observed: JsonDict, desired: JsonDict) -> Update | None:
    """The PUT that brings ``observed`` to ``desired`` on the exposer's fields, or None."""
    body = _working_copy(observed)
    changes: list[str] = []
    _labels_update(body, changes)
    spec = body.setdefault("spec", {})
    want = desired["spec"]
    if (spec.get("type") or "ClusterIP") != want["type"]:
        spec["type"] = want["type"]
        changes.append("type")
    if (spec.get("selector") or {}) != want["selector"]:
        spec["selector"] = dict(want["selector"])
        changes.append("selector")
    have_ports = spec.get("ports") or []
    if [_port_key(p) for p in have_ports] != [_port_key(p) for p in want["ports"]]:
        spec["ports"] = _ports_keeping_node_ports(have_ports, want["ports"], want["type"])
        changes.append("ports")
    elif want["type"] not in _NODE_PORT_TYPES and any(p.get("nodePort") for p in have_ports):
        spec["ports"] = [{k: v for k, v in p.items() if k != "nodePort"} for p in have_ports]
        changes.append("ports")
    if not changes:
        return None
    return Update(body, tuple(changes))


def _ports_keeping_node_ports(
    have: list[JsonDict], want: list[JsonDict], service_type: str
) -> list[JsonDict]:
    out = [dict(p) for p in want]
    if service_type not in _NODE_PORT_TYPES:
        return out
    by_name = {str(p["name"]): p for p in have if p.get("name") and p.get("nodePort")}
    by_port = {
        (p.get("port"), p.get("protocol") or "TCP"): p
        for p in have
        if not p.get("name") and p.get("nodePort")
    }
    for p in out:
        old = by_name.get(str(p.get("name") or "")) or by_port.get((p["port"], p["protocol"]))
        if old is not None:
            p["nodePort"] = old["nodePort"]
    return out


def ingress_update(observed: JsonDict, desired: JsonDict) -> Update | None:
    """The PUT that brings ``observed`` to ``desired`` on the exposer's fields, or None."""
    body = _working_copy(observed)
    changes: list[str] = []
    _labels_update(body, changes)
    _annotations_update(body, desired, changes)
    spec = body.setdefault("spec", {})
    want = desired["spec"]
    if "ingressClassName" in want and spec.get("ingressClassName") != want["ingressClassName"]:
        spec["ingressClassName"] = want["ingressClassName"]
        changes.append("ingressClassName")
    if (spec.get("rules") or []) != want["rules"]:
        spec["rules"] = copy.deepcopy(want["rules"])
        changes.append("rules")
    if (spec.get("tls") or []) != (want.get("tls") or []):
        if want.get("tls"):
            spec["tls"] = copy.deepcopy(want["tls"])
        else:
            spec.pop("tls", None)
        changes.append("tls")
    if not changes:
        return None
    return Update(body, tuple(changes))


def _annotations_update(body: JsonDict, desired: JsonDict, changes: list[str]) -> None:
    meta = body.setdefault("metadata", {})
    have: dict[str, Any] = dict(meta.get("annotations") or {})
    want: dict[str, Any] = dict((desired.get("metadata") or {}).get("annotations") or {})
    before = dict(have)
    managed = str(have.get(ANNOTATION_MANAGED_ANNOTATIONS) or "")
    for key in filter(None, managed.split(",")):
        if key not in want:
            have.pop(key, None)
    if ANNOTATION_MANAGED_ANNOTATIONS not in want:
        have.pop(ANNOTATION_MANAGED_ANNOTATIONS, None)
    have.update(want)
    if have != before:
        if have:
            meta["annotations"] = have
        else:
            meta.pop("annotations", None)
        changes.append("annotations")
