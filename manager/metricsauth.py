"""Who may read ``/metrics`` (and the z-pages): callers authenticated by a TokenReview and
authorized by a SubjectAccessReview, with a short cache (controller-runtime's
``pkg/metrics/filters.WithAuthenticationAndAuthorization``, kubebuilder's default; the
answers are kube-rbac-proxy's).

For each request:

* No ``Authorization: Bearer <token>`` header, or a token the API server's TokenReview
  does not authenticate, or a TokenReview that fails: **401** ``Unauthorized``.
* A SubjectAccessReview for the token's user, groups, uid and extra, with
  ``nonResourceAttributes {path, verb: get}`` (the request path: ``/metrics``,
  ``/statusz``, ``/flagz``); not allowed: **403**
  ``Forbidden (user=<name>, verb=get, resource=, subresource=)``; a review that fails:
  **500** ``Authorization error (...)``.
* Otherwise the route answers.

Answers are cached for ``cache_ttl`` seconds (allowed and denied alike; a failed review
is not cached), keyed by the token's SHA-256 (the token itself is not kept) and, for
authorization, by user and path: Prometheus scraping every 30 s costs the API server two
requests per ``cache_ttl`` and replica, not two per scrape. The cache holds at most
``max_entries`` answers (oldest dropped first).

The reviews are made with the manager's unfenced client: a standby answers scrapes too.
Its ServiceAccount needs ``create`` on ``tokenreviews`` and ``subjectaccessreviews``
(``overseer rbac`` emits both).

Thread-safe: one lock guards the caches; reviews run outside it.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from manager.client import KubeClient
from manager.clock import Clock, RealClock
from manager.errors import ApiError

__all__ = ["MetricsAuth", "UserInfo"]

logger = logging.getLogger(__name__)

_TEXT: Final = "text/plain; charset=utf-8"
_HEADERS: Final = {"X-Content-Type-Options": "nosniff"}
VERB: Final = "get"  # the server answers GET only


@dataclass(frozen=True, slots=True)
class UserInfo:
    """Who a TokenReview says the caller is."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


class MetricsAuth:
    """The guard of the metrics server (:data:`manager.healthz.Guard`).

    Args:
        client: an unfenced client; its identity needs ``create`` on ``tokenreviews``
            and ``subjectaccessreviews``.
        cache_ttl: seconds an answer is reused (0: every request asks).
        audiences: the TokenReview's ``spec.audiences`` (empty: the API server's own).
        max_entries: the most answers kept in each cache.
        clock: monotonic time for the cache.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        cache_ttl: float = 10.0,
        audiences: tuple[str, ...] = (),
        max_entries: int = 1024,
        clock: Clock | None = None,
    ) -> None:
        if cache_ttl < 0:
            raise ValueError(f"cache_ttl must be >= 0, got {cache_ttl}")
        self._client = client
        self._ttl = cache_ttl
        self._audiences = audiences
        self._max = max_entries
        self._clock: Clock = clock or RealClock()
        self._lock = threading.Lock()
        self._tokens: OrderedDict[str, tuple[float, UserInfo | None]] = OrderedDict()
        self._decisions: OrderedDict[tuple[Any, ...], tuple[float, bool]] = OrderedDict()

    def __call__(
        self, path: str, headers: Mapping[str, str]
    ) -> tuple[int, str, bytes, Mapping[str, str]] | None:
        """None when the caller may read ``path``, else the answer to send instead."""
        auth = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
        scheme, _, token = auth.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return _answer(401, "Unauthorized")
        try:
            user = self.authenticate(token)
        except ApiError as exc:
            logger.warning("token review failed", extra={"error": str(exc)})
            return _answer(401, "Unauthorized")
        if user is None:
            return _answer(401, "Unauthorized")
        what = f"user={user.name}, verb={VERB}, resource=, subresource="
        try:
            allowed = self.authorize(user, path)
        except ApiError as exc:
            logger.warning(
                "subject access review failed",
                extra={"user": user.name, "path": path, "error": str(exc)},
            )
            return _answer(500, f"Authorization error ({what})")
        if not allowed:
            logger.debug("metrics request forbidden", extra={"user": user.name, "path": path})
            return _answer(403, f"Forbidden ({what})")
        return None

    def authenticate(self, token: str) -> UserInfo | None:
        """The user ``token`` belongs to, or None when the API server does not know it.

        Raises:
            ApiError: the TokenReview failed (not cached).
        """
        key = hashlib.sha256(token.encode()).hexdigest()
        hit = self._cached(self._tokens, key)
        if hit is not None:
            cached: UserInfo | None = hit[1]
            return cached
        spec: dict[str, Any] = {"token": token}
        if self._audiences:
            spec["audiences"] = list(self._audiences)
        review = self._client.request(
            "POST",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec},
            idempotent=True,  # creates nothing: repeating it is safe
        )
        status = review.get("status") or {}
        user: UserInfo | None = None
        if status.get("authenticated") is True:
            info = status.get("user") or {}
            extra = info.get("extra") or {}
            user = UserInfo(
                name=str(info.get("username") or ""),
                uid=str(info.get("uid") or ""),
                groups=tuple(str(g) for g in info.get("groups") or ()),
                extra=tuple(sorted((str(k), tuple(map(str, v or ()))) for k, v in extra.items())),
            )
        self._store(self._tokens, key, user)
        return user

    def authorize(self, user: UserInfo, path: str) -> bool:
        """Whether ``user`` may GET ``path`` (a non-resource URL).

        Raises:
            ApiError: the SubjectAccessReview failed (not cached).
        """
        key = (user, path)
        hit = self._cached(self._decisions, key)
        if hit is not None:
            return bool(hit[1])
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": VERB},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        review = self._client.request(
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            body={
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": spec,
            },
            idempotent=True,
        )
        allowed = (review.get("status") or {}).get("allowed") is True
        self._store(self._decisions, key, allowed)
        return allowed

    def _cached(
        self, cache: OrderedDict[Any, tuple[float, Any]], key: Any
    ) -> tuple[float, Any] | None:
        if self._ttl <= 0:
            return None
        now = self._clock.now()
        with self._lock:
            hit = cache.get(key)
            if hit is None:
                return None
            if hit[0] <= now:
                del cache[key]
                return None
            return hit

    def _store(self, cache: OrderedDict[Any, tuple[float, Any]], key: Any, value: Any) -> None:
        if self._ttl <= 0:
            return
        with self._lock:
            cache[key] = (self._clock.now() + self._ttl, value)
            cache.move_to_end(key)
            while len(cache) > self._max:
                cache.popitem(last=False)


def _answer(status: int, message: str) -> tuple[int, str, bytes, Mapping[str, str]]:
    # Go's http.Error: the message, a newline, text/plain, nosniff
    return status, _TEXT, (message + "\n").encode(), _HEADERS
