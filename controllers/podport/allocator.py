"""The allocator: which addresses are taken, as this process sees them.

Its view is the LogicalPort cache (it is an informer event handler on the LogicalPorts,
so it is rebuilt from the cache at every start, synthetic adds first) plus what this
process has in flight:

* *reservations*: an address picked for a create that has not come back by watch yet
  (expires after ``reservation_ttl``: the cache is the truth, a lost create or a port
  deleted before we saw it cannot leak an address);
* *taken marks*: an address whose create answered AlreadyExists (another replica holds
  it; expires after ``taken_ttl``, by when the watch has brought the port);
* *pending ports*: the port just created for a pod uid, until the cache has it, so that a
  second reconcile of the same pod (woken by our own annotation patch) does not create a
  second port;
* *waiting pods*: pods that found their network exhausted; when a port of that network is
  deleted, the waker is called for each of them.

None of this is authoritative: the API server's refusal of a second LogicalPort with the
same name is the lock. The allocator only makes the first try usually succeed.

Lowest free address first, with a per-network low-water mark (every allocatable offset
below it is taken), so picking an address costs amortised O(1), not O(ports).

Thread-safe: one lock; the waker is called outside it.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from controllers.podport.ipam import Pool
from manager import DeletedFinalStateUnknown, JsonDict, Request

__all__ = ["Allocator", "port_network_ip"]

logger = logging.getLogger(__name__)

Waker = Callable[[Request], None]


def port_network_ip(port: JsonDict) -> tuple[str, str]:
    """``(network, ip)`` from a LogicalPort's spec ("" when missing)."""
    spec = port.get("spec") or {}
    return str(spec.get("network") or ""), str(spec.get("ip") or "")


@dataclass(slots=True)
class _Pending:
    port: JsonDict
    deadline: float


