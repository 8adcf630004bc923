"""A :class:`~manager.cache.reflector.ListerWatcher` over :class:`~manager.client.KubeClient`
for one resource, namespace and selector pair (client-go ``cache.ListWatch``).

Thread-safe: holds only immutable configuration; the client is thread-safe.
"""

from __future__ import annotations

from manager.cache.reflector import WatchEvents
from manager.client import KubeClient
from manager.keys import JsonDict
from manager.resources import Resource

__all__ = ["ResourceListWatch"]


class ResourceListWatch:
    """Lists and watches ``resource`` in ``namespace`` (None: all) with selectors."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        cluster: str = "",
    ) -> None:
        """
        Args:
            cluster: the fleet member ``client`` talks to ("" for the manager's own
                cluster): part of the description (``cluster=<name>``), so the metrics,
                logs and threads of two clusters' informers of one resource differ.
        """
        self._client = client
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector or None
        self.field_selector = field_selector or None
        parts = [f"{resource.api_version}/{resource.plural}"]
        if namespace:
            parts.append(f"ns={namespace}")
        if self.label_selector:
            parts.append(f"labels={self.label_selector}")
        if self.field_selector:
            parts.append(f"fields={self.field_selector}")
        if cluster:
            parts.append(f"cluster={cluster}")
        self._description = " ".join(parts)

    @property
    def description(self) -> str:
        return self._description

    def list(self, *, resource_version: str, limit: int | None, continue_: str | None) -> JsonDict:
        """One LIST page. Items get ``apiVersion`` and ``kind`` set, as watch events carry
        them: the API server leaves them out of typed lists, and cached objects should
        not differ by whether they came from a list or a watch."""
        page = self._client.list(
            self.resource,
            self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            limit=limit,
            continue_=continue_,
            resource_version=resource_version or None,
        )
        api_version, kind = self.resource.api_version, self.resource.kind
        for item in page.get("items") or ():
            if "kind" not in item:
                item["apiVersion"] = api_version
                item["kind"] = kind
        return page

    def watch(
        self, *, resource_version: str, timeout_seconds: int, read_timeout: float
    ) -> WatchEvents:
        return self._client.watch(
            self.resource,
            self.namespace,
            resource_version=resource_version,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            timeout_seconds=timeout_seconds,
            read_timeout=read_timeout,
            allow_bookmarks=True,
        )
