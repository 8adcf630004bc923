"""The exposer's reconciler: one Deployment in, its Service and Ingress converged.

Level-based (DESIGN.md §2, §4.1): a request names a Deployment; the reconciler reads the
Deployment, the Service and the Ingress of the same name from the informer caches,
computes the desired objects (:mod:`controllers.exposer.desired`) and writes only the
difference to the API server. It never depends on which event woke it, keeps no state
that a restart would need (the cache is rebuilt by listing), and every write is safe
against a concurrent writer — another replica that briefly believes it leads, a user, a
stale cache:

* create: the API server refuses a second object of the same name. ``AlreadyExists`` →
  the object is read back and treated as the observed one (owned by this Deployment:
  converge it; anything else: ``ExposeConflict``, nothing written). A create whose
  answer was lost (``OutcomeUnknown``: the client never sends it again) fails the
  reconcile; the requeued one finds the object or creates it, and an object found then
  counts as created by this exposer (the first-exposure Event is told once).
* update: a PUT of the observed object with only the exposer's fields changed
  (:mod:`controllers.exposer.merge`), carrying the observed ``resourceVersion``; a 409
  requeues the request (with backoff) to be recomputed from a fresher cache. Server-set
  fields (``clusterIP``, node ports) are never touched; nothing is deleted and recreated.
* delete (opt-in removed): with ``uid`` and ``resourceVersion`` preconditions, only
  objects whose controller ownerReference is this Deployment.
* the URL: an annotation ``overseer.io/exposed-url`` on the Ingress (written anyway, so it
  costs nothing) and the first-exposure ``Exposed`` Event. The Deployment itself is not
  written by default (DESIGN.md §4.1: a write to the watched object wakes every Deployment
  watcher in the cluster, kube-controller-manager included). With ``annotateDeployment``
  the same annotation is merge-patched onto the Deployment (its ``metadata.uid`` in the
  patch: kube-apiserver refuses it, 422, if the name is another Deployment now) when it
  differs; without it, such an annotation left on a Deployment is removed once.

Writes per newly exposed Deployment with the default settings: a Service create, an
Ingress create and the ``Exposed`` Event (``exposedEvent: false`` drops the Event).

A create refused because the namespace is being terminated (403, cause
``NamespaceTerminating``) ends the reconcile without a retry: the namespace's deletion
removes the Deployment too. It is logged at debug, counted in
``overseer_exposer_namespace_terminating_total``, and the Deployment (by uid) is left
alone from then on, so each Deployment costs at most one refused create however its
namespace is emptied.

Outcomes for a Deployment in scope:

==============================  ===================================================
opted in, valid                 Service + Ingress ensured (URL on the Ingress); Normal
                                ``Exposed`` (the Ingress was created) or ``Updated``
opted out / opt-in removed      owned Service + Ingress deleted, URL removed from
                                the Deployment if there;
                                Normal ``Unexposed`` if something was deleted
invalid (annotation, selector,  Warning (``InvalidExposeAnnotation``,
no ports, name)                 ``UnsupportedSelector``, ``NoContainerPorts``,
                                ``UnsupportedName``); nothing written: objects from
                                the last valid state are kept as they are
name taken by an object this    Warning ``ExposeConflict``; nothing written
Deployment does not control
name taken by an object of an   nothing written; retried every second until the
earlier incarnation (the same   garbage collector removed it (a name deleted and
Deployment name, another uid)   created again: not someone else's object)
Deployment gone or deleting     nothing: the API server's garbage collector deletes
                                the owned objects (ownerReference)
namespace terminating (a        nothing more for this Deployment: the namespace's
create was refused)             deletion removes it
==============================  ===================================================

Deployments outside the configured namespaces are left alone entirely.

Thread-safe: the controller calls ``reconcile`` from several workers, never twice at once
for one Deployment; shared state (expectations, the exposed set) is locked.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, Literal

from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from controllers.exposer.config import ExposerConfig
from controllers.exposer.desired import (
    ANNOTATION_URL,
    LABEL_MANAGED_BY,
    MANAGED_BY,
    NotExposable,
    desired_exposure,
    opted_in,
)
from controllers.exposer.expectations import Expectations, ObjectKey
from controllers.exposer.merge import (
    Update,
    controller_uid,
    earlier_incarnation,
    ingress_update,
    service_update,
)
from manager import (
    NORMAL,
    REGISTRY,
    WARNING,
    AlreadyExists,
    Conflict,
    ControllerMetrics,
    EventRecorder,
    Invalid,
    JsonDict,
    KubeClient,
    Lister,
    NamespaceTerminating,
    NotFound,
    OutcomeUnknown,
    Request,
    Resource,
    Result,
    builtin,
)

__all__ = [
    "DEPLOYMENTS",
    "EXPOSED_DEPLOYMENTS",
    "EXPOSER_METRICS",
    "INGRESSES",
    "NAMESPACE_TERMINATING",
    "REASON_CONFLICT",
    "REASON_EXPOSED",
    "REASON_UNEXPOSED",
    "REASON_UPDATED",
    "SERVICES",
    "ExposedDeployments",
    "ExposerReconciler",
]

logger = logging.getLogger(__name__)

DEPLOYMENTS: Final = builtin("apps/v1", "deployments")
SERVICES: Final = builtin("v1", "services")
INGRESSES: Final = builtin("networking.k8s.io/v1", "ingresses")

REASON_EXPOSED: Final = "Exposed"
REASON_UPDATED: Final = "Updated"
REASON_UNEXPOSED: Final = "Unexposed"
REASON_CONFLICT: Final = "ExposeConflict"
EARLIER_INCARNATION_RETRY: Final = 1.0  # seconds between looks at an earlier incarnation's objects


class ExposedDeployments(Collector):
    """``overseer_exposer_exposed_deployments``: the Deployments the running exposers
    expose (owned Service and Ingress in place), computed at scrape from the reconcilers
    attached. Unlabelled for an exposer of one cluster; with a fleet-wide one (a reconciler
    per cluster), one sample per cluster, label ``cluster``.

    Thread-safe: attachments are guarded by a lock."""

    NAME: Final = "overseer_exposer_exposed_deployments"
    HELP: Final = "Deployments the exposer currently exposes (owned Service and Ingress in place)."

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._attached: list[tuple[str, ExposerReconciler]] = []

    def attach(self, reconciler: ExposerReconciler, cluster: str = "") -> None:
        with self._lock:
            self._attached.append((cluster, reconciler))

    def detach(self, reconciler: ExposerReconciler) -> None:
        with self._lock:
            self._attached = [(c, r) for c, r in self._attached if r is not reconciler]

    def runnable(self, name: str, reconciler: ExposerReconciler) -> _Attached:
        """A runnable that keeps ``reconciler`` counted while the manager runs it."""
        return _Attached(name, self, reconciler)

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(self.NAME, self.HELP)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            attached = list(self._attached)
        by_cluster: dict[str, int] = {}
        for cluster, reconciler in attached:
            by_cluster[cluster] = by_cluster.get(cluster, 0) + len(reconciler.exposed)
        if set(by_cluster) <= {""}:
            yield GaugeMetricFamily(self.NAME, self.HELP, value=float(by_cluster.get("", 0)))
            return
        family = GaugeMetricFamily(self.NAME, self.HELP, labels=["cluster"])
        for cluster, count in sorted(by_cluster.items()):
            family.add_metric([cluster], float(count))
        yield family


class _Attached:
    """Keeps one reconciler counted while the manager runs."""

    def __init__(self, name: str, metric: ExposedDeployments, reconciler: ExposerReconciler):
        self.name = name
        self._metric = metric
        self._reconciler = reconciler

    def run(self, stop: threading.Event) -> None:
        self._metric.attach(self._reconciler)
        try:
            stop.wait()
        finally:
            self._metric.detach(self._reconciler)


EXPOSED_DEPLOYMENTS: Final = ExposedDeployments()

NAMESPACE_TERMINATING = Counter(
    "overseer_exposer_namespace_terminating",
    "Creates refused because the namespace is being terminated; the Deployment is not retried.",
    registry=None,
)
# exported only while an exposer runs (the plugin's setup adds the runnable)
EXPOSER_METRICS: Final = ControllerMetrics([EXPOSED_DEPLOYMENTS, NAMESPACE_TERMINATING])
REGISTRY.register(EXPOSER_METRICS)

_Outcome = Literal["created", "updated", "unchanged", "pending"]


class _EarlierIncarnation(Exception):
    """The name is taken by the object of an earlier incarnation of this Deployment (the
    same name, deleted and created again): it is not ours to touch, and goes with its
    owner; the caller waits."""


class _Foreign(Exception):
    """The name is taken by an object this Deployment does not control. ``labelled``: one
    of them carries the exposer's own label (someone copied it), which hides it from a
    sharded exposer's watch of foreign objects (only unlabelled ones are watched)."""

    def __init__(self, what: str, *, labelled: bool = False) -> None:
        super().__init__(what)
        self.what = what
        self.labelled = labelled