class Allocator:
    """Used/free addresses per network; an informer handler of the LogicalPorts."""

    def __init__(
        self,
        pools: Mapping[str, Pool],
        *,
        reservation_ttl: float = 60.0,
        taken_ttl: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pools = dict(pools)
        self._reservation_ttl = reservation_ttl
        self._taken_ttl = taken_ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._used: dict[str, dict[int, str]] = {n: {} for n in self.pools}
        self._reserved: dict[str, dict[int, float]] = {n: {} for n in self.pools}
        self._low: dict[str, int] = dict.fromkeys(self.pools, 0)
        self._pending: dict[str, _Pending] = {}
        self._waiting: dict[str, set[Request]] = {n: set() for n in self.pools}
        self._waker: Waker | None = None

    # -- informer handler (LogicalPorts) ------------------------------------------------

    def _locate(self, port: JsonDict) -> tuple[str, int] | None:
        network, ip = port_network_ip(port)
        pool = self.pools.get(network)
        if pool is None or not ip:
            return None
        try:
            offset = pool.offset(ipaddress.ip_address(ip))
        except ValueError:
            return None
        return None if offset is None else (network, offset)

    def on_add(self, obj: JsonDict, is_in_initial_list: bool) -> None:
        where = self._locate(obj)
        if where is None:
            return
        network, offset = where
        name = str((obj.get("metadata") or {}).get("name") or "")
        uid = str((obj.get("spec") or {}).get("podUID") or "")
        with self._lock:
            self._used[network][offset] = name
            self._reserved[network].pop(offset, None)
            pending = self._pending.get(uid)
            if pending is not None and pending.port["metadata"]["name"] == name:
                del self._pending[uid]

    def on_update(self, old: JsonDict, new: JsonDict) -> None:
        self.on_add(new, False)

    def on_delete(self, obj: JsonDict | DeletedFinalStateUnknown) -> None:
        state = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        where = self._locate(state)
        if where is None:
            return
        network, offset = where
        name = str((state.get("metadata") or {}).get("name") or "")
        with self._lock:
            if self._used[network].get(offset) == name:
                del self._used[network][offset]
                self._low[network] = min(self._low[network], offset)
            uid = str((state.get("spec") or {}).get("podUID") or "")
            pending = self._pending.get(uid)
            if pending is not None and pending.port["metadata"]["name"] == name:
                del self._pending[uid]
            waiting = self._waiting[network]
            self._waiting[network] = set()
            waker = self._waker
        if waker is not None:
            for req in sorted(waiting):
                waker(req)

    # -- allocation ---------------------------------------------------------------------

    def set_waker(self, waker: Waker | None) -> None:
        """Who to call for a waiting pod when its network frees an address."""
        with self._lock:
            self._waker = waker

    def _expire(self, network: str, now: float) -> None:
        reserved = self._reserved[network]
        expired = [o for o, deadline in reserved.items() if deadline <= now]
        for o in expired:
            del reserved[o]
            self._low[network] = min(self._low[network], o)

    def reserve(self, network: str) -> int | None:
        """Reserve the lowest free address of ``network``; its offset, or None when the
        pool is exhausted (as far as this process knows)."""
        pool = self.pools[network]
        now = self._clock()
        with self._lock:
            self._expire(network, now)
            used = self._used[network]
            reserved = self._reserved[network]
            offset = pool.lowest_free(
                lambda o: o in used or o in reserved, start=self._low[network]
            )
            if offset is None:
                self._low[network] = pool.network.num_addresses
                return None
            reserved[offset] = now + self._reservation_ttl
            self._low[network] = offset + 1
            return offset

    def release(self, network: str, offset: int) -> None:
        """Give back a reservation whose create failed (the address is free)."""
        with self._lock:
            if self._reserved[network].pop(offset, None) is not None:
                self._low[network] = min(self._low[network], offset)

    def taken(self, network: str, offset: int) -> None:
        """The create answered AlreadyExists: skip the address until the watch brings its
        port (or ``taken_ttl`` passes)."""
        with self._lock:
            self._reserved[network][offset] = self._clock() + self._taken_ttl

    def created(self, network: str, offset: int, pod_uid: str, port: JsonDict) -> None:
        """The create succeeded: hold the address and remember the pod's port until the
        cache has it."""
        deadline = self._clock() + self._reservation_ttl
        name = port["metadata"]["name"]
        with self._lock:
            self._waiting[network].discard(self._request_of(port))
            if self._used[network].get(offset) == name:
                return  # the watch was faster: the cache has it already
            self._reserved[network][offset] = deadline
            self._pending[pod_uid] = _Pending(port, deadline)

    @staticmethod
    def _request_of(port: JsonDict) -> Request:
        spec = port.get("spec") or {}
        return Request(str(spec.get("podNamespace") or ""), str(spec.get("podName") or ""))

    def pending_port(self, pod_uid: str) -> JsonDict | None:
        """The port this process created for ``pod_uid`` that the cache does not show yet."""
        with self._lock:
            pending = self._pending.get(pod_uid)
            if pending is None:
                return None
            if pending.deadline <= self._clock():
                del self._pending[pod_uid]
                return None
            return pending.port

    def forget_pending(self, pod_uid: str) -> None:
        """Drop the pending port of ``pod_uid`` (it was deleted)."""
        with self._lock:
            self._pending.pop(pod_uid, None)

    def wait(self, network: str, request: Request) -> None:
        """``request`` waits for an address of ``network``."""
        with self._lock:
            self._waiting[network].add(request)

    def unwait(self, request: Request) -> None:
        """``request`` no longer waits (it got a port, or left)."""
        with self._lock:
            for waiting in self._waiting.values():
                waiting.discard(request)

    # -- figures ------------------------------------------------------------------------

    def counts(self, network: str) -> tuple[int, int]:
        """``(used, free)`` allocatable addresses of ``network``, reservations included."""
        pool = self.pools[network]
        now = self._clock()
        with self._lock:
            taken = {o for o in self._used[network] if pool.is_allocatable(o)}
            taken.update(
                o
                for o, deadline in self._reserved[network].items()
                if deadline > now and pool.is_allocatable(o)
            )
        return len(taken), pool.capacity - len(taken)

    def waiting(self, network: str) -> int:
        """How many pods wait for an address of ``network``."""
        with self._lock:
            return len(self._waiting[network])
