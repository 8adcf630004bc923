"""The podport reconciler: one pod (by namespace/name) → at most one LogicalPort.

Level-based (DESIGN.md §2, §4.2). For the pod named by the request it reads the pod and
the LogicalPorts that name it from the caches and converges:

1. Ports that name this pod but carry another pod UID belong to an earlier pod of the
   same name: deleted (precondition: the port's own UID, so a port re-created meanwhile
   under the same name is never hit).
2. No pod, or a pod that wants no port (hostNetwork, ``overseer.io/skip-port: "true"``,
   outside the configured namespaces or label selector): its ports are deleted. A
   skip-port value other than "true"/"false" (any case) changes nothing: a Warning
   ``InvalidAnnotation`` (Event and log), like the exposer's ``expose: yes``. A port
   is only deleted for a missing pod once the pod is known gone: either its deletion
   came through the pod informer, or a live GET says so (a replica whose pod cache lags
   must not delete the port another replica just made for a new pod).
3. A pod with ports keeps the lowest (two replicas that both led briefly may have made
   two; both pick the same one and delete the others), its annotations are corrected,
   and the port's ``nodeName`` follows the pod's.
4. A pod without a port gets one: network from ``overseer.io/network`` (a configured
   network, else a Warning ``InvalidNetwork`` and no port) or the default; the allocator
   proposes the lowest free address; the LogicalPort named after network and address is
   CREATEd — AlreadyExists means someone holds it, so the next address is tried; then
   the pod is annotated with a merge patch carrying the pod's UID as precondition.
   No Event is posted for a successful allocation (the result is on the pod and the
   LogicalPort; an Event per pod would double the writes of a pod burst).
   An exhausted network gives a Warning ``NoFreeAddress`` and a rate-limited requeue;
   the pod is also woken as soon as a port of that network is deleted.

What one allocation costs the API server: one LogicalPort create and one pod patch.
The pod is written at most once per allocation: its annotations are patched only when
they differ from the cached pod, and not again while the pod cache still shows the
version the last patch was made from (the reconciles woken by the watch events of our own
LogicalPort create and pod patch would otherwise patch it a second time from a stale
cache). DESIGN.md §4.2 keeps the annotations on by default: a CNI or a pod's own code
reads them there, and a pod watch is what such consumers have.

Thread-safe: called from several workers at once (never twice at once for one pod);
state lives in the caches, the thread-safe allocator and a locked map of pending patches.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Final

from controllers.podport.allocator import Allocator, port_network_ip
from controllers.podport.config import PodPortConfig
from controllers.podport.crd import LOGICAL_PORTS
from controllers.podport.ipam import mac_for, parse_mac_prefix, port_name
from manager import (
    NORMAL,
    WARNING,
    AlreadyExists,
    Conflict,
    DeletedFinalStateUnknown,
    EventRecorder,
    Invalid,
    JsonDict,
    KubeClient,
    LabelSelector,
    NotFound,
    OutcomeUnknown,
    Request,
    Result,
    SharedInformer,
    builtin,
)

__all__ = [
    "ANNOTATION_IP",
    "ANNOTATION_MAC",
    "ANNOTATION_NETWORK",
    "ANNOTATION_PORT",
    "ANNOTATION_SKIP",
    "PODS",
    "POD_BY_UID",
    "PORT_BY_POD",
    "PORT_BY_POD_UID",
    "DeletedPods",
    "PodPortReconciler",
    "Scope",
    "index_pod_uid",
    "index_port_pod",
    "index_port_pod_uid",
    "skip_port",
]

logger = logging.getLogger(__name__)

PODS: Final = builtin("v1", "pods")

ANNOTATION_PORT: Final = "overseer.io/logical-port"
ANNOTATION_IP: Final = "overseer.io/ip"
ANNOTATION_MAC: Final = "overseer.io/mac"
ANNOTATION_NETWORK: Final = "overseer.io/network"
ANNOTATION_SKIP: Final = "overseer.io/skip-port"
LABEL_NETWORK: Final = "network.overseer.io/network"

POD_BY_UID: Final = "podport/uid"
PORT_BY_POD: Final = "podport/pod"
PORT_BY_POD_UID: Final = "podport/pod-uid"

MAX_CREATE_ATTEMPTS: Final = 32  # AlreadyExists answers tolerated in one reconcile
PATCH_PENDING_TTL: Final = 60.0  # seconds a pod patch may take to reach the pod cache
CACHE_CATCH_UP: Final = 1.0  # seconds: requeue when the live pod is newer than the cache


def index_pod_uid(obj: JsonDict) -> list[str]:
    """Pod index function: the pod's UID."""
    uid = (obj.get("metadata") or {}).get("uid")
    return [str(uid)] if uid else []


