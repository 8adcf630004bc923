"""The secure metrics guard without an API server: what it asks (TokenReview, then a
SubjectAccessReview with the user's groups, uid and extra and the request path), what it
answers (kube-rbac-proxy's 401/403/500 texts), and its cache (per token hash and per
user and path, for the TTL; failures are not cached)."""

from __future__ import annotations

from typing import Any

import pytest

from manager.clock import FakeClock
from manager.errors import ServerError
from manager.metricsauth import MetricsAuth

USER = {
    "username": "system:serviceaccount:monitoring:prometheus",
    "uid": "u-1",
    "groups": ["system:serviceaccounts", "system:authenticated"],
    "extra": {"authentication.kubernetes.io/pod-name": ["prometheus-0"]},
}


class FakeApi:
    """Answers reviews: ``tokens`` known, ``allowed`` (user, path) pairs."""

    def __init__(self) -> None:
        self.tokens = {"good": USER}
        self.allowed: set[tuple[str, str]] = set()
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail = False

    def request(self, method: str, path: str, *, body: Any, idempotent: bool) -> dict[str, Any]:
        assert method == "POST" and idempotent
        self.calls.append((path.rsplit("/", 1)[1], body))
        if self.fail:
            raise ServerError("etcd is having a day", status=500)
        spec = body["spec"]
        if path.endswith("/tokenreviews"):
            user = self.tokens.get(spec["token"])
            status = {"authenticated": True, "user": user} if user else {"authenticated": False}
            return {"status": status}
        attrs = spec["nonResourceAttributes"]
        return {"status": {"allowed": (spec["user"], attrs["path"]) in self.allowed}}


def _guard(api: FakeApi, clock: FakeClock, ttl: float = 10.0) -> MetricsAuth:
    return MetricsAuth(api, cache_ttl=ttl, clock=clock)  # type: ignore[arg-type]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_no_or_unknown_token_is_401_and_forbidden_is_403_with_kube_rbac_proxys_text() -> None:
    api, clock = FakeApi(), FakeClock()
    guard = _guard(api, clock)
    unauthorized = (401, "text/plain; charset=utf-8", b"Unauthorized\n")
    assert guard("/metrics", {})[:3] == unauthorized  # type: ignore[index]
    assert guard("/metrics", {"Authorization": "Basic dTpw"})[:3] == unauthorized  # type: ignore[index]
    assert guard("/metrics", bearer("nobody-issued-this"))[:3] == unauthorized  # type: ignore[index]
    assert api.calls == [("tokenreviews", api.calls[0][1])]  # no header, no review
    status, ctype, body, headers = guard("/metrics", bearer("good"))  # type: ignore[misc]
    assert (status, ctype) == (403, "text/plain; charset=utf-8")
    assert body == (
        b"Forbidden (user=system:serviceaccount:monitoring:prometheus, verb=get, "
        b"resource=, subresource=)\n"
    )
    assert headers["X-Content-Type-Options"] == "nosniff"
    sar = api.calls[-1]
    assert sar[0] == "subjectaccessreviews"
    assert sar[1]["spec"] == {
        "user": USER["username"],
        "groups": USER["groups"],
        "uid": "u-1",
        "extra": USER["extra"],
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }


def test_allowed_passes_and_answers_are_cached_for_the_ttl() -> None:
    api, clock = FakeApi(), FakeClock()
    guard = _guard(api, clock, ttl=10.0)
    api.allowed.add((USER["username"], "/metrics"))  # type: ignore[arg-type]
    assert guard("/metrics", bearer("good")) is None
    assert len(api.calls) == 2
    clock.step(9.0)
    assert guard("/metrics", bearer("good")) is None
    assert len(api.calls) == 2  # both answers from the cache
    # another path is another decision (the token's review is reused)
    assert guard("/statusz", bearer("good"))[0] == 403  # type: ignore[index]
    assert [c[0] for c in api.calls[2:]] == ["subjectaccessreviews"]
    # a revoked grant shows after the TTL
    api.allowed.clear()
    clock.step(1.5)
    assert guard("/metrics", bearer("good"))[0] == 403  # type: ignore[index]
    assert [c[0] for c in api.calls[3:]] == ["tokenreviews", "subjectaccessreviews"]
    # tokens are cached by hash, not kept
    assert "good" not in repr(guard._tokens)


def test_failed_reviews_are_not_cached_and_answer_401_or_500() -> None:
    api, clock = FakeApi(), FakeClock()
    guard = _guard(api, clock)
    api.fail = True
    assert guard("/metrics", bearer("good"))[:3] == (
        401,
        "text/plain; charset=utf-8",
        b"Unauthorized\n",
    )  # type: ignore[index]
    api.fail = False
    assert guard("/metrics", bearer("good"))[0] == 403  # type: ignore[index]
    clock.step(20)
    api.tokens = {"good": USER}
    guard = _guard(api, clock)
    guard.authenticate("good")
    api.fail = True
    status, _, body, _ = guard("/metrics", bearer("good"))  # type: ignore[misc]
    assert status == 500
    assert body.startswith(b"Authorization error (user=system:serviceaccount:monitoring:prometheus")
    api.fail = False
    api.allowed.add((USER["username"], "/metrics"))  # type: ignore[arg-type]
    assert guard("/metrics", bearer("good")) is None  # the failure was not cached


def test_ttl_zero_asks_every_time() -> None:
    api, clock = FakeApi(), FakeClock()
    guard = _guard(api, clock, ttl=0.0)
    guard("/metrics", bearer("good"))
    guard("/metrics", bearer("good"))
    assert len(api.calls) == 4
    with pytest.raises(ValueError, match="cache_ttl"):
        _guard(api, clock, ttl=-1.0)
