"""Who is asking: the local API server's bearer-token authentication.

kube-apiserver runs a chain of authenticators over each request (client certificates,
static tokens, service-account JWTs, ...); the first that recognises the credentials
names the user, and a request with none is ``system:anonymous`` in the group
``system:unauthenticated`` (``staging/src/k8s.io/apiserver/pkg/authentication``). The
local server knows three kinds of bearer token:

* the **admin token** it made for itself: ``system:admin`` in ``system:masters`` (the
  group kube's authorizer lets do anything), carried by its default kubeconfig when it
  enforces RBAC;
* **static tokens** registered by :meth:`Authenticator.add_token` (kube's
  ``--token-auth-file``; :meth:`~apiserver.LocalApiServer.kubeconfig_for` uses
  one per user);
* **service-account tokens** it issued through ``serviceaccounts/{name}/token``: valid
  until they expire and while that ServiceAccount (the same uid) exists, as kube's
  service-account token authenticator checks them. The user is
  ``system:serviceaccount:<namespace>:<name>`` in ``system:serviceaccounts``,
  ``system:serviceaccounts:<namespace>`` and ``system:authenticated``.

Any other token is refused (401) when the server enforces RBAC; when it does not, an
unknown token still names the user (the audit's convention: a kubeconfig carries its
user's name as its token).

Thread-safe: the token tables are guarded by one lock.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "ADMIN_USER",
    "ANONYMOUS",
    "Authenticator",
    "IssuedToken",
    "UserInfo",
    "service_account_user",
]

JsonDict = dict[str, Any]

ADMIN_USER: Final = "system:admin"
MASTERS_GROUP: Final = "system:masters"
AUTHENTICATED: Final = "system:authenticated"
UNAUTHENTICATED: Final = "system:unauthenticated"


@dataclass(frozen=True, slots=True)
class UserInfo:
    """An authenticated user (``user.Info``)."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> JsonDict:
        """As a TokenReview's ``status.user`` or a SelfSubjectReview's ``userInfo``."""
        out: JsonDict = {"username": self.name}
        if self.uid:
            out["uid"] = self.uid
        out["groups"] = list(self.groups)
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra.items()}
        return out


ANONYMOUS: Final = UserInfo("system:anonymous", groups=(UNAUTHENTICATED,))


def service_account_user(namespace: str, name: str, uid: str = "") -> UserInfo:
    """The user a ServiceAccount's token authenticates as."""
    return UserInfo(
        f"system:serviceaccount:{namespace}:{name}",
        uid,
        ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED),
    )


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """A service-account token this server issued."""

    namespace: str
    name: str  # the ServiceAccount
    uid: str  # the ServiceAccount's uid when issued
    expires: float  # wall clock, seconds since the epoch
    audiences: tuple[str, ...]


class Authenticator:
    """Bearer tokens → users.

    Args:
        account_uid: ``(namespace, name) -> uid`` of a ServiceAccount that exists now,
            or None: a service-account token is valid only while its account does.
        clock: wall clock (seconds since the epoch), for token expiry.
    """

    def __init__(
        self,
        account_uid: Callable[[str, str], str | None],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._account_uid = account_uid
        self._clock = clock
        self._lock = threading.Lock()
        self.admin_token = secrets.token_urlsafe(32)
        self.admin = UserInfo(ADMIN_USER, groups=(MASTERS_GROUP, AUTHENTICATED))
        self._static: dict[str, UserInfo] = {self.admin_token: self.admin}
        self._issued: dict[str, IssuedToken] = {}

    def add_token(self, token: str, user: str, groups: Sequence[str] = ()) -> None:
        """Accept ``token`` as ``user`` (in ``groups`` and ``system:authenticated``)."""
        if not token or not user:
            raise ValueError("a static token needs a token and a user name")
        info = UserInfo(user, groups=(*dict.fromkeys(groups), AUTHENTICATED))
        with self._lock:
            self._static[token] = info

    def issued(self, token: str, issued: IssuedToken) -> None:
        """Remember a service-account token handed out by ``serviceaccounts/token``."""
        with self._lock:
            self._issued[token] = issued

    def lookup(self, token: str, audiences: Sequence[str] = ()) -> UserInfo | None:
        """The user ``token`` authenticates, or None (unknown, expired, its account gone,
        or none of ``audiences`` among the token's when both are given)."""
        with self._lock:
            static = self._static.get(token)
            sa = self._issued.get(token) if static is None else None
        if static is not None:
            return static
        if sa is None:
            return None
        if sa.expires <= self._clock():
            return None
        if audiences and not set(audiences) & set(sa.audiences):
            return None
        uid = self._account_uid(sa.namespace, sa.name)
        if uid is None or uid != sa.uid:
            return None
        return service_account_user(sa.namespace, sa.name, uid)
