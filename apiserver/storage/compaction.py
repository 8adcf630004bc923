"""Compaction on a schedule: what kube-apiserver's etcd compactor does to the history.

A port of ``k8s.io/apiserver/pkg/storage/etcd3/compact.go``: every ``interval`` (5
minutes by default, ``--etcd-compaction-interval``) one round writes etcd's compact key
(a write of its own: the revision moves on by one) and compacts up to the revision the
*previous* round saw. So history younger than one interval is always kept, anything
older than two intervals never is: a watch or a paginated list from a revision that old
answers 410 (a continue token with the "inconsistent continue" token of
:meth:`Rest.list <apiserver.machinery.rest.Rest.list>`).

Thread-safe: one thread of its own (``local-apiserver/compactor``), started and stopped
with the server; every step takes the storage's lock.
"""

from __future__ import annotations

import logging
import threading
from typing import Final

from apiserver.storage.store import Storage

__all__ = ["DEFAULT_COMPACTION_INTERVAL", "Compactor"]

logger = logging.getLogger(__name__)

DEFAULT_COMPACTION_INTERVAL: Final = 300.0  # seconds: kube-apiserver's default


class Compactor:
    """Compacts a :class:`Storage` every ``interval`` seconds, one round behind."""

    def __init__(self, storage: Storage, interval: float) -> None:
        if interval <= 0:
            raise ValueError(f"compaction_interval must be > 0 seconds, got {interval}")
        self.storage = storage
        self.interval = interval
        self._seen = 0  # the revision the previous round saw (0: none yet, no compaction)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the rounds (the first one ``interval`` seconds from now)."""
        if self._thread is not None:
            raise RuntimeError("Compactor.start may be called once")
        self._thread = threading.Thread(target=self._run, name="local-apiserver/compactor")
        self._thread.start()

    def stop(self) -> None:
        """Stop the rounds and join the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def round(self) -> int:
        """One round now: compact up to what the previous round saw, write the compact
        key. Returns the revision compacted to (0: none, the first round)."""
        with self.storage.lock:
            target = self._seen
            self._seen = self.storage.advance()
            if target:
                self.storage.compact(target)
        return target

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.round()
            except Exception:
                logger.exception("compaction round failed")