def index_port_pod(obj: JsonDict) -> list[str]:
    """LogicalPort index function: the ``namespace/name`` of its pod."""
    spec = obj.get("spec") or {}
    ns, name = spec.get("podNamespace"), spec.get("podName")
    return [f"{ns}/{name}"] if ns and name else []


def index_port_pod_uid(obj: JsonDict) -> list[str]:
    """LogicalPort index function: the UID of its pod."""
    uid = (obj.get("spec") or {}).get("podUID")
    return [str(uid)] if uid else []


class Scope:
    """Which pods get ports: namespaces, label selector, hostNetwork, opt-out."""

    def __init__(self, config: PodPortConfig, manager_namespace: str | None) -> None:
        self._namespaces = frozenset(config.namespaces)
        self._manager_namespace = manager_namespace
        self._selector: LabelSelector | None = config.selector()
        self.networks = frozenset(n.name for n in config.networks)

    def namespace(self, namespace: str) -> bool:
        """Pods of ``namespace`` are seen by this controller (and only then judged)."""
        if self._manager_namespace and namespace != self._manager_namespace:
            return False
        return not self._namespaces or namespace in self._namespaces

    def wants_port(self, pod: JsonDict) -> bool:
        """The pod should have a port (ignoring whether its network is valid)."""
        meta = pod.get("metadata") or {}
        if not self.namespace(str(meta.get("namespace") or "")):
            return False
        if (pod.get("spec") or {}).get("hostNetwork"):
            return False
        with contextlib.suppress(ValueError):  # invalid: reconcile warns and changes nothing
            if skip_port(pod):
                return False
        return self._selector is None or self._selector.matches(meta.get("labels") or {})

    def port(self, port: JsonDict) -> bool:
        """The port is ours to manage: a configured network, a pod namespace we watch."""
        network, _ = port_network_ip(port)
        ns = str((port.get("spec") or {}).get("podNamespace") or "")
        return network in self.networks and bool(ns) and self.namespace(ns)


class DeletedPods:
    """Pod informer handler remembering the UIDs of deleted pods for ``ttl`` seconds, so
    that releasing their ports needs no live GET to prove them gone."""

    def __init__(self, ttl: float = 600.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._uids: dict[str, float] = {}

    def on_add(self, obj: JsonDict, is_in_initial_list: bool) -> None:
        pass

    def on_update(self, old: JsonDict, new: JsonDict) -> None:
        pass

    def on_delete(self, obj: JsonDict | DeletedFinalStateUnknown) -> None:
        state = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        uid = (state.get("metadata") or {}).get("uid")
        if not uid:
            return
        now = self._clock()
        with self._lock:
            self._uids[str(uid)] = now + self._ttl
            if len(self._uids) % 1024 == 0:
                self._uids = {u: d for u, d in self._uids.items() if d > now}

    def __contains__(self, uid: object) -> bool:
        with self._lock:
            deadline = self._uids.get(str(uid))
        return deadline is not None and deadline > self._clock()


def skip_port(pod: JsonDict) -> bool:
    """Whether ``overseer.io/skip-port`` opts the pod out ("true"/"false", any case).

    Raises:
        ValueError: any other value (the message names the annotation and the value).
    """
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_SKIP)
    if value is None:
        return False
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ValueError(f'{ANNOTATION_SKIP}: expected "true" or "false", got {str(value)[:64]!r}')


def _meta(obj: JsonDict) -> JsonDict:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _ip_key(port: JsonDict) -> tuple[int, str]:
    import ipaddress

    _, ip = port_network_ip(port)
    try:
        value = int(ipaddress.ip_address(ip))
    except ValueError:
        value = -1
    return value, str(_meta(port).get("name") or "")


