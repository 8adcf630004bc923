"""ResourceQuota: usage accounting, scopes, quota admission and the quota controller.

What kube keeps in two places, here in one module:

* the evaluators of ``pkg/quota/v1/evaluator/core`` (pods, services, persistent volume
  claims, the legacy object counts) and the generic ``count/<resource>.<group>`` one: what
  an object uses, and whether a quota's scopes (``Terminating``, ``NotTerminating``,
  ``BestEffort``, ``NotBestEffort``, ``PriorityClass``) select it;
* quota admission (``plugin/pkg/admission/resourcequota``, :func:`admit`): a create
  that would take a matching quota over its ``status.hard`` is refused with kube's 403
  (``exceeded quota: ...``), as is one whose quota has no usage yet (``status unknown
  for quota``) or a pod that does not name the compute resources a quota limits
  (``must specify ...``); an admitted create is charged to the quota's ``status.used``
  in the same step;
* kube-controller-manager's resource quota controller (:class:`QuotaController`):
  ``status.hard`` follows ``spec.hard`` and ``status.used`` is recounted when a quota is
  created or its ``spec.hard`` changes, when something it counts is deleted or changes
  what it uses (replenishment), and on a full resync every ``sync_period`` seconds.

Quantities are read and written as ``resource.Quantity`` does (:mod:`apiserver.api.quantity`:
canonical form ``500m``, ``1536Mi``, ``2k``); a sum keeps the format of its first non-zero
term.

Not evaluated (nothing here makes them): the ``CrossNamespacePodAffinity`` scope, quota
on updates (pod resize, a Service changing type, a claim growing) and the admission
configuration's limited resources.

Thread-safety: :func:`admit` runs under the storage lock (from ``Rest.create``); the
controller queues namespaces from the commit listener and recounts on its own thread.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from apiserver.api.quantity import ZERO, Quantity, QuantityError, from_json
from apiserver.machinery.admission import Refused
from apiserver.storage.store import Event

if TYPE_CHECKING:
    from apiserver.api.resources import ServedResource
    from apiserver.machinery.rest import Rest

__all__ = [
    "QuotaController",
    "admit",
    "usage",
]

logger = logging.getLogger(__name__)

JsonDict = dict[str, Any]
Usage = dict[str, Quantity]

QUOTAS: Final = "/resourcequotas"
DEFAULT_SYNC_PERIOD: Final = 300.0  # --resource-quota-sync-period
_CONTROLLER: Final = "kube-controller-manager"
_ADMISSION: Final = "kube-apiserver"

_ZERO: Final = ZERO
_ONE: Final = Quantity.of(1)


def _add(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> Usage:
    """``quota.Add``: a zero term takes the other's format."""
    out = dict(a)
    for key, value in b.items():
        mine = out.get(key)
        out[key] = value if mine is None else mine + value
    return out


def _read(resources: Any) -> Usage:
    out: Usage = {}
    if isinstance(resources, dict):
        for key, text in resources.items():
            try:
                out[str(key)] = from_json(text)
            except QuantityError:
                continue  # validation refuses it; nothing to count
    return out


def _pretty(amounts: Mapping[str, Quantity]) -> str:
    return ",".join(f"{k}={amounts[k]}" for k in sorted(amounts))


# --- what an object uses ----------------------------------------------------------------

_COMPUTE: Final = ("cpu", "memory", "ephemeral-storage")
_LEGACY_COUNTS: Final = {
    "/configmaps": "configmaps",
    "/secrets": "secrets",
    "/replicationcontrollers": "replicationcontrollers",
    "/resourcequotas": "resourcequotas",
    "/services": "services",
    "/persistentvolumeclaims": "persistentvolumeclaims",
}
_POD_SCOPES: Final = frozenset(
    {"Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass"}
)
_CONSTRAINED: Final = frozenset(
    {"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"}
)


def _count_name(resource_key: str) -> str:
    group, _, plural = resource_key.partition("/")
    return f"count/{plural}.{group}" if group else f"count/{plural}"


def _extended(name: str) -> bool:
    """``IsExtendedResourceName``: a domain-qualified name outside kubernetes.io."""
    domain = name.split("/", 1)[0] if "/" in name else ""
    return bool(domain) and not domain.endswith("kubernetes.io")


def _compute_usage(requests: Usage, limits: Usage) -> Usage:
    """``podComputeUsageHelper``: the quota names a pod's (or container's) resources
    count against."""
    out: Usage = {"pods": _ONE}
    for name in _COMPUTE:
        if name in requests:
            out[name] = requests[name]
            out[f"requests.{name}"] = requests[name]
        if name in limits:
            out[f"limits.{name}"] = limits[name]
    for name, amount in requests.items():
        if name.startswith("hugepages-"):
            out[name] = amount
            out[f"requests.{name}"] = amount
        elif _extended(name):
            out[f"requests.{name}"] = amount
    return out


