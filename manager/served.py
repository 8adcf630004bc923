"""Wiring that waits for resources to be served: a controller of a custom resource whose
CRD is not installed yet (controller-runtime's lazy RESTMapper and ``source.Kind``, which
retry a kind that is not known yet).

:meth:`Manager.when_served <manager.manager.Manager.when_served>` (and
``PluginContext.when_served``) resolve names by discovery as
:meth:`KubeClient.resource <manager.client.KubeClient.resource>` does. Names that resolve
at once are wired at the manager's start; the others are asked for again every
:data:`POLL` seconds, and until all are served the replica is not ready (the readiness
check names what is missing), one log line says so, and nothing of the controller runs.
Once served, ``wire`` is called with the resources, in the order of the names: it builds
informers and controllers as ``setup`` does (the manager runs them at once, or when this
replica leads), and readiness then waits for their caches.

Thread-safe: the waiter runs in its own thread; ``ready_reason`` may be called from any.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

from manager.errors import ApiError
from manager.resources import Resource, UnknownResource

if TYPE_CHECKING:
    from manager.client import KubeClient

__all__ = ["POLL", "WhenServed"]

logger = logging.getLogger(__name__)

POLL: Final = 2.0  # seconds between discovery checks while a resource is not served


class WhenServed:
    """A runnable of every replica: resolves ``names`` by discovery, then calls ``wire``."""

    def __init__(
        self,
        client: KubeClient,
        owner: str,
        names: Sequence[str],
        wire: Callable[..., None],
        *,
        poll: float = POLL,
    ) -> None:
        if not names:
            raise ValueError("when_served: no resource names")
        self.name = f"{owner}/when-served"
        self._client = client
        self._owner = owner
        self._names = tuple(names)
        self._wire = wire
        self._poll = poll
        self._lock = threading.Lock()
        self._reason: str | None = f"waiting for {', '.join(self._names)} to be served"
        self.wired = threading.Event()

    def ready_reason(self) -> str | None:
        """The readiness check: None once ``wire`` has run."""
        with self._lock:
            return self._reason

    def _set_reason(self, reason: str | None) -> None:
        with self._lock:
            self._reason = reason

    def run(self, stop: threading.Event) -> None:
        told: str | None = None
        while not stop.is_set():
            try:
                resources = [self._client.resource(n) for n in self._names]
            except (UnknownResource, ApiError) as exc:
                problem = str(exc)
                self._set_reason(f"waiting: {problem}")
                if problem != told:  # once, and again when the reason changes
                    logger.warning(
                        "controller waits for a resource",
                        extra={"controller": self._owner, "problem": problem},
                    )
                    told = problem
                stop.wait(self._poll)
                continue
            if told is not None:
                logger.info(
                    "resources served: wiring the controller",
                    extra={"controller": self._owner, "resources": [str(r) for r in resources]},
                )
            self._call(resources)
            return

    def _call(self, resources: list[Resource]) -> None:
        try:
            self._wire(*resources)
        except Exception as exc:
            # not ready for good: an operator sees why in /readyz?verbose and in the log
            logger.exception("wiring failed", extra={"controller": self._owner})
            self._set_reason(f"wiring failed: {type(exc).__name__}: {exc}")
            return
        self._set_reason(None)
        self.wired.set()