def pod_ref(pod: JsonDict) -> JsonDict:
    """The pod as an Event's involved object (cached pods carry no kind/apiVersion)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": _meta(pod)}


class PodPortReconciler:
    """Gives every pod in scope exactly one LogicalPort (see the module docstring)."""

    def __init__(
        self,
        client: KubeClient,
        config: PodPortConfig,
        *,
        scope: Scope,
        pods: SharedInformer,
        ports: SharedInformer,
        allocator: Allocator,
        recorder: EventRecorder,
        deleted_pods: DeletedPods,
    ) -> None:
        self._client = client
        self._config = config
        self._scope = scope
        self._pods = pods.indexer
        self._ports = ports.indexer
        self._allocator = allocator
        self._recorder = recorder
        self._deleted = deleted_pods
        self._mac_prefix = parse_mac_prefix(config.mac_prefix)
        self._clock = time.monotonic
        # pod uid -> (resourceVersion the last annotation patch was made from, when)
        self._patched_lock = threading.Lock()
        self._patched: dict[str, tuple[str, float]] = {}

    # -- reconcile ---------------------------------------------------------------------

    def reconcile(self, request: Request) -> Result:
        if not self._scope.namespace(request.namespace):
            return Result()
        pod = self._pods.get_by_key(request.key)
        ports = [p for p in self._ports.by_index(PORT_BY_POD, request.key) if self._scope.port(p)]
        uid = str(_meta(pod).get("uid") or "") if pod is not None else ""
        foreign = [p for p in ports if (p.get("spec") or {}).get("podUID") != uid]
        if foreign and not self._release_foreign(request, foreign):
            return Result(requeue_after=CACHE_CATCH_UP)
        if pod is None:
            self._allocator.unwait(request)
            return Result()
        mine = [p for p in ports if (p.get("spec") or {}).get("podUID") == uid]
        if not mine:
            pending = self._allocator.pending_port(uid)
            if pending is not None:
                mine = [pending]
        try:
            skip_port(pod)
        except ValueError as exc:
            # neither opt-out nor opt-in: change nothing until it says (like expose: yes)
            self._allocator.unwait(request)
            self._event(pod, WARNING, "InvalidAnnotation", f"{exc}; port left as it is")
            logger.warning("invalid annotation", extra={"pod": request.key, "error": str(exc)})
            return Result()
        if not self._scope.wants_port(pod):
            self._allocator.unwait(request)
            for port in mine:
                self._delete_port(port)
                self._allocator.forget_pending(uid)
                self._event(pod, NORMAL, "PortReleased", f"released {self._describe(port)}")
            if mine:
                self._annotate(pod, None)
            return Result()
        if mine:
            return self._keep(pod, mine)
        if _meta(pod).get("deletionTimestamp"):
            return Result()  # terminating: no new address for it
        return self._allocate(request, pod)

    # -- release -----------------------------------------------------------------------

    def _release_foreign(self, request: Request, ports: list[JsonDict]) -> bool:
        """Delete ports that name this pod's name but not the cached pod's UID, once their
        pod is known gone. False if a port's pod still exists (the cache lags)."""
        live: JsonDict | None = None
        looked = False
        ok = True
        for port in ports:
            pod_uid = str((port.get("spec") or {}).get("podUID") or "")
            if pod_uid not in self._deleted:
                if not looked:
                    live = self._live_pod(request)
                    looked = True
                if live is not None and str(_meta(live).get("uid") or "") == pod_uid:
                    ok = False  # the port's pod is alive; our pod cache is behind
                    continue
            self._delete_port(port)
            self._allocator.forget_pending(pod_uid)
            logger.info(
                "released the port of a deleted pod", extra={"port": _meta(port).get("name")}
            )
        return ok

    def _live_pod(self, request: Request) -> JsonDict | None:
        try:
            return self._client.get(PODS, request.name, request.namespace)
        except NotFound:
            return None

    def _delete_port(self, port: JsonDict) -> None:
        meta = _meta(port)
        try:
            self._client.delete(
                LOGICAL_PORTS, str(meta["name"]), preconditions={"uid": meta.get("uid")}
            )
        except NotFound:
            pass  # already gone
        except Conflict:
            pass  # a new port of the same name (same address, another pod): not ours

    # -- keep --------------------------------------------------------------------------

    def _keep(self, pod: JsonDict, ports: list[JsonDict]) -> Result:
        wanted = (_meta(pod).get("annotations") or {}).get(ANNOTATION_NETWORK)
        ordered = sorted(ports, key=lambda p: (port_network_ip(p)[0] != wanted, _ip_key(p)))
        keep, extra = ordered[0], ordered[1:]
        for port in extra:
            if not _meta(port).get("uid"):
                continue  # a pending port we created: the cache will bring it back
            self._delete_port(port)
            self._event(pod, NORMAL, "PortReleased", f"released duplicate {self._describe(port)}")
        self._annotate(pod, keep)
        node = (pod.get("spec") or {}).get("nodeName") or ""
        spec = keep.get("spec") or {}
        if node and spec.get("nodeName") != node and _meta(keep).get("uid"):
            try:
                self._client.patch(
                    LOGICAL_PORTS,
                    str(_meta(keep)["name"]),
                    {"metadata": {"uid": _meta(keep)["uid"]}, "spec": {"nodeName": node}},
                )
            except (NotFound, Conflict, Invalid):  # Invalid: the name holds another uid
                return Result(requeue_after=CACHE_CATCH_UP)
        return Result()

    # -- allocate ----------------------------------------------------------------------

    def _allocate(self, request: Request, pod: JsonDict) -> Result:
        meta = _meta(pod)
        network = (meta.get("annotations") or {}).get(ANNOTATION_NETWORK) or (
            self._config.default_network
        )
        pool = self._allocator.pools.get(str(network))
        if pool is None:
            self._allocator.unwait(request)
            message = (
                f"{ANNOTATION_NETWORK}: {str(network)[:64]!r} is not a configured network "
                f"(known: {', '.join(sorted(self._allocator.pools))}); no port allocated"
            )
            self._event(pod, WARNING, "InvalidNetwork", message)
            logger.warning("invalid annotation", extra={"pod": request.key, "error": message})
            return Result()
        uid = str(meta["uid"])
        for _ in range(MAX_CREATE_ATTEMPTS):
            offset = self._allocator.reserve(pool.name)
            if offset is None:
                self._allocator.wait(pool.name, request)
                self._event(
                    pod,
                    WARNING,
                    "NoFreeAddress",
                    f"network {pool.name} ({pool.network}) has no free address; waiting",
                )
                return Result(requeue=True)
            ip = pool.address(offset)
            body: JsonDict = {
                "apiVersion": LOGICAL_PORTS.api_version,
                "kind": LOGICAL_PORTS.kind,
                "metadata": {
                    "name": port_name(pool.name, ip),
                    "labels": {LABEL_NETWORK: pool.name},
                },
                "spec": {
                    "network": pool.name,
                    "ip": str(ip),
                    "mac": mac_for(ip, self._mac_prefix),
                    "podNamespace": request.namespace,
                    "podName": request.name,
                    "podUID": uid,
                    "nodeName": str((pod.get("spec") or {}).get("nodeName") or ""),
                },
            }
            try:
                port = self._client.create(LOGICAL_PORTS, body)
            except AlreadyExists:
                # Someone holds the address — or this pod does: an earlier create whose
                # answer was lost (OutcomeUnknown) was applied, and the cache has not
                # brought it yet. Then it is this pod's port, not a reason for a second.
                mine = self._own_port(body, uid)
                if mine is None:
                    self._allocator.taken(pool.name, offset)
                    continue
                port = mine
            except OutcomeUnknown:
                # sent, unanswered: applied or not, only a read tells
                mine = self._own_port(body, uid)
                if mine is None:
                    self._allocator.release(pool.name, offset)
                    raise
                port = mine
            except BaseException:
                self._allocator.release(pool.name, offset)
                raise
            self._allocator.created(pool.name, offset, uid, port)
            if not self._annotate(pod, port):
                return Result(requeue_after=CACHE_CATCH_UP)
            logger.debug("port allocated", extra={"port": _meta(port).get("name")})
            return Result()
        logger.warning("every address tried was taken; retrying", extra={"network": pool.name})
        return Result(requeue=True)

    def _own_port(self, body: JsonDict, uid: str) -> JsonDict | None:
        """The LogicalPort ``body`` names, read from the API server, if it exists and is
        the pod ``uid``'s (created by an earlier attempt whose answer was lost)."""
        try:
            port = self._client.get(LOGICAL_PORTS, body["metadata"]["name"])
        except NotFound:
            return None
        if str((port.get("spec") or {}).get("podUID") or "") != uid:
            return None
        logger.info(
            "adopting this pod's port whose create answer was lost",
            extra={"port": _meta(port).get("name"), "pod_uid": uid},
        )
        return port

    # -- pod annotations ---------------------------------------------------------------

    def _annotate(self, pod: JsonDict, port: JsonDict | None) -> bool:
        """Make the pod's annotations describe ``port`` (None: remove them). False if the
        pod is gone or was replaced."""
        meta = _meta(pod)
        if self._patch_pending(pod):
            return True  # our last patch is not in the pod cache yet
        current = meta.get("annotations") or {}
        if port is None:
            want: dict[str, str | None] = {
                ANNOTATION_PORT: None,
                ANNOTATION_IP: None,
                ANNOTATION_MAC: None,
            }
        else:
            spec = port.get("spec") or {}
            want = {
                ANNOTATION_PORT: str(_meta(port).get("name") or ""),
                ANNOTATION_IP: str(spec.get("ip") or ""),
                ANNOTATION_MAC: str(spec.get("mac") or ""),
                ANNOTATION_NETWORK: str(spec.get("network") or ""),
            }
        changes = {k: v for k, v in want.items() if current.get(k) != v}
        if not changes:
            return True
        try:
            self._client.patch(
                PODS,
                str(meta["name"]),
                {"metadata": {"uid": meta.get("uid"), "annotations": changes}},
                namespace=str(meta["namespace"]),
            )
        except (NotFound, Conflict, Invalid):
            # gone, or a pod of the same name is another pod now: kube-apiserver refuses a
            # patch that names another uid (422, metadata.uid immutable)
            return False
        self._patched_from(pod)
        return True

    def _patch_pending(self, pod: JsonDict) -> bool:
        """Whether the cached ``pod`` is still the version our last patch was made from."""
        meta = _meta(pod)
        uid = str(meta.get("uid") or "")
        with self._patched_lock:
            pending = self._patched.get(uid)
            if pending is None:
                return False
            version, at = pending
            if version == str(meta.get("resourceVersion") or "") and (
                self._clock() - at < PATCH_PENDING_TTL
            ):
                return True
            del self._patched[uid]  # the cache has moved on: the patch is in (or lost)
            return False

    def _patched_from(self, pod: JsonDict) -> None:
        meta = _meta(pod)
        now = self._clock()
        with self._patched_lock:
            self._patched[str(meta.get("uid") or "")] = (
                str(meta.get("resourceVersion") or ""),
                now,
            )
            if len(self._patched) > 4096:  # pods deleted before their patch was seen
                self._patched = {
                    u: p for u, p in self._patched.items() if now - p[1] < PATCH_PENDING_TTL
                }

    # -- helpers -----------------------------------------------------------------------

    def _event(self, pod: JsonDict, type_: str, reason: str, message: str) -> None:
        self._recorder.event(pod_ref(pod), type_, reason, message)

    @staticmethod
    def _describe(port: JsonDict) -> str:
        spec = port.get("spec") or {}
        return (
            f"{spec.get('ip')} (MAC {spec.get('mac')}) on network {spec.get('network')}, "
            f"LogicalPort {_meta(port).get('name')}"
        )


def requests_for_port(scope: Scope) -> Callable[[JsonDict], Iterable[Request]]:
    """Map a LogicalPort event to its pod's request (ports we do not manage: none)."""

    def requests(port: JsonDict) -> Iterable[Request]:
        if not scope.port(port):
            return ()
        spec = port.get("spec") or {}
        return (Request(str(spec["podNamespace"]), str(spec.get("podName") or "")),)

    return requests