def _containers(pod: JsonDict, kind: str) -> list[JsonDict]:
    return [c for c in (pod.get("spec") or {}).get(kind) or [] if isinstance(c, dict)]


def _pod_resources(pod: JsonDict, which: str) -> Usage:
    """``resourcehelper.PodRequests``/``PodLimits``: the containers' sum, at least what
    any init container needs (with the sidecars started before it), plus overhead."""
    total: Usage = {}
    for c in _containers(pod, "containers"):
        total = _add(total, _read((c.get("resources") or {}).get(which)))
    sidecars: Usage = {}
    peak: Usage = {}
    for c in _containers(pod, "initContainers"):
        own = _read((c.get("resources") or {}).get(which))
        if c.get("restartPolicy") == "Always":
            sidecars = _add(sidecars, own)
            continue
        for name, amount in _add(sidecars, own).items():
            if name not in peak or amount > peak[name]:
                peak[name] = amount
    total = _add(total, sidecars)
    for name, amount in peak.items():
        if name not in total or amount > total[name]:
            total[name] = amount
    return _add(total, _read((pod.get("spec") or {}).get("overhead")))


def _pod_counts(pod: JsonDict, now: dt.datetime) -> bool:
    """``QuotaV1Pod``: not terminal, and not past its deletion grace period."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    meta = pod.get("metadata") or {}
    deleted, grace = meta.get("deletionTimestamp"), meta.get("deletionGracePeriodSeconds")
    if deleted and grace is not None:
        at = dt.datetime.fromisoformat(str(deleted).replace("Z", "+00:00"))
        if now > at + dt.timedelta(seconds=int(grace)):
            return False
    return True


def usage(resource_key: str, obj: JsonDict, now: dt.datetime | None = None) -> Usage:
    """Everything ``obj`` (stored under ``resource_key``, ``group/plural``) counts for."""
    out: Usage = {_count_name(resource_key): _ONE}
    legacy = _LEGACY_COUNTS.get(resource_key)
    if legacy:
        out[legacy] = _ONE
    spec = obj.get("spec") or {}
    if resource_key == "/pods":
        if _pod_counts(obj, now or dt.datetime.now(dt.UTC)):
            requests, limits = _pod_resources(obj, "requests"), _pod_resources(obj, "limits")
            out.update(_compute_usage(requests, limits))
    elif resource_key == "/services":
        kind = spec.get("type") or "ClusterIP"
        ports = [p for p in spec.get("ports") or [] if isinstance(p, dict)]
        out["services.loadbalancers"] = _ZERO
        out["services.nodeports"] = _ZERO
        if kind == "LoadBalancer":
            out["services.loadbalancers"] = _ONE
            if spec.get("allocateLoadBalancerNodePorts") is False:  # only explicit ones
                ports = [p for p in ports if p.get("nodePort")]
            out["services.nodeports"] = Quantity.of(len(ports))
        elif kind == "NodePort":
            out["services.nodeports"] = Quantity.of(len(ports))
    elif resource_key == "/persistentvolumeclaims":
        storage = _read((spec.get("resources") or {}).get("requests")).get("storage")
        klass = spec.get("storageClassName")
        if klass:
            out[f"{klass}.storageclass.storage.k8s.io/persistentvolumeclaims"] = _ONE
        if storage is not None:
            out["requests.storage"] = storage
            if klass:
                out[f"{klass}.storageclass.storage.k8s.io/requests.storage"] = storage
    return out


def _tracked(resource_key: str, name: str) -> bool:
    """``MatchingResources``: whether the evaluator of ``resource_key`` counts ``name``."""
    if name == _count_name(resource_key) or name == _LEGACY_COUNTS.get(resource_key):
        return True
    if resource_key == "/pods":
        return name in ("pods", *_COMPUTE) or (
            name.startswith(("requests.", "limits.", "hugepages-"))
            and not name.startswith("requests.storage")
        )
    if resource_key == "/services":
        return name in ("services.loadbalancers", "services.nodeports")
    if resource_key == "/persistentvolumeclaims":
        return name == "requests.storage" or name.endswith(
            (
                ".storageclass.storage.k8s.io/requests.storage",
                ".storageclass.storage.k8s.io/persistentvolumeclaims",
            )
        )
    return False


# --- scopes -----------------------------------------------------------------------------


def _selectors(quota: JsonDict) -> list[JsonDict]:
    """``getScopeSelectorsFromQuota``: ``spec.scopes`` as Exists requirements, then the
    scope selector's expressions."""
    spec = quota.get("spec") or {}
    out = [{"scopeName": s, "operator": "Exists"} for s in spec.get("scopes") or []]
    out += [e for e in (spec.get("scopeSelector") or {}).get("matchExpressions") or []]
    return out


