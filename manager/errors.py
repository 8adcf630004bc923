"""The exception tree of Overseer.

Every error the framework raises on purpose derives from :class:`OverseerError`. API
errors are mapped from HTTP answers (a Kubernetes ``Status`` body) in ``manager.client``
into the small tree below, so callers catch ``NotFound`` or ``Conflict`` instead of
comparing status codes.

Safe to share between threads: exceptions carry only immutable data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "CacheNotSynced",
    "ClusterNotFound",
    "ConfigError",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "LeaderElectionLost",
    "NamespaceTerminating",
    "NotFound",
    "OutcomeUnknown",
    "OverseerError",
    "PluginLoadError",
    "PluginSetupError",
    "RbacRefusal",
    "ServerError",
    "TerminalError",
    "TooManyRequests",
    "Unauthorized",
    "Unavailable",
    "WriteFenced",
    "api_error_from_status",
]


class OverseerError(Exception):
    """Base of every error Overseer raises on purpose."""


class ConfigError(OverseerError):
    """The configuration is invalid; ``problems`` lists every error with its path."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


class PluginLoadError(OverseerError):
    """A controller plugin could not be loaded (names the distribution and the cause).

    ``reason`` is the cause alone (``ModuleNotFoundError: No module named 'x'``), for
    places that show the controller and its distribution already.
    """

    def __init__(self, message: str, *, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


class PluginSetupError(PluginLoadError):
    """A controller plugin's ``setup(mgr, ctx)`` raised: ``name`` is the controller,
    the cause is chained (``__cause__``)."""

    def __init__(self, name: str, cause: BaseException) -> None:
        reason = f"{type(cause).__name__}: {cause}"
        super().__init__(f"controllers.{name}: setup failed: {reason}", reason=reason)
        self.name = name


class TerminalError(OverseerError):
    """Raised by a reconciler for a failure that retrying cannot fix: no requeue."""


class CacheNotSynced(OverseerError):
    """A cache read waited for its informer's first sync, and it did not come in time."""


class ClusterNotFound(OverseerError):
    """No cluster of that name is engaged in the fleet now (never known, removed, or
    disengaged while unreachable): multicluster-runtime's ``ErrClusterNotFound``. A
    reconcile that raises it is retried with backoff, as for any error: the cluster may
    come back."""

    def __init__(self, name: str, *, known: tuple[str, ...] = ()) -> None:
        listed = ", ".join(known) or "none"
        super().__init__(f"cluster {name!r} is not engaged (engaged: {listed})")
        self.name = name


class LeaderElectionLost(OverseerError):
    """This process led and lost the Lease: leader-only work must stop at once."""


class WriteFenced(OverseerError):
    """A write refused by this replica before it was sent: it may not write now (its
    Lease is no longer valid on its own clock, or the key belongs to another shard).

    Nothing reached the API server. Not an :class:`ApiError`, so a reconciler that
    handles API failures does not mistake it for one; the controller ends the reconcile
    without a retry (the replica that may write will handle the object).
    """

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason  # e.g. "not_leader", "not_owner"


class ApiError(OverseerError):
    """An answer from the API server that is not a success.

    Attributes:
        status: HTTP status code (0 when the server was not reached).
        reason: the ``Status.reason`` (``NotFound``, ``Conflict``, ...), or "" if none.
        message: the ``Status.message`` or a description of the failure.
        details: the ``Status.details`` mapping, if the server sent one.
        retry_after: seconds from a ``Retry-After`` header or ``details.retryAfterSeconds``.
    """

    default_status = 0

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        reason: str = "",
        details: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = self.default_status if status is None else status
        self.reason = reason
        self.message = message
        self.details = details
        self.retry_after = retry_after

    def __str__(self) -> str:
        head = f"{self.status} {self.reason}".strip() if self.status else self.reason
        return f"{head}: {self.message}" if head else self.message


class BadRequest(ApiError):
    """400: the request itself is malformed."""

    default_status = 400


class Unauthorized(ApiError):
    """401: no or wrong credentials."""

    default_status = 401


@dataclass(frozen=True, slots=True)
class RbacRefusal:
    """What an RBAC 403 says was refused, read from kube-apiserver's message
    (``User "u" cannot delete resource "configmaps" in API group "" in the namespace
    "team"``: ``responsewriters.forbiddenMessage``)."""

    user: str
    verb: str
    resource: str  # with its subresource: "pods/log"
    group: str
    namespace: str  # "" at the cluster scope

    @property
    def rule(self) -> dict[str, list[str]]:
        """The PolicyRule that would allow it (a plugin's ``rbac_rules`` entry)."""
        return {"apiGroups": [self.group], "resources": [self.resource], "verbs": [self.verb]}

    def describe(self) -> str:
        """``delete configmaps in the namespace "team"`` (or ``... at the cluster scope``)."""
        what = f"{self.resource}.{self.group}" if self.group else self.resource
        where = f'in the namespace "{self.namespace}"' if self.namespace else "at the cluster scope"
        return f"{self.verb} {what} {where}"


_RBAC_MESSAGE = re.compile(
    r'User "(?P<user>[^"]*)" cannot (?P<verb>\S+) resource "(?P<resource>[^"]+)" in API '
    r'group "(?P<group>[^"]*)"(?: in the namespace "(?P<namespace>[^"]+)"| at the cluster scope)'
)


class Forbidden(ApiError):
    """403: RBAC (or admission) refused the request."""

    default_status = 403

    @property
    def refusal(self) -> RbacRefusal | None:
        """What RBAC refused (verb, resource, group, namespace), when the message is
        kube-apiserver's authorization one; None for another 403 (admission, say)."""
        match = _RBAC_MESSAGE.search(self.message)
        if match is None:
            return None
        return RbacRefusal(
            user=match["user"],
            verb=match["verb"],
            resource=match["resource"],
            group=match["group"],
            namespace=match["namespace"] or "",
        )


class NamespaceTerminating(Forbidden):
    """403 from the NamespaceLifecycle admission plugin: a create in a namespace that is
    being deleted (``details.causes[].reason`` = ``NamespaceTerminating``). Retrying
    cannot succeed: the namespace, and everything in it, is going away."""


class NotFound(ApiError):
    """404: the object (or the namespace, or the resource) does not exist."""

    default_status = 404


class Conflict(ApiError):
    """409: an update with a stale resourceVersion (optimistic concurrency)."""

    default_status = 409


class AlreadyExists(Conflict):
    """409 with reason AlreadyExists: a create of a name that is taken."""


class Gone(ApiError):
    """410: the requested resourceVersion has been compacted away: relist."""

    default_status = 410


class Invalid(ApiError):
    """422: the object failed validation; ``details.causes`` names the fields."""

    default_status = 422


class TooManyRequests(ApiError):
    """429: throttled by the server; ``retry_after`` says how long to wait."""

    default_status = 429


class ServerError(ApiError):
    """5xx: the server failed (500, 502, 504, ...)."""

    default_status = 500


class Unavailable(ServerError):
    """503, or the server could not be reached at all (connection refused, reset, timeout)."""

    default_status = 503


class OutcomeUnknown(Unavailable):
    """A write whose request reached the server (or may have) and whose answer never
    came: the connection was reset or closed, or the answer timed out. The server may
    have applied it, or not; only a read tells. Status 0, reason ``OutcomeUnknown``.

    The client never sends such a write again by itself unless a replay cannot apply it
    twice (a resourceVersion or uid precondition); a create is never resent (client-go
    returns the error too). A reconcile that meets it fails and is requeued: the next
    one sees what the server did (the object created, or not) and converges.
    """


def api_error_from_status(
    status: int,
    body: dict[str, Any] | None,
    *,
    retry_after: float | None = None,
    fallback_message: str = "",
) -> ApiError:
    """Map an HTTP status and a decoded ``Status`` body to the narrowest error class."""
    body = body or {}
    reason = str(body.get("reason") or "")
    message = str(body.get("message") or fallback_message or f"HTTP {status}")
    details = body.get("details") if isinstance(body.get("details"), dict) else None
    if retry_after is None and details and details.get("retryAfterSeconds") is not None:
        try:
            retry_after = float(details["retryAfterSeconds"])
        except (TypeError, ValueError):
            retry_after = None
    cls: type[ApiError]
    if status == 409 and reason == "AlreadyExists":
        cls = AlreadyExists
    elif status in (503, 0):
        cls = Unavailable
    elif status >= 500:
        cls = ServerError
    else:
        cls = {
            400: BadRequest,
            401: Unauthorized,
            403: Forbidden,
            404: NotFound,
            409: Conflict,
            410: Gone,
            422: Invalid,
            429: TooManyRequests,
        }.get(status, ApiError)
    if cls is Forbidden and _has_cause(details, "NamespaceTerminating"):
        cls = NamespaceTerminating
    return cls(message, status=status, reason=reason, details=details, retry_after=retry_after)


def _has_cause(details: dict[str, Any] | None, reason: str) -> bool:
    causes = (details or {}).get("causes")
    if not isinstance(causes, list):
        return False
    return any(isinstance(c, dict) and c.get("reason") == reason for c in causes)