def _either(first: Lister, second: Lister | None, name: str, namespace: str) -> JsonDict | None:
    found = first.get(name, namespace)
    return found if found is not None or second is None else second.get(name, namespace)


def _labelled(obj: Mapping[str, Any] | None) -> bool:
    labels = _meta(obj).get("labels") if obj is not None else None
    return isinstance(labels, Mapping) and labels.get(LABEL_MANAGED_BY) == MANAGED_BY


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


class ExposerReconciler:
    """Converges one Deployment's Service and Ingress (and, if configured, its URL
    annotation).

    Args:
        client: where writes go.
        deployments, services, ingresses: listers over the manager's caches.
        recorder: Events on the Deployment.
        config: the exposer's settings.
        expectations: pending writes (default: a fresh :class:`Expectations`).
        foreign_services, foreign_ingresses: sharded, the caches of the objects the
            exposer did not make (``services`` and ``ingresses`` then hold this replica's
            share of those it made); a name is looked up in both.
        labelled_foreign_retry: seconds after which a conflict with a foreign object that
            carries the exposer's label is looked at again; set when the watch of foreign
            objects selects unlabelled ones only (sharded), else None (the watch tells).
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        deployments: Lister,
        services: Lister,
        ingresses: Lister,
        recorder: EventRecorder,
        config: ExposerConfig,
        expectations: Expectations | None = None,
        foreign_services: Lister | None = None,
        foreign_ingresses: Lister | None = None,
        labelled_foreign_retry: float | None = None,
    ) -> None:
        self._client = client
        self._foreign_services = foreign_services
        self._foreign_ingresses = foreign_ingresses
        self._labelled_foreign_retry = labelled_foreign_retry
        self._deployments = deployments
        self._services = services
        self._ingresses = ingresses
        self._recorder = recorder
        self._config = config
        self._expectations = expectations if expectations is not None else Expectations()
        self._exposed_lock = threading.Lock()
        self._exposed: set[str] = set()
        # namespace/name -> uid of Deployments whose namespace refused a create
        self._terminating_lock = threading.Lock()
        self._terminating: dict[str, str] = {}
        # objects whose create's answer was lost (OutcomeUnknown): found later, they were
        # created by this exposer, and the first exposure is told then
        self._lost_lock = threading.Lock()
        self._lost: set[ObjectKey] = set()

    def close(self) -> None:
        """This reconciler's cluster left the fleet (its keys have stopped): it is no
        longer counted in ``overseer_exposer_exposed_deployments``."""
        EXPOSED_DEPLOYMENTS.detach(self)

    @property
    def exposed(self) -> frozenset[str]:
        """``namespace/name`` of the Deployments exposed as of their last reconcile."""
        with self._exposed_lock:
            return frozenset(self._exposed)

    def reconcile(self, request: Request) -> Result:
        """Converge the Deployment ``request`` names (see the module docstring)."""
        try:
            return self._reconcile(request)
        except Conflict as exc:
            # A concurrent writer (or our stale cache): recompute from a fresher cache.
            logger.info("write conflict, requeued", extra={"error": str(exc)})
            return Result(requeue=True)

    # -- the cases -----------------------------------------------------------------------

    def _reconcile(self, request: Request) -> Result:
        namespace, name = request.namespace, request.name
        if not self._config.namespaces.selects(namespace):
            self._set_exposed(request.key, False)
            return Result()
        deployment = self._deployments.get(name, namespace)
        if deployment is None or _meta(deployment).get("deletionTimestamp"):
            # Owned objects carry an ownerReference: the garbage collector removes them.
            self._set_exposed(request.key, False)
            for resource in (SERVICES, INGRESSES, DEPLOYMENTS):
                self._expectations.forget((resource.plural, namespace, name))
                with self._lost_lock:
                    self._lost.discard((resource.plural, namespace, name))
            self._forget_terminating(request.key)
            return Result()
        uid = str(_meta(deployment).get("uid") or "")
        if self._in_terminating_namespace(request.key, uid):
            return Result()  # refused once already: its namespace is going away
        service = _either(self._services, self._foreign_services, name, namespace)
        ingress = _either(self._ingresses, self._foreign_ingresses, name, namespace)
        try:
            if not opted_in(deployment, self._config):
                return self._unexpose(request, deployment, uid, service, ingress)
            exposure = desired_exposure(deployment, self._config)
        except NotExposable as exc:
            # Keep what the last valid state produced; tell the user what to fix.
            self._recorder.event(deployment, WARNING, exc.reason, exc.message)
            logger.warning("not exposable", extra={"reason": exc.reason, "detail": exc.message})
            kept = all(o is not None and controller_uid(o) == uid for o in (service, ingress))
            self._set_exposed(request.key, kept)
            return Result()
        if any(
            obj is not None and earlier_incarnation(obj, name, uid) for obj in (service, ingress)
        ):
            return self._wait_for_earlier_incarnation(request)
        foreign = [
            (f"{kind} {name}", obj)
            for kind, obj in (("Service", service), ("Ingress", ingress))
            if obj is not None and controller_uid(obj) != uid
        ]
        try:
            if foreign:
                raise _Foreign(
                    " and ".join(what for what, _ in foreign),
                    labelled=any(_labelled(obj) for _, obj in foreign),
                )
            svc_outcome, svc_changes = self._ensure(
                SERVICES, service, exposure.service, uid, service_update
            )
            ing_outcome, ing_changes = self._ensure(
                INGRESSES, ingress, exposure.ingress, uid, ingress_update
            )
        except _Foreign as exc:
            self._recorder.event(
                deployment,
                WARNING,
                REASON_CONFLICT,
                f"{exc.what} already exist(s) and {'is' if ' and ' not in exc.what else 'are'} "
                "not controlled by this Deployment: left untouched, not exposed",
            )
            logger.info("name conflict", extra={"objects": exc.what})
            self._set_exposed(request.key, False)
            if exc.labelled and self._labelled_foreign_retry is not None:
                # no watch tells when it goes: look again
                return Result(requeue_after=self._labelled_foreign_retry)
            return Result()
        except _EarlierIncarnation:
            return self._wait_for_earlier_incarnation(request)
        except NamespaceTerminating as exc:
            self._note_terminating(request.key, uid, exc)
            return Result()
        previous_url = (_meta(deployment).get("annotations") or {}).get(ANNOTATION_URL)
        wanted_url = exposure.url if self._config.annotate_deployment else None
        if previous_url != wanted_url:
            self._patch_url(deployment, wanted_url)
        self._set_exposed(request.key, True)
        self._announce(
            deployment,
            exposure.url,
            first=ing_outcome == "created",
            outcomes=(("Service", svc_outcome, svc_changes), ("Ingress", ing_outcome, ing_changes)),
        )
        return Result()

    def _unexpose(
        self,
        request: Request,
        deployment: JsonDict,
        uid: str,
        service: JsonDict | None,
        ingress: JsonDict | None,
    ) -> Result:
        deleted = []
        for resource, kind, obj in (
            (INGRESSES, "Ingress", ingress),
            (SERVICES, "Service", service),
        ):
            if obj is None or controller_uid(obj) != uid:
                continue
            meta = _meta(obj)
            try:
                self._client.delete(
                    resource,
                    request.name,
                    request.namespace,
                    preconditions={
                        "uid": meta.get("uid"),
                        "resourceVersion": meta.get("resourceVersion"),
                    },
                )
            except NotFound:
                continue
            deleted.append(f"{kind} {request.name}")
        if ANNOTATION_URL in (_meta(deployment).get("annotations") or {}):
            self._patch_url(deployment, None)
        self._set_exposed(request.key, False)
        if deleted:
            self._recorder.event(
                deployment, NORMAL, REASON_UNEXPOSED, f"Deleted {' and '.join(deleted)}"
            )
            logger.info("unexposed", extra={"deleted": deleted})
        return Result()

    # -- writes --------------------------------------------------------------------------

    def _ensure(
        self,
        resource: Resource,
        observed: JsonDict | None,
        desired: JsonDict,
        uid: str,
        merge: Callable[[JsonDict, JsonDict], Update | None],
    ) -> tuple[_Outcome, tuple[str, ...]]:
        """Create ``desired`` or bring ``observed`` in line with it.

        Raises:
            _Foreign: the name belongs to an object this Deployment does not control.
            Conflict: an update lost a race; the caller requeues.
        """
        meta = desired["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        key: ObjectKey = (resource.plural, namespace, name)
        pending = self._expectations.pending(key, observed)
        if pending == "update":
            return "pending", ()  # the cache still shows what we replaced; its event follows
        if observed is None:
            if pending == "create":
                # Created by us and not cached yet — or created and deleted since: ask.
                self._expectations.forget(key)
                observed = self._get(resource, name, namespace)
            if observed is None:
                try:
                    created = self._client.create(resource, desired, namespace=namespace)
                except OutcomeUnknown:
                    # Applied or not: the requeued reconcile finds out (cache or
                    # AlreadyExists). If it finds it, this create made it: say "created".
                    with self._lost_lock:
                        self._lost.add(key)
                    raise
                except AlreadyExists:
                    observed = self._get(resource, name, namespace)
                    if observed is None:
                        raise Conflict(
                            f"{resource.plural} {namespace}/{name} was created and deleted "
                            "by someone else meanwhile",
                            reason="Conflict",
                        ) from None
                else:
                    self._expectations.created(key, created)
                    return "created", ()
            if earlier_incarnation(observed, str(self._owner_name(desired)), uid):
                raise _EarlierIncarnation(f"{resource.kind} {name}")
            if controller_uid(observed) != uid:
                raise _Foreign(f"{resource.kind} {name}", labelled=_labelled(observed))
        with self._lost_lock:
            made_here = key in self._lost  # by a create of ours whose answer was lost
            self._lost.discard(key)
        update = merge(observed, desired)
        if update is None:
            return ("created" if made_here else "unchanged"), ()
        try:
            self._client.replace(resource, update.body, namespace=namespace)
        except NotFound:
            return "pending", ()  # deleted meanwhile: its delete event wakes us again
        self._expectations.updated(key, observed)
        return ("created" if made_here else "updated"), update.changes

    @staticmethod
    def _owner_name(desired: JsonDict) -> str:
        refs = desired["metadata"].get("ownerReferences") or [{}]
        return str(refs[0].get("name") or "")

    def _wait_for_earlier_incarnation(self, request: Request) -> Result:
        """A Deployment deleted and created again under this name: the earlier one's
        Service or Ingress is still there (the garbage collector removes it; with sharding
        by uid its events reach the replica of the earlier uid, not this one). Try again
        shortly, without a Warning: it is no one else's object."""
        logger.info("waiting for an earlier incarnation's objects to go")
        self._set_exposed(request.key, False)
        return Result(requeue_after=EARLIER_INCARNATION_RETRY)

    def _get(self, resource: Resource, name: str, namespace: str) -> JsonDict | None:
        try:
            return self._client.get(resource, name, namespace)
        except NotFound:
            return None

    def _patch_url(self, deployment: JsonDict, url: str | None) -> None:
        """Set (or, with None, remove) ``overseer.io/exposed-url`` on the Deployment."""
        meta = _meta(deployment)
        key: ObjectKey = (DEPLOYMENTS.plural, str(meta["namespace"]), str(meta["name"]))
        if self._expectations.pending(key, deployment) == "update":
            return  # our last patch is not in the cache yet
        patch = {"metadata": {"uid": meta.get("uid"), "annotations": {ANNOTATION_URL: url}}}
        try:
            self._client.patch(
                DEPLOYMENTS, str(meta["name"]), patch, namespace=str(meta["namespace"])
            )
        except (NotFound, Invalid):
            # deleted, or another incarnation of the name now: the patch names the uid, and
            # kube-apiserver refuses a patch to another uid (422, metadata.uid immutable);
            # the new one's own reconcile annotates it
            return
        self._expectations.updated(key, deployment)

    # -- reporting -----------------------------------------------------------------------

    def _announce(
        self,
        deployment: JsonDict,
        url: str,
        *,
        first: bool,
        outcomes: tuple[tuple[str, _Outcome, tuple[str, ...]], ...],
    ) -> None:
        name = _meta(deployment).get("name")
        created = [kind for kind, outcome, _ in outcomes if outcome == "created"]
        updated = [
            f"{kind} {name} ({', '.join(changes)})"
            for kind, outcome, changes in outcomes
            if outcome == "updated"
        ]
        if first:
            message = f"Exposed at {url}: created {' and '.join(created)} {name}"
            if updated:
                message += f"; updated {'; '.join(updated)}"
            if self._config.exposed_event:
                self._recorder.event(deployment, NORMAL, REASON_EXPOSED, message)
            logger.info("exposed", extra={"url": url, "objects_created": created})
        elif created or updated:
            parts = [f"recreated {kind} {name}" for kind in created]
            parts += [f"updated {u}" for u in updated]
            self._recorder.event(deployment, NORMAL, REASON_UPDATED, "; ".join(parts))
            logger.info("exposure updated", extra={"url": url, "changes": parts})

    # -- terminating namespaces ----------------------------------------------------------

    def _note_terminating(self, key: str, uid: str, exc: NamespaceTerminating) -> None:
        with self._terminating_lock:
            self._terminating[key] = uid
        NAMESPACE_TERMINATING.inc()
        logger.debug(
            "namespace is being terminated: create refused, not retried",
            extra={"error": str(exc)},
        )

    def _in_terminating_namespace(self, key: str, uid: str) -> bool:
        with self._terminating_lock:
            return self._terminating.get(key) == uid

    def _forget_terminating(self, key: str) -> None:
        with self._terminating_lock:
            self._terminating.pop(key, None)

    def _set_exposed(self, key: str, exposed: bool) -> None:
        with self._exposed_lock:
            if exposed:
                self._exposed.add(key)
            else:
                self._exposed.discard(key)