def _best_effort(pod: JsonDict) -> bool:
    """``qos.GetPodQOS`` is BestEffort: no container asks for or limits cpu or memory."""
    for c in _containers(pod, "containers") + _containers(pod, "initContainers"):
        resources = c.get("resources") or {}
        for which in ("requests", "limits"):
            amounts = _read(resources.get(which))
            if any(amounts.get(n, _ZERO).sign() != 0 for n in ("cpu", "memory")):
                return False
    return True


def _scope_matches(selector: JsonDict, resource_key: str, obj: JsonDict) -> bool:
    if resource_key != "/pods":
        return False  # MatchesNoScopeFunc: only pods have scopes
    spec = obj.get("spec") or {}
    scope = selector.get("scopeName")
    deadline = spec.get("activeDeadlineSeconds")
    terminating = isinstance(deadline, int) and deadline >= 0
    if scope == "Terminating":
        return terminating
    if scope == "NotTerminating":
        return not terminating
    if scope == "BestEffort":
        return _best_effort(obj)
    if scope == "NotBestEffort":
        return not _best_effort(obj)
    if scope == "PriorityClass":
        klass = spec.get("priorityClassName") or ""
        op, values = selector.get("operator"), selector.get("values") or []
        if op == "Exists":
            return bool(klass)
        if op == "DoesNotExist":
            return not klass
        if op == "In":
            return klass in values
        if op == "NotIn":
            return klass not in values
    return False


def _matches(quota: JsonDict, resource_key: str, obj: JsonDict) -> bool:
    return all(_scope_matches(s, resource_key, obj) for s in _selectors(quota))


# --- admission --------------------------------------------------------------------------


class QuotaRefused(Refused):
    """A create quota admission refuses (kube: 403 Forbidden, the reason in the text)."""


def _missing_requests(pod: JsonDict, required: set[str]) -> str:
    """``podEvaluator.Constraints``: the cpu/memory names a quota limits that some
    container does not set, ``must specify ...``; "" when none."""
    wanted = required & _CONSTRAINED
    missing: dict[str, set[str]] = {}
    for c in _containers(pod, "containers") + _containers(pod, "initContainers"):
        resources = c.get("resources") or {}
        own = _compute_usage(_read(resources.get("requests")), _read(resources.get("limits")))
        for name in wanted - set(own):
            missing.setdefault(name, set()).add(str(c.get("name") or ""))
    if not missing:
        return ""
    parts = [f"{name} for: {','.join(sorted(missing[name]))}" for name in sorted(missing)]
    return "must specify " + "; ".join(parts)


def admit(rest: Rest, served: ServedResource, namespace: str, obj: JsonDict, dry_run: bool) -> None:
    """Quota admission of a create (call with the storage lock held).

    Raises:
        QuotaRefused: with kube's message (the caller answers 403).
    """
    quotas = rest.storage.list(QUOTAS, namespace)
    if not quotas:
        return
    resource_key = served.key
    charged: list[tuple[JsonDict, Usage]] = []
    delta: Usage | None = None
    for quota in quotas:
        status = quota.get("status") or {}
        hard = _read(status.get("hard"))
        restricted = {name for name in hard if _tracked(resource_key, name)}
        if not restricted or not _matches(quota, resource_key, obj):
            continue
        name = quota["metadata"]["name"]
        if resource_key == "/pods":
            problem = _missing_requests(obj, restricted)
            if problem:
                raise QuotaRefused(f"failed quota: {name}: {problem}")
        used = _read(status.get("used"))
        if any(r not in used for r in restricted):
            raise QuotaRefused(
                f"status unknown for quota: {name}, resources: {','.join(sorted(restricted))}"
            )
        if delta is None:
            delta = usage(resource_key, obj)
        # every name the quota limits and the object uses, zero ones included: a quota
        # already over a limit (lowered since) refuses even a create that adds nothing
        requested = {k: v for k, v in delta.items() if k in hard}
        new_used = _add(used, requested)
        exceeded = sorted(k for k in requested if new_used[k] > hard[k])
        if exceeded:
            raise QuotaRefused(
                f"exceeded quota: {name}, "
                f"requested: {_pretty({k: requested[k] for k in exceeded})}, "
                f"used: {_pretty({k: used[k] for k in exceeded if k in used})}, "
                f"limited: {_pretty({k: hard[k] for k in exceeded})}"
            )
        charged.append((quota, new_used))
    if dry_run:
        return
    for quota, new_used in charged:
        _write_status(
            rest, quota, (quota.get("status") or {}).get("hard") or {}, new_used, _ADMISSION
        )


