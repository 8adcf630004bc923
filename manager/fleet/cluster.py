"""One cluster a controller reads and writes: its name, client, caches and Event recorder
(controller-runtime's ``cluster.Cluster``, as multicluster-runtime hands it to ``Engage``).

:class:`Cluster` is the seam. Two kinds stand behind it:

* the home cluster (:class:`HomeCluster`): the manager's own client, informers and
  recorder — what a controller that is not fleet-wide uses, and what a fleet reaches when
  it engages the home cluster as a member;
* a member of the fleet (:class:`MemberCluster`): a client of its own (its kubeconfig's
  server and credentials; its own connection pool and client-side rate limiter), an
  informer factory of its own (informers named ``... cluster=<name>``, so metrics and
  threads of two clusters differ), an Event sender of its own (Events go to the cluster
  of the object they are about).

Every client is fenced like the manager's (:mod:`manager.fencing`): a write made by
leader-only work asks the leader fence, whose Lease lives in the home cluster, whichever
cluster the write goes to; a write outside any fence context falls back to it.

Thread-safe: every method may be called from any thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from manager.cache.factory import InformerFactory
from manager.cache.informer import SharedInformer
from manager.cache.lister import Lister
from manager.cache.sharded import LIST_PAGE
from manager.cache.store import IndexFunc
from manager.client import KubeClient
from manager.events import EventBroadcaster, EventRecorder
from manager.resources import Resource

if TYPE_CHECKING:
    from manager.manager import Manager

__all__ = ["Cluster", "HomeCluster", "MemberCluster"]

logger = logging.getLogger(__name__)


class Cluster(Protocol):
    """A cluster to read and write: what a fleet-wide controller's reconciler factory is
    given for each engaged cluster, and what :meth:`Manager.cluster
    <manager.manager.Manager.cluster>` returns.

    Objects read through its listers are the cached ones (shared, read-only); writes go
    through :attr:`client`, fenced like the manager's.
    """

    @property
    def name(self) -> str:
        """The cluster's name in the fleet ("" for the manager's own cluster when it is
        not a member)."""
        ...

    @property
    def client(self) -> KubeClient:
        """The cluster's API client (writes fenced like the manager's)."""
        ...

    def informer(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
    ) -> SharedInformer:
        """The cluster's shared informer of this scope (started at once once the
        cluster's caches run)."""
        ...

    def lister(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Lister:
        """A lister of the cluster's informer of this scope: the same cache a fleet-wide
        controller's ``for_``/``owns``/``watches`` of that scope fill in this cluster."""
        ...

    def recorder(self, component: str | None = None) -> EventRecorder:
        """An Event recorder whose Events are written to this cluster."""
        ...


class HomeCluster:
    """The manager's own cluster, as a :class:`Cluster` named ``name``: its client,
    informers, listers and recorder are the manager's."""

    def __init__(self, mgr: Manager, name: str = "") -> None:
        self._mgr = mgr
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    @property
    def client(self) -> KubeClient:
        return self._mgr.client

    def informer(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
    ) -> SharedInformer:
        return self._mgr.informer(
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            indexers=indexers,
        )

    def lister(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Lister:
        return self._mgr.lister(
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
        )

    def recorder(self, component: str | None = None) -> EventRecorder:
        return self._mgr.recorder(component)

    def __repr__(self) -> str:
        return f"HomeCluster({self._name!r})"


class MemberCluster:
    """A member of the fleet reached with its own ``client`` (the fleet closes it).

    :meth:`start` runs its informers (each in its own thread, those asked for later at
    once) and its Event sender; :meth:`close` stops them, waits for their threads and
    closes the client. After that nothing of it holds memory: the fleet drops it.

    Args:
        name: the cluster's name in the fleet.
        client: its client, fenced (see the module).
        namespace: the default namespace of namespaced informers (the manager's
            ``watchNamespace``; None: all).
        sync_timeout: seconds a lister read waits for its informer's first sync.
        component: the source of its Events.
    """

    def __init__(
        self,
        name: str,
        client: KubeClient,
        *,
        namespace: str | None,
        sync_timeout: float,
        component: str,
    ) -> None:
        self._name = name
        self._client = client
        self._sync_timeout = sync_timeout
        # Lists in pages (consistent lists: kube-apiserver 1.34+ serves them from its
        # watch cache): a replica engaging many clusters at once never parses one whole.
        self.factory = InformerFactory(
            client, namespace=namespace, cluster=name, page_size=LIST_PAGE, paged_lists=True
        )
        self._events = EventBroadcaster(client, component=component)
        self._stop = threading.Event()
        self._events_stop = threading.Event()
        self._lock = threading.Lock()
        self._started = False

    @property
    def name(self) -> str:
        return self._name

    @property
    def client(self) -> KubeClient:
        return self._client

    def informer(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
    ) -> SharedInformer:
        if namespace and not resource.namespaced:
            raise ValueError(f"{resource} is cluster-scoped: it takes no namespace")
        informer = self.factory.informer(
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            indexers=indexers,
        )
        with self._lock:
            running = self._started and not self._stop.is_set()
        if running and not informer.started:
            self.factory.start(self._stop)
        return informer

    def lister(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Lister:
        informer = self.informer(
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
        )
        scope = None
        if resource.namespaced:
            scope = namespace or self.factory.default_namespace
        return Lister(
            informer.indexer,
            resource,
            informer=informer,
            sync_timeout=self._sync_timeout,
            scope_namespace=scope,
        )

    def recorder(self, component: str | None = None) -> EventRecorder:
        return self._events.recorder(component)

    def start(self) -> None:
        """Run the informers made so far (and every later one at once) and the Event
        sender."""
        with self._lock:
            if self._started:
                return
            self._started = True
        self.factory.start(self._stop)
        self._events.start(self._events_stop)

    def informers(self) -> list[SharedInformer]:
        return self.factory.informers()

    def synced(self) -> bool:
        """Every informer made so far has synced."""
        return all(i.has_synced() for i in self.factory.informers())

    def unsynced(self) -> list[str]:
        """The informers not synced yet, each with its last list/watch error."""
        return [
            f"{i.name} ({i.last_error})" if i.last_error else i.name
            for i in self.factory.informers()
            if not i.has_synced()
        ]

    def close(self, timeout: float) -> bool:
        """Stop the informers and the Event sender (its queue dropped: the keys that
        recorded them have stopped), wait up to ``timeout`` seconds for their threads,
        close the client. True when every thread ended."""
        self._stop.set()
        self._events_stop.set()
        events = self._events.shutdown(timeout=min(timeout, 2.0))
        informers = self.factory.shutdown(timeout=timeout)
        self._client.close()
        if not (events and informers):
            logger.warning(
                "cluster threads still running after its caches were stopped",
                extra={
                    "cluster": self._name,
                    "threads": [t.name for t in self.factory.threads() if t.is_alive()],
                },
            )
        return events and informers

    def __repr__(self) -> str:
        return f"MemberCluster({self._name!r}, {self._client.host!r})"
