"""The built-in cluster providers (``clusters:`` in the configuration): kubeconfig files,
kubeconfig Secrets in the home cluster, and the home cluster itself. Each is a
:class:`~manager.fleet.provider.ClusterProvider`.

* :class:`KubeconfigFiles` — a static list (``clusters.kubeconfigs``): each file's context
  is one cluster. The files are read again every ``reload_period`` seconds; one whose
  content changed (a mounted Secret whose credentials were rotated) engages its cluster
  again with the new credentials. A file that cannot be read keeps the cluster as it was
  (a volume being remounted), and is logged.
* :class:`KubeconfigSecrets` — Secrets in one namespace of the home cluster, selected by a
  label, each holding a kubeconfig under a key: the shape Cluster API writes (Secret
  ``<cluster>-kubeconfig``, label ``cluster.x-k8s.io/cluster-name: <cluster>``, key
  ``value``; multicluster-runtime's ``providers/kubeconfig`` and ``providers/cluster-api``
  read the same). They are watched: a new Secret engages its cluster, a changed one
  engages it again with the new credentials (compared by content, as those providers hash
  the kubeconfig), a deleted one disengages it. The cluster's name is the Secret's name
  without ``-kubeconfig``; a Secret whose name does not end so is skipped, and so is one
  whose Cluster API label names another cluster (``<cluster>-user-kubeconfig``). Only what
  the kubeconfig embeds is used (see :func:`~manager.client.kubeconfig.
  load_kubeconfig_data`): whoever can write those Secrets chooses servers, not files or
  commands of this process.
* :class:`HomeCluster` — the manager's own cluster as a member named ``name``.

Thread-safe: each provider runs in its own thread; the Secrets' events arrive on the
informer's handler thread.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from manager.cache.informer import SharedInformer
from manager.client.kubeconfig import load_kubeconfig, load_kubeconfig_data
from manager.errors import ConfigError
from manager.fleet.provider import ClusterSink, ClusterSource
from manager.keys import DeletedFinalStateUnknown, JsonDict
from manager.resources import builtin

__all__ = [
    "CAPI_CLUSTER_NAME_LABEL",
    "SECRETS",
    "HomeProvider",
    "KubeconfigFile",
    "KubeconfigFiles",
    "KubeconfigSecrets",
    "cluster_name_of_secret",
]

logger = logging.getLogger(__name__)

SECRETS: Final = builtin("v1", "secrets")
CAPI_CLUSTER_NAME_LABEL: Final = "cluster.x-k8s.io/cluster-name"
KUBECONFIG_SUFFIX: Final = "-kubeconfig"
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def _revision(data: bytes, context: str = "") -> str:
    return hashlib.sha256(data + b"\0" + context.encode()).hexdigest()[:16]


@dataclass(frozen=True, kw_only=True, slots=True)
class KubeconfigFile:
    """One cluster of a static list: its name, its kubeconfig file and context."""

    name: str
    path: str
    context: str = ""  # "" = the file's current-context


class KubeconfigFiles:
    """A static list of clusters, each from a kubeconfig file (see the module)."""

    name = "kubeconfigs"

    def __init__(self, files: Sequence[KubeconfigFile], *, reload_period: float = 30.0) -> None:
        for entry in files:
            if not _NAME.match(entry.name):
                raise ValueError(f"cluster name {entry.name!r} is not a DNS label")
        if len({f.name for f in files}) != len(files):
            raise ValueError("two kubeconfig files name the same cluster")
        self._files = tuple(files)
        self._reload_period = reload_period

    def run(self, stop: threading.Event, fleet: ClusterSink) -> None:
        revisions: dict[str, str] = {}
        while True:
            for entry in self._files:
                try:
                    data = Path(entry.path).expanduser().read_bytes()
                except OSError as exc:
                    logger.warning(
                        "cannot read a cluster's kubeconfig",
                        extra={"cluster": entry.name, "path": entry.path, "error": str(exc)},
                    )
                    continue
                revision = _revision(data, entry.context)
                if revisions.get(entry.name) == revision:
                    continue
                try:
                    config = load_kubeconfig(entry.path, entry.context or None)
                except ConfigError as exc:
                    logger.warning(
                        "a cluster's kubeconfig is unusable",
                        extra={"cluster": entry.name, "error": str(exc)},
                    )
                    continue
                revisions[entry.name] = revision
                where = f"kubeconfig {entry.path}"
                fleet.engage(entry.name, ClusterSource(config, revision, where))
            if stop.wait(self._reload_period):
                return


def cluster_name_of_secret(secret: JsonDict) -> str | None:
    """The cluster a kubeconfig Secret is for (see the module), or None to skip it."""
    meta = secret.get("metadata") or {}
    name = str(meta.get("name") or "")
    if not name.endswith(KUBECONFIG_SUFFIX):
        return None
    cluster = name.removesuffix(KUBECONFIG_SUFFIX)
    labelled = (meta.get("labels") or {}).get(CAPI_CLUSTER_NAME_LABEL)
    if labelled is not None and labelled != cluster:
        return None  # another Secret of that cluster (<cluster>-user-kubeconfig)
    return cluster if _NAME.match(cluster) else None


class KubeconfigSecrets:
    """Clusters from kubeconfig Secrets in the home cluster (see the module).

    Args:
        informer: the home cluster's informer of those Secrets (one namespace, the label
            selector): the manager's, so that it syncs with the manager's caches.
        key: the data key holding the kubeconfig (Cluster API: ``value``).
    """

    name = "secrets"

    def __init__(self, informer: SharedInformer, *, key: str = "value") -> None:
        self._informer = informer
        self._key = key
        self._lock = threading.Lock()
        self._fleet: ClusterSink | None = None
        self._by_secret: dict[str, str] = {}  # secret key -> cluster name
        self._revisions: dict[str, str] = {}  # cluster name -> revision engaged

    def run(self, stop: threading.Event, fleet: ClusterSink) -> None:
        with self._lock:
            self._fleet = fleet
        registration = self._informer.add_event_handler(self)
        try:
            stop.wait()
        finally:
            self._informer.remove_event_handler(registration)

    # -- the informer's handler ------------------------------------------------------

    def on_add(self, obj: JsonDict, is_in_initial_list: bool) -> None:
        self._seen(obj)

    def on_update(self, old: JsonDict, new: JsonDict) -> None:
        self._seen(new)

    def on_delete(self, obj: JsonDict | DeletedFinalStateUnknown) -> None:
        state = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        meta = state.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        with self._lock:
            cluster = self._by_secret.pop(key, None)
            if cluster is None:
                return
            self._revisions.pop(cluster, None)
            fleet = self._fleet
        logger.info("cluster Secret deleted", extra={"cluster": cluster, "secret": key})
        if fleet is not None:
            fleet.disengage(cluster)

    def _seen(self, secret: JsonDict) -> None:
        meta = secret.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        cluster = cluster_name_of_secret(secret)
        if cluster is None:
            logger.debug("Secret skipped: not <cluster>-kubeconfig", extra={"secret": key})
            return
        if meta.get("deletionTimestamp"):
            self.on_delete(secret)
            return
        encoded = (secret.get("data") or {}).get(self._key)
        where = f"secret {key}"
        try:
            if not encoded:
                raise ConfigError([f"{where}: no data key {self._key!r}"])
            try:
                data = base64.b64decode(str(encoded), validate=True)
            except (binascii.Error, ValueError):
                raise ConfigError([f"{where}: data.{self._key} is not base64"]) from None
            revision = _revision(data)
            with self._lock:
                if self._revisions.get(cluster) == revision:
                    return
            config = load_kubeconfig_data(data, where)
        except ConfigError as exc:
            logger.warning(
                "a cluster Secret is unusable: the cluster is left as it was",
                extra={"cluster": cluster, "secret": key, "error": str(exc)},
            )
            return
        with self._lock:
            self._by_secret[key] = cluster
            self._revisions[cluster] = revision
            fleet = self._fleet
        if fleet is not None:
            fleet.engage(cluster, ClusterSource(config, revision, where))


class HomeProvider:
    """The manager's own cluster, as a member named ``cluster``."""

    name = "home"

    def __init__(self, cluster: str) -> None:
        if not _NAME.match(cluster):
            raise ValueError(f"cluster name {cluster!r} is not a DNS label")
        self._cluster = cluster

    def run(self, stop: threading.Event, fleet: ClusterSink) -> None:
        fleet.engage(self._cluster, ClusterSource(None, "home", "the manager's own cluster"))
        stop.wait()