def _write_status(rest: Rest, quota: JsonDict, hard: Any, used: Usage, manager: str) -> None:
    served = rest.registry.lookup("", "v1", "resourcequotas")
    if served is None:
        return
    meta = quota["metadata"]
    body = {
        **quota,
        "status": {"hard": dict(hard), "used": {k: str(v) for k, v in used.items()}},
    }
    rest.update(
        served, meta.get("namespace"), meta["name"], body, subresource="status", manager=manager
    )


# --- the controller ---------------------------------------------------------------------


def _same(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> bool:
    return set(a) == set(b) and all(a[k] == b[k] for k in a)


class QuotaController:
    """kube-controller-manager's resource quota controller, for the local server."""

    def __init__(self, rest: Rest, sync_period: float = DEFAULT_SYNC_PERIOD) -> None:
        if sync_period <= 0:
            raise ValueError(f"quota sync_period must be > 0 seconds, got {sync_period}")
        self._rest = rest
        self._storage = rest.storage
        self.sync_period = sync_period
        self._cond = threading.Condition()
        self._pending: set[str] = set()
        self._stopped = False
        self._thread: threading.Thread | None = None
        self._storage.add_listener(self._on_commit)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="local-apiserver/quota")
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _on_commit(self, event: Event) -> None:
        """Which writes need a recount (called with the storage lock held)."""
        resource_key, namespace = event.key[0], event.key[1]
        if not namespace or not self._storage.list(QUOTAS, namespace):
            return
        if resource_key == QUOTAS:
            hard = ((event.object.get("spec") or {}).get("hard")) or {}
            before = ((event.prev or {}).get("spec") or {}).get("hard") if event.prev else None
            if event.type == "DELETED" or (event.prev is not None and before == hard):
                return
        elif event.type != "DELETED":
            if event.prev is None or resource_key not in (
                "/pods",
                "/services",
                "/persistentvolumeclaims",
            ):
                return  # a create was charged by admission
            if usage(resource_key, event.prev) == usage(resource_key, event.object):
                return
        with self._cond:
            self._pending.add(namespace)
            self._cond.notify()

    def _run(self) -> None:
        next_resync = time.monotonic() + self.sync_period
        while True:
            with self._cond:
                while not self._pending and not self._stopped:
                    if not self._cond.wait(max(0.0, next_resync - time.monotonic())):
                        break
                if self._stopped:
                    return
                namespaces = sorted(self._pending)
                self._pending.clear()
            if time.monotonic() >= next_resync:
                next_resync = time.monotonic() + self.sync_period
                namespaces = sorted({q[1] for q in self._quota_keys()} | set(namespaces))
            for namespace in namespaces:
                try:
                    with self._storage.lock:
                        self.sync(namespace)
                except Exception:
                    logger.exception("quota sync failed", extra={"namespace": namespace})

    def _quota_keys(self) -> Iterable[tuple[str, str]]:
        for quota in self._storage.list(QUOTAS):
            meta = quota.get("metadata") or {}
            yield str(meta.get("name")), str(meta.get("namespace"))

    def sync(self, namespace: str) -> None:
        """``syncResourceQuota`` for every quota of ``namespace`` (storage lock held)."""
        now = dt.datetime.now(dt.UTC)
        for quota in self._storage.list(QUOTAS, namespace):
            spec_hard = (quota.get("spec") or {}).get("hard") or {}
            status = quota.get("status") or {}
            hard = _read(spec_hard)
            used = {k: v for k, v in _read(status.get("used")).items() if k in hard}
            counted: Usage = {}
            for resource_key in self._resource_keys(hard):
                names = {n for n in hard if _tracked(resource_key, n)}
                measured: Usage = dict.fromkeys(names, _ZERO)
                for obj in self._storage.list(resource_key, namespace):
                    if _matches(quota, resource_key, obj):
                        own = usage(resource_key, obj, now)
                        measured = _add(measured, {k: v for k, v in own.items() if k in names})
                counted = _add(counted, measured)
            used.update(counted)
            dirty = (
                status.get("hard") != spec_hard
                or "used" not in status
                or not _same(used, _read(status.get("used")))
            )
            if dirty:
                _write_status(self._rest, quota, spec_hard, used, _CONTROLLER)

    def _resource_keys(self, hard: Mapping[str, Quantity]) -> list[str]:
        """The stored resources whose evaluators count a name of ``hard``."""
        keys = {"/pods", "/services", "/persistentvolumeclaims", *_LEGACY_COUNTS}
        for served in self._rest.registry:
            keys.add(served.key)
        return sorted(k for k in keys if any(_tracked(k, n) for n in hard))
