"""The client's rules for sending a request again (issue 31, defect 2), against the stub
server of ``test_kube``.

A request whose bytes may have reached the server is sent again only when a replay
cannot apply it twice: GET, or a write with a precondition the server checks (a
resourceVersion for PUT and PATCH, a uid or resourceVersion for DELETE). Anything else
that got no answer raises :class:`~manager.errors.OutcomeUnknown` after one send. The
stub "commits" a request by recording it, then dies before answering (an RST, or a
``100 Continue`` and a close), on a connection that has carried a request before: the
case where the old client assumed the server had done nothing and sent it again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from manager.client import KubeClient, Write
from manager.errors import OutcomeUnknown, Unavailable
from tests.unit.test_kube import CONFIGMAPS, PODS, Reply, StubApiServer, pod

POD_PATH = "/api/v1/namespaces/team/pods"


def _warm(client: KubeClient, stub: StubApiServer) -> None:
    """One answered request, so the next one goes on a kept-alive, reused connection."""
    stub.reply("GET", f"{POD_PATH}/warm", Reply(200, pod("warm", "team")))
    client.get(PODS, "warm", "team")


@pytest.mark.parametrize("death", ["reset", "interim_then_close"])
def test_a_create_the_server_handled_but_never_answered_is_sent_once(
    client: KubeClient, stub: StubApiServer, death: str
) -> None:
    _warm(client, stub)
    stub.reply("POST", POD_PATH, Reply(**{death: True}), Reply(201, pod("a", "team")))
    with pytest.raises(OutcomeUnknown) as info:
        client.create(PODS, pod("a", "team"))
    assert len(stub.requests("POST")) == 1
    assert info.value.status == 0 and info.value.reason == "OutcomeUnknown"
    assert "POST /api/v1/namespaces/team/pods" in str(info.value)


def test_a_write_session_create_the_server_never_answered_is_sent_once(
    client: KubeClient, stub: StubApiServer
) -> None:
    stub.reply("POST", POD_PATH, Reply(201, pod("a", "team")), Reply(reset=True))
    with client.write_session() as session:
        session.create(PODS, pod("a", "team"))
        with pytest.raises(OutcomeUnknown):
            session.create(PODS, pod("b", "team"))
    assert [s.json()["metadata"]["name"] for s in stub.requests("POST")] == ["a", "b"]


@pytest.mark.parametrize("death", ["reset", "interim_then_close"])
def test_a_pipeline_whose_connection_dies_unanswered_sends_nothing_again(
    client: KubeClient, stub: StubApiServer, death: str
) -> None:
    stub.reply(
        "POST",
        POD_PATH,
        Reply(201, pod("w", "team")),  # the session's connection is reused afterwards
        Reply(201, pod("a", "team")),
        Reply(**{death: True}),
        Reply(201, pod("c", "team")),
        Reply(201, pod("x", "team")),
    )
    with client.write_session() as session:
        session.create(PODS, pod("w", "team"))
        results = session.pipeline([Write.create(PODS, pod(n, "team")) for n in "abc"])
    if death == "interim_then_close":  # an orderly close: a's answer is read
        assert isinstance(results[0], dict) and results[0]["metadata"]["name"] == "a"
    else:  # an RST discards what the client had not read yet: a's answer may be lost
        assert isinstance(results[0], dict | OutcomeUnknown)
    # b was handled and got no answer; c may or may not have been read: neither is resent
    assert all(isinstance(r, OutcomeUnknown) for r in results[1:]), results
    names = [s.json()["metadata"]["name"] for s in stub.requests("POST")]
    assert names in (["w", "a", "b"], ["w", "a", "b", "c"]), names


def test_what_a_server_closing_by_connection_close_did_not_answer_goes_again(
    client: KubeClient, stub: StubApiServer
) -> None:
    """``Connection: close`` on an answer: the server handles nothing more on that
    connection (RFC 9112 9.6), so the writes behind it were not handled: sent again."""
    closing = Reply(201, pod("a", "team"), {"Connection": "close"})
    stub.reply("POST", POD_PATH, closing, Reply(201, pod("b", "team")))
    with client.write_session() as session:
        a, b = session.pipeline([Write.create(PODS, pod(n, "team")) for n in "ab"])
    assert isinstance(a, dict) and isinstance(b, dict)
    assert [s.json()["metadata"]["name"] for s in stub.requests("POST")] == ["a", "b"]


def _cm(rv: str | None = None, uid: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "c", "namespace": "team"}
    if rv is not None:
        meta["resourceVersion"] = rv
    if uid is not None:
        meta["uid"] = uid
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


CM_PATH = "/api/v1/namespaces/team/configmaps/c"

# (what, method, the call, may it be replayed)
REPLAYS: list[tuple[str, str, Callable[[KubeClient], Any], bool]] = [
    ("get", "GET", lambda c: c.get(CONFIGMAPS, "c", "team"), True),
    ("put with a resourceVersion", "PUT", lambda c: c.replace(CONFIGMAPS, _cm(rv="7")), True),
    ("blind put", "PUT", lambda c: c.replace(CONFIGMAPS, _cm()), False),
    (
        "merge patch with a resourceVersion",
        "PATCH",
        lambda c: c.patch(
            CONFIGMAPS,
            "c",
            {"metadata": {"resourceVersion": "7"}, "data": {"k": "v"}},
            namespace="team",
        ),
        True,
    ),
    (
        "blind merge patch",
        "PATCH",
        lambda c: c.patch(CONFIGMAPS, "c", {"data": {"k": "v"}}, namespace="team"),
        False,
    ),
    (
        "blind server-side apply",
        "PATCH",
        lambda c: c.patch(
            CONFIGMAPS, "c", _cm(), namespace="team", patch_type="apply", field_manager="t"
        ),
        False,
    ),
    (
        "json patch testing the resourceVersion",
        "PATCH",
        lambda c: c.patch(
            CONFIGMAPS,
            "c",
            [
                {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "add", "path": "/data/k", "value": "v"},
            ],
            namespace="team",
            patch_type="json",
        ),
        True,
    ),
    (
        "json patch without a test",
        "PATCH",
        lambda c: c.patch(
            CONFIGMAPS,
            "c",
            [{"op": "add", "path": "/data/k", "value": "v"}],
            namespace="team",
            patch_type="json",
        ),
        False,
    ),
    (
        "delete with a uid precondition",
        "DELETE",
        lambda c: c.delete(CONFIGMAPS, "c", "team", preconditions={"uid": "u-1"}),
        True,
    ),
    ("blind delete", "DELETE", lambda c: c.delete(CONFIGMAPS, "c", "team"), False),
]


@pytest.mark.parametrize(
    ("what", "method", "call", "replayed"), REPLAYS, ids=[r[0] for r in REPLAYS]
)
def test_a_request_reset_after_it_was_sent_is_replayed_only_if_a_replay_cannot_apply_twice(
    *,
    client: KubeClient,
    stub: StubApiServer,
    sleeps: list[float],
    what: str,
    method: str,
    call: Callable[[KubeClient], Any],
    replayed: bool,
) -> None:
    _warm(client, stub)
    stub.reply(method, CM_PATH, Reply(reset=True), Reply(200, _cm(rv="8")))
    if replayed:
        assert call(client)["metadata"]["resourceVersion"] == "8"
        assert len(stub.requests(method)) == (3 if method == "GET" else 2)
        assert len(sleeps) == 1  # one wait between the two attempts
    else:
        with pytest.raises(OutcomeUnknown):
            call(client)
        assert len(stub.requests(method)) == 1
        assert sleeps == []


def test_503_with_retry_after_is_retried_for_a_create_as_client_go_does(
    client: KubeClient, stub: StubApiServer, sleeps: list[float]
) -> None:
    """client-go's checkWait: a 429 or 5xx that carries Retry-After is the server saying
    it did not do it and when to come back, for every verb."""
    asked = Reply(503, {"kind": "Status", "code": 503}, {"Retry-After": "2"})
    stub.reply("POST", POD_PATH, asked, Reply(201, pod("a", "team")))
    assert client.create(PODS, pod("a", "team"))["metadata"]["name"] == "a"
    assert len(stub.requests("POST")) == 2 and sleeps == [2.0]


def test_503_without_retry_after_is_retried_only_for_a_replayable_write(
    client: KubeClient, stub: StubApiServer, sleeps: list[float]
) -> None:
    failing = Reply(503, {"kind": "Status", "code": 503})
    stub.reply("PUT", CM_PATH, failing, failing, Reply(200, _cm(rv="8")))
    with pytest.raises(Unavailable):
        client.replace(CONFIGMAPS, _cm())  # blind: the 503 may have come after a commit
    assert len(stub.requests("PUT")) == 1
    assert client.replace(CONFIGMAPS, _cm(rv="7"))["metadata"]["resourceVersion"] == "8"
    assert len(stub.requests("PUT")) == 3


def test_a_401_in_a_write_session_fetches_credentials_again_for_the_next_write(
    client: KubeClient, stub: StubApiServer
) -> None:
    from manager.errors import Unauthorized

    class Rotating:  # an exec plugin's credentials: fetched again once rejected
        def __init__(self) -> None:
            self.token = "old"
            self.rejected_with: list[str] = []

        def authorization(self) -> str:
            return f"Bearer {self.token}"

        def rejected(self, authorization: str) -> None:
            self.rejected_with.append(authorization)
            self.token = "fresh"

    rotating = Rotating()
    client._config = dataclasses.replace(client._config, credentials=rotating)
    stub.reply(
        "POST", POD_PATH, Reply(401, {"kind": "Status", "code": 401}), Reply(201, pod("b", "team"))
    )
    with client.write_session() as session:
        with pytest.raises(Unauthorized):
            session.create(PODS, pod("a", "team"))
        session.create(PODS, pod("b", "team"))
    assert rotating.rejected_with == ["Bearer old"]
    assert [s.headers["authorization"] for s in stub.requests("POST")] == [
        "Bearer old",
        "Bearer fresh",
    ]
