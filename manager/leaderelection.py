"""Leader election on a ``coordination.k8s.io/v1`` Lease: one active manager, warm standbys.

A port of the concepts of client-go ``tools/leaderelection`` (``leaderelection.go``: the
acquire/renew loops, ``tryAcquireOrRenew``, ``release``) and of
``tools/leaderelection/resourcelock/leaselock.go`` (the leader election record kept in
``Lease.spec``), written for Overseer: time comes from an injected
:class:`~manager.clock.Clock`, ``run`` stops when its ``stop`` event is set, and the
Lease is released on a graceful stop.

Contract:

* **The record** is the Lease's ``spec``: ``holderIdentity``, ``leaseDurationSeconds``
  (whole seconds, rounded up), ``acquireTime`` and ``renewTime`` (RFC 3339 MicroTime,
  ``2026-11-22T03:04:05.123456Z``) and ``leaseTransitions``. An empty holder means free.
* **A missing Lease**: created at once when this candidate never saw it held by another
  (first start, or released before it was deleted). One that vanished while another
  candidate held it — ``kubectl delete lease`` to force a failover — is waited out like a
  record that stopped changing (a lease duration from the last change seen), because its
  holder may act until its renew deadline; client-go creates it at once and has two
  leaders for up to a retry period. The holder itself, finding its Lease gone, has lost
  it: leading stops at once and nothing is re-created.
* **Acquire**: One held by another candidate is taken
  over (``leaseTransitions`` + 1) only when its record has not changed for the record's
  ``leaseDurationSeconds``, measured on the local monotonic clock from when *this*
  candidate last saw the record change; remote timestamps are never compared with the
  local wall clock. Every write is a ``replace`` carrying the observed
  ``metadata.resourceVersion``: a lost race is a 409 Conflict and this round is not won,
  so two candidates never both believe they lead by our doing.
* **Renew**: every ``retry_period`` the holder rewrites ``renewTime``. If no renew has
  succeeded within ``renew_deadline`` of the start of the last successful one, or the
  Lease is seen held by someone else, leading stops at once: :meth:`LeaderElector.is_leader`
  turns False, the ``leader_election_master_status`` gauge goes to 0,
  ``on_stopped_leading`` runs and :meth:`LeaderElector.run` returns False without any
  further write.
* **Deadline by the clock, not by the request**: the elector's requests go through a
  client of its own — no client-side rate limiter (it shares nothing with the
  controllers' requests), no retries, and a timeout of at most ``renew_deadline`` — and
  while leading every request's timeout is cut to what is left until the renew deadline,
  which is checked again between the GET and the write: a round never outlasts the
  deadline, and a slow API server still gets the whole deadline to answer (client-go
  gives a renew the same budget). :meth:`LeaderElector.is_leader` compares the clock with
  the deadline itself, so it turns False the moment the deadline passes, even while the
  elector's thread is stuck; and a round that returns after the deadline counts as lost
  even if its write succeeded.
* **Write permission** (:meth:`LeaderElector.valid_for`): the seconds until the renew
  deadline while leading, else 0. It closes ``lease_duration - renew_deadline`` seconds
  before any other candidate may take the Lease over; the manager's write fence
  (:mod:`manager.fencing`) is built on it.
* **Release** (``release_on_cancel``): when ``stop`` ends leading and the ``release``
  predicate given to :meth:`LeaderElector.run` agrees (the manager asks "has every
  reconcile stopped?"), the Lease is written with an empty holder,
  ``leaseDurationSeconds: 1`` and a fresh ``renewTime`` (same ``leaseTransitions``), so a
  standby takes over within about one retry period. Leading (and the write permission)
  ends before that write is sent. Best effort: a failure is logged, not raised.
* **Failures**: an API error in a round is a failed round (the deadline decides). Any
  other exception (a bug, an ``OSError`` from a credential hook) ends :meth:`run` by
  propagating, leading already stopped and ``on_stopped_leading`` called; the caller must
  treat it as a lost Lease.
* **Callbacks** run on the thread that called :meth:`LeaderElector.run` and must return
  promptly: ``on_started_leading()`` once leading starts, ``on_stopped_leading()`` once it
  ends (at once when lost; after the release on a graceful stop), ``on_new_leader(id)``
  whenever the observed holder changes to a new non-empty identity (ours included). An
  exception from a callback ends :meth:`LeaderElector.run` and propagates; the Lease is
  then not released.

Waiting: with the :class:`~manager.clock.RealClock` a sleep is ``stop.wait``, so setting
``stop`` wakes the elector at once. With another clock (a
:class:`~manager.clock.FakeClock` in tests) a sleep is :meth:`Clock.wait` and ``stop`` is
noticed when that wait ends: tests move the clock.

Thread-safety: :meth:`LeaderElector.run` is called from one thread at a time (it starts no
thread of its own); :meth:`LeaderElector.is_leader`, :meth:`LeaderElector.leader` and
:attr:`LeaderElector.identity` may be called from any thread.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import random
import secrets
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TypeGuard

from prometheus_client import Gauge

from manager.client import JsonDict, KubeClient
from manager.clock import Clock, RealClock
from manager.errors import AlreadyExists, ApiError, Conflict, NotFound
from manager.metrics import REGISTRY
from manager.resources import builtin

__all__ = [
    "LeaderElectionConfig",
    "LeaderElector",
    "default_identity",
]

logger = logging.getLogger(__name__)

LEASES: Final = builtin("coordination.k8s.io/v1", "leases")

# client-go's k8s.io/client-go/tools/leaderelection/metrics.go name and help.
MASTER_STATUS = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
    "1 indicates master. 'name' is the string used to identify the lease.",
    ["name"],
    registry=REGISTRY,
)

_MICRO_TIME_FORMAT: Final = "%Y-%m-%dT%H:%M:%S.%fZ"
_RELEASED_DURATION_SECONDS: Final = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class LeaderElectionConfig:
    """Which Lease to contend for, as whom, and the timings (client-go's defaults).

    Raises:
        ValueError: from construction (see :meth:`validate`).
    """

    lease_name: str
    """Name of the Lease object (required)."""
    namespace: str
    """Namespace of the Lease (required)."""
    identity: str
    """This candidate's identity, unique among candidates (required; see
    :func:`default_identity`)."""
    lease_duration: float = 15.0  # seconds
    """How long a standby waits without seeing the record change before taking over
    (default 15.0 seconds; written to the Lease rounded up to whole seconds)."""
    renew_deadline: float = 10.0  # seconds
    """How long the leader keeps trying to renew before it stops leading (default 10.0
    seconds)."""
    retry_period: float = 2.0  # seconds
    """Time between two acquire or renew rounds (default 2.0 seconds)."""
    jitter: float = 1.2
    """Acquire rounds wait ``retry_period`` times a random factor in ``[1, jitter)``
    (default 1.2)."""
    release_on_cancel: bool = True
    """Release the Lease when ``stop`` ends leading (default True)."""
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Labels the Lease is created with (shard Leases carry their ring's)."""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check the names and that lease_duration > renew_deadline > jitter * retry_period.

        Raises:
            ValueError: listing every problem found.
        """
        problems: list[str] = []
        for name in ("lease_name", "namespace", "identity"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                problems.append(f"{name}: must be a non-empty string, got {value!r}")
        timings_ok = True
        for name in ("lease_duration", "renew_deadline", "retry_period"):
            value = getattr(self, name)
            if not _is_number(value) or not value > 0:
                problems.append(f"{name}: must be a positive number of seconds, got {value!r}")
                timings_ok = False
        if not _is_number(self.jitter) or not self.jitter >= 1.0:
            problems.append(f"jitter: must be a number >= 1.0, got {self.jitter!r}")
            timings_ok = False
        if timings_ok:
            if not self.lease_duration > self.renew_deadline:
                problems.append(
                    f"lease_duration ({self.lease_duration} s) must be greater than "
                    f"renew_deadline ({self.renew_deadline} s)"
                )
            slowest_retry = self.jitter * self.retry_period
            if not self.renew_deadline > slowest_retry:
                problems.append(
                    f"renew_deadline ({self.renew_deadline} s) must be greater than "
                    f"jitter * retry_period ({self.jitter} * {self.retry_period} s "
                    f"= {slowest_retry:g} s)"
                )
        if problems:
            raise ValueError("invalid LeaderElectionConfig: " + "; ".join(problems))


def default_identity() -> str:
    """``$POD_NAME`` (else the host name), ``_`` and 8 random hex digits.

    The suffix keeps two processes on one host (or a restarted pod) distinct.
    """
    base = os.environ.get("POD_NAME", "").strip() or socket.gethostname() or "overseer"
    return f"{base}_{secrets.token_hex(4)}"


@dataclass(frozen=True, slots=True)
class _Record:
    """The leader election record: the fields of ``Lease.spec`` the election uses."""

    holder: str
    duration_seconds: int | None
    acquire_time: str | None
    renew_time: str | None
    transitions: int

    @classmethod
    def from_lease(cls, lease: JsonDict) -> _Record:
        spec = lease.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        holder = spec.get("holderIdentity")
        duration = spec.get("leaseDurationSeconds")
        acquire = spec.get("acquireTime")
        renew = spec.get("renewTime")
        transitions = spec.get("leaseTransitions")
        return cls(
            holder=holder if isinstance(holder, str) else "",
            duration_seconds=duration if _is_int(duration) and duration > 0 else None,
            acquire_time=acquire if isinstance(acquire, str) else None,
            renew_time=renew if isinstance(renew, str) else None,
            transitions=transitions if _is_int(transitions) and transitions >= 0 else 0,
        )

    def to_spec(self) -> JsonDict:
        spec: JsonDict = {"holderIdentity": self.holder, "leaseTransitions": self.transitions}
        if self.duration_seconds is not None:
            spec["leaseDurationSeconds"] = self.duration_seconds
        if self.acquire_time is not None:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time is not None:
            spec["renewTime"] = self.renew_time
        return spec


class LeaderElector:
    """Contends for one Lease; :meth:`run` blocks while this candidate waits or leads.

    Args:
        client: the API client. The elector's requests must be short, unretried and
            unthrottled: a client whose options have ``max_retries == 0``,
            ``timeout <= renew_deadline`` and ``qps <= 0`` is used as is; any other is
            copied with such options (its own connections, no rate limiter) for the
            duration of :meth:`run`.
        config: the Lease and the timings.
        on_started_leading: called when this candidate starts leading.
        on_stopped_leading: called when it stops leading (lost, or stopped).
        on_new_leader: called with the identity of a newly observed holder.
        clock: the monotonic clock deciding every timing (default the real one).
        rand: a source of floats in ``[0, 1)`` for the acquire jitter.
    """

    def __init__(
        self,
        client: KubeClient,
        config: LeaderElectionConfig,
        *,
        on_started_leading: Callable[[], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        clock: Clock | None = None,
        rand: Callable[[], float] = random.random,
    ) -> None:
        config.validate()
        self._client = client
        self._config = config
        self._on_started_leading = on_started_leading
        self._on_stopped_leading = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._clock: Clock = clock if clock is not None else RealClock()
        self._rand = rand
        self._lease_key = f"{config.namespace}/{config.lease_name}"
        self._duration_seconds = math.ceil(config.lease_duration)
        # Guards what other threads read: _running, _leading, _renewed_at, _leader.
        self._lock = threading.Lock()
        # What the run thread sleeps on with a clock other than the real one.
        self._sleeper = threading.Condition()
        self._running = False
        self._leading = False
        self._renewed_at = 0.0  # clock reading at the start of the last successful write
        self._leader = ""  # holder of the last observed record
        # Owned by the run thread.
        self._api = client
        self._observed_lease: JsonDict | None = None
        self._observed_record: _Record | None = None
        self._observed_at = 0.0  # clock reading when the observed record last changed
        self._reported_leader = ""
        self._last_written: datetime | None = None
        self._vanished = False  # our Lease was found deleted while we led
        self._written: dict[str, float] = {}  # renewTime we wrote -> round start (clock)
        self._round_started = 0.0
        self._waiting_missing = False  # waiting out a deleted Lease that was held

    @property
    def identity(self) -> str:
        """This candidate's identity (the ``holderIdentity`` it writes)."""
        return self._config.identity

    def is_leader(self) -> bool:
        """Whether this candidate leads now: it holds the Lease and, on its clock, the
        renew deadline since its last successful write has not passed."""
        return self.valid_for() > 0

    def valid_for(self) -> float:
        """Seconds until this candidate's renew deadline while it leads, else 0: how much
        longer it may act (and write) without a successful renew."""
        with self._lock:
            if not self._leading:
                return 0.0
            return max(self._renewed_at + self._config.renew_deadline - self._clock.now(), 0.0)

    def written_at(self, renew_time: str) -> float | None:
        """When (this elector's clock) the round began that wrote the record with this
        ``renewTime`` — a time before that write was committed — or None if it was not
        one of ours (recent ones only). A watcher that sees its own write in its cache
        knows its cache holds everything committed before that moment."""
        with self._lock:
            return self._written.get(renew_time)

    def leader(self) -> str:
        """The holder of the last observed record ("" when none was seen or it is free)."""
        with self._lock:
            return self._leader

    def run(self, stop: threading.Event, *, release: Callable[[], bool] | None = None) -> bool:
        """Contend for the Lease, then lead, until ``stop`` is set or leadership is lost.

        Args:
            stop: ends contending or leading.
            release: asked once leading ends by ``stop``: may the Lease be released now?
                (default: yes). False keeps it written; a standby then takes over once it
                expires.

        Returns:
            True when ``stop`` ended it (before acquiring: no callbacks; while leading: the
            Lease released if configured and allowed, and ``on_stopped_leading`` called),
            False when leadership was lost (``on_stopped_leading`` already called, nothing
            written).

        Raises:
            RuntimeError: ``run`` is already running.
            Exception: whatever a round raised that is not an API error (see the module
                docstring): leading has stopped; treat it as a lost Lease.
        """
        with self._lock:
            if self._running:
                raise RuntimeError("LeaderElector.run is already running")
            self._running = True
        name = self._config.lease_name
        MASTER_STATUS.labels(name).set(0)
        api, owned = self._elector_client()
        self._api = api
        led = False
        try:
            if not self._acquire(stop):
                return True
            led = True
            self._set_leading(True)
            logger.info("started leading", extra=self._context())
            if self._on_started_leading is not None:
                self._on_started_leading()
            if not self._renew(stop):
                return False
            self._set_leading(False)  # writes stop being allowed before the release
            if self._config.release_on_cancel:
                if release is None or release():
                    self._release()
                else:
                    logger.warning(
                        "stopped leading; not releasing the lease", extra=self._context()
                    )
            logger.info("stopped leading", extra=self._context())
            if self._on_stopped_leading is not None:
                self._on_stopped_leading()
            return True
        except BaseException:
            if led and self._leading:
                self._lose("the election failed")
            raise
        finally:
            self._set_leading(False)
            if owned:
                api.close()
            with self._lock:
                self._running = False

    # -- the loops ----------------------------------------------------------------------

    def _acquire(self, stop: threading.Event) -> bool:
        """Try every jittered retry period until the Lease is ours (True) or stop (False)."""
        cfg = self._config
        while not stop.is_set():
            started = self._clock.now()
            if self._try_acquire_or_renew(None):
                with self._lock:
                    self._renewed_at = started
                return True
            period = cfg.retry_period * (1.0 + self._rand() * (cfg.jitter - 1.0))
            if self._sleep_until(stop, started + period):
                break
        return False

    def _renew(self, stop: threading.Event) -> bool:
        """Renew every retry period; True when stopped, False when leadership was lost."""
        cfg = self._config
        with self._lock:
            next_round = self._renewed_at + cfg.retry_period
        while True:
            with self._lock:
                deadline = self._renewed_at + cfg.renew_deadline
            if self._sleep_until(stop, min(next_round, deadline)):
                return True
            now = self._clock.now()
            if now >= deadline:
                self._lose("renew deadline passed")
                return False
            if now < next_round:
                continue  # woke early
            renewed = self._try_acquire_or_renew(deadline)
            if self._vanished:
                self._lose("the lease was deleted")
                return False
            if self._clock.now() >= deadline:
                self._lose("renew deadline passed during a request")
                return False
            if renewed:
                with self._lock:
                    self._renewed_at = now
            elif self._leader not in ("", cfg.identity):
                self._lose("lease taken by another candidate")
                return False
            next_round = now + cfg.retry_period

    def _sleep_until(self, stop: threading.Event, when: float) -> bool:
        """Sleep until ``when`` on the clock; True as soon as ``stop`` is seen set."""
        if isinstance(self._clock, RealClock):
            while not stop.is_set():
                remaining = when - self._clock.now()
                if remaining <= 0:
                    return False
                stop.wait(remaining)
            return True
        with self._sleeper:
            while not stop.is_set():
                remaining = when - self._clock.now()
                if remaining <= 0:
                    return False
                self._clock.wait(self._sleeper, remaining)
        return True

    # -- one round (client-go tryAcquireOrRenew) ----------------------------------------

    def _timeout(self, deadline: float | None) -> float | None:
        """A request's timeout: the client's, cut to what is left until ``deadline``;
        None when the deadline has passed (send nothing more)."""
        timeout = self._api.options.timeout
        if deadline is None:
            return timeout
        left = deadline - self._clock.now()
        return min(timeout, left) if left > 0 else None

    def _try_acquire_or_renew(self, deadline: float | None) -> bool:
        """Read the Lease and write it if it is ours to take or keep; True if written.
        While leading, ``deadline`` is the renew deadline: no request outlasts it."""
        cfg = self._config
        timeout = self._timeout(deadline)
        if timeout is None:
            return False
        self._round_started = self._clock.now()
        try:
            lease = self._api.get(LEASES, cfg.lease_name, cfg.namespace, timeout=timeout)
        except NotFound:
            return self._missing(deadline)
        except ApiError as exc:
            self._log_api_error("cannot read the lease", exc)
            return False
        self._observe(lease)
        record = self._observed_record
        assert record is not None
        if record.holder and record.holder != cfg.identity:
            duration = record.duration_seconds or self._duration_seconds
            if self._clock.now() < self._observed_at + duration:
                return False  # held, and seen changing within its duration
        now = self._micro_time()
        if record.holder == cfg.identity:
            wanted = dataclasses.replace(
                record, duration_seconds=self._duration_seconds, renew_time=now
            )
        else:
            wanted = _Record(
                holder=cfg.identity,
                duration_seconds=self._duration_seconds,
                acquire_time=now,
                renew_time=now,
                transitions=record.transitions + 1,
            )
        if not self._write(lease, wanted, deadline):
            return False
        if record.holder != cfg.identity:
            logger.info(
                "acquired lease", extra={**self._context(), "previous_holder": record.holder}
            )
        return True

    def _missing(self, deadline: float | None) -> bool:
        """The Lease is not there. Ours (we lead): it was deleted, and that is losing it.
        Someone else's, seen changing within its duration: it may still act until its
        renew deadline, so the missing record is waited out like one that stopped
        changing. Never seen held (a fresh Lease, or a released one): created now."""
        cfg = self._config
        record = self._observed_record
        if deadline is not None:
            self._vanished = True
            return False
        if record is not None and record.holder and record.holder != cfg.identity:
            duration = record.duration_seconds or self._duration_seconds
            if self._clock.now() < self._observed_at + duration:
                if not self._waiting_missing:
                    self._waiting_missing = True
                    logger.info(
                        "lease deleted while held: waiting a lease duration before creating it",
                        extra=self._context(),
                    )
                return False
        self._waiting_missing = False
        return self._create(deadline)

    def _create(self, deadline: float | None) -> bool:
        cfg = self._config
        timeout = self._timeout(deadline)
        if timeout is None:
            return False
        now = self._micro_time()
        record = _Record(
            holder=cfg.identity,
            duration_seconds=self._duration_seconds,
            acquire_time=now,
            renew_time=now,
            transitions=0,
        )
        metadata: JsonDict = {"name": cfg.lease_name, "namespace": cfg.namespace}
        if cfg.labels:
            metadata["labels"] = dict(cfg.labels)
        body: JsonDict = {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": metadata,
            "spec": record.to_spec(),
        }
        try:
            created = self._api.create(LEASES, body, cfg.namespace, timeout=timeout)
        except AlreadyExists:
            logger.info("lease created by another candidate", extra=self._context())
            return False
        except ApiError as exc:
            self._log_api_error("cannot create the lease", exc)
            return False
        self._note_written(created)
        self._observe(created)
        logger.info("acquired lease", extra={**self._context(), "previous_holder": ""})
        return True

    def _write(self, lease: JsonDict, record: _Record, deadline: float | None) -> bool:
        """Replace the observed Lease (its resourceVersion) with ``record``; True if done.
        Nothing is sent once ``deadline`` has passed."""
        timeout = self._timeout(deadline)
        if timeout is None:
            return False
        spec = lease.get("spec")
        body = {**lease, "spec": {**(spec if isinstance(spec, dict) else {}), **record.to_spec()}}
        try:
            updated = self._api.replace(LEASES, body, self._config.namespace, timeout=timeout)
        except Conflict:
            logger.info("lease changed since read: not written this round", extra=self._context())
            return False
        except ApiError as exc:
            self._log_api_error("cannot write the lease", exc)
            return False
        self._note_written(updated)
        self._observe(updated)
        return True

    def _release(self) -> None:
        """Give the Lease up if we still hold it (best effort). A write that meets a newer
        version (another writer changed only metadata, such as a shard ring's published
        annotation) is tried once more on a fresh read."""
        cfg = self._config
        for attempt in range(2):
            lease, record = self._observed_lease, self._observed_record
            if lease is None or record is None or record.holder != cfg.identity:
                return
            released = dataclasses.replace(
                record,
                holder="",
                duration_seconds=_RELEASED_DURATION_SECONDS,
                renew_time=self._micro_time(),
            )
            if self._write(lease, released, None):
                logger.info("released lease", extra=self._context())
                return
            if attempt == 0:
                try:
                    self._observe(self._api.get(LEASES, cfg.lease_name, cfg.namespace))
                except ApiError as exc:
                    self._log_api_error("cannot read the lease", exc)
                    break
        logger.warning("lease not released", extra=self._context())

    # -- state ----------------------------------------------------------------------------

    def _note_written(self, lease: JsonDict) -> None:
        record = _Record.from_lease(lease)
        if record.holder != self._config.identity or not record.renew_time:
            return
        with self._lock:
            self._written[record.renew_time] = self._round_started
            while len(self._written) > 32:
                del self._written[next(iter(self._written))]

    def _observe(self, lease: JsonDict) -> None:
        """Remember the Lease; note when its record changed and report a new holder."""
        record = _Record.from_lease(lease)
        self._observed_lease = lease
        if record != self._observed_record:
            self._observed_record = record
            self._observed_at = self._clock.now()
        with self._lock:
            self._leader = record.holder
        if record.holder and record.holder != self._reported_leader:
            self._reported_leader = record.holder
            logger.info("new leader observed", extra=self._context())
            if self._on_new_leader is not None:
                self._on_new_leader(record.holder)

    def _set_leading(self, leading: bool) -> None:
        with self._lock:
            changed = self._leading != leading
            self._leading = leading
        if changed:
            MASTER_STATUS.labels(self._config.lease_name).set(1 if leading else 0)

    def _lose(self, reason: str) -> None:
        self._set_leading(False)
        logger.error("leader election lost", extra={**self._context(), "reason": reason})
        if self._on_stopped_leading is not None:
            self._on_stopped_leading()

    def _elector_client(self) -> tuple[KubeClient, bool]:
        """The client for this run and whether we own it: a timeout within the renew
        deadline, no retries and no client-side rate limiter (a limiter's wait would come
        before the timeout starts, and the controllers' requests must never delay a
        renew)."""
        options = self._client.options
        limit = self._config.renew_deadline
        if options.max_retries == 0 and options.timeout <= limit and options.qps <= 0:
            return self._client, False
        short = dataclasses.replace(
            options, timeout=min(options.timeout, limit), max_retries=0, qps=0.0
        )
        return self._client.with_options(short), True

    def _micro_time(self) -> str:
        """Now as MicroTime, strictly after our previous write (so a renew always changes
        the record, even if the wall clock stepped back)."""
        now = datetime.now(UTC)
        if self._last_written is not None and now <= self._last_written:
            now = self._last_written + timedelta(microseconds=1)
        self._last_written = now
        return now.strftime(_MICRO_TIME_FORMAT)

    def _context(self) -> dict[str, Any]:
        return {
            "lease": self._lease_key,
            "identity": self._config.identity,
            "holder": self._leader,
        }

    def _log_api_error(self, message: str, exc: ApiError) -> None:
        logger.warning(
            message,
            extra={
                **self._context(),
                "status": exc.status,
                "reason": exc.reason,
                "error": str(exc),
            },
        )


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
