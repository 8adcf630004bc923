"""z-pages: the /statusz text and HTML views, content negotiation, and /flagz with
secrets redacted."""

from __future__ import annotations

from dataclasses import dataclass, field

from manager.config import OverseerConfig, parse
from manager.healthz import Negotiated
from manager.sharding import RingStatus
from manager.zpages import (
    REDACTED,
    WARNING,
    ControllerStatus,
    Status,
    flag_values,
    flagz_route,
    render_flagz,
    render_statusz_html,
    render_statusz_text,
    statusz_route,
)


def _status(**changes: object) -> Status:
    fields: dict[str, object] = {
        "component": "overseer",
        "version": "0.1.0",
        "python": "3.11.2",
        "identity": "pod-a_1234",
        "started": 1_700_000_000.0,
        "uptime": 3725.0,
        "role": "leader",
        "leader": "pod-a_1234",
        "lease": "overseer-system/overseer-leader",
        "ring": None,
        "controllers": (
            ControllerStatus(
                name="exposer",
                mode="leader-elected",
                running=True,
                workers=2,
                active=1,
                queue_depth=7,
                last_error="shop/web: Conflict: <the object> was modified",
                last_error_time=1_700_000_100.0,
            ),
            ControllerStatus(
                name="podport",
                mode="leader-elected",
                running=True,
                workers=1,
                active=0,
                queue_depth=0,
            ),
        ),
    }
    fields.update(changes)
    return Status(**fields)  # type: ignore[arg-type]


def test_statusz_text_is_kube_shaped() -> None:
    text = render_statusz_text(_status())
    lines = text.splitlines()
    assert lines[:3] == ["overseer statusz", WARNING, ""]
    assert "Started: Tue Nov 14 22:13:20 UTC 2023" in lines
    assert "Up: 1 hr 02 min 05 sec" in lines
    assert "Binary version: 0.1.0" in lines
    assert "Role: leader" in lines
    assert "Leader: pod-a_1234" in lines
    assert "Lease: overseer-system/overseer-leader" in lines
    assert "Shard ring:" not in text
    header = next(line for line in lines if line.strip().startswith("NAME"))
    exposer = next(line for line in lines if line.strip().startswith("exposer"))
    assert header.split() == [
        "NAME",
        "MODE",
        "RUNNING",
        "WORKERS",
        "ACTIVE",
        "QUEUE",
        "LAST",
        "ERROR",
    ]
    assert exposer.split()[:6] == ["exposer", "leader-elected", "yes", "2", "1", "7"]
    assert "shop/web: Conflict: <the object> was modified (at Tue Nov 14" in exposer
    podport = next(line for line in lines if line.strip().startswith("podport"))
    assert podport.split() == ["podport", "leader-elected", "yes", "1", "0", "0", "-"]


def test_statusz_shows_the_ring_and_keys_owned() -> None:
    ring = RingStatus(
        ring="overseer",
        lease="overseer-pod-a",
        member=True,
        version="abc123",
        members=("overseer-pod-a", "overseer-pod-b"),
        keys_owned=42,
    )
    text = render_statusz_text(_status(ring=ring, lease="", role="leader (no election)"))
    assert "  Member: yes" in text
    assert "  Keys owned: 42" in text
    assert "  Members: overseer-pod-a, overseer-pod-b" in text
    assert "Leader:" not in text  # no leader election, no Lease
    page = render_statusz_html(_status(ring=ring))
    assert '<td id="ring-keys-owned">42</td>' in page


def test_statusz_html_escapes_and_marks_rows() -> None:
    page = render_statusz_html(_status(identity="<script>x</script>"))
    assert "<script>" not in page
    assert "&lt;script&gt;x&lt;/script&gt;" in page
    assert '<tr data-controller="exposer">' in page
    assert "&lt;the object&gt; was modified" in page
    assert '<td id="role">leader</td>' in page


def test_statusz_negotiates_text_or_html() -> None:
    route = Negotiated(statusz_route(_status))
    status, ctype, body, headers = route.answer("", "*/*")  # curl
    assert (status, ctype) == (200, "text/plain; charset=utf-8")
    assert body.startswith(b"overseer statusz\n")
    assert headers == {}
    browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
    _, ctype, body, headers = route.answer("", browser)
    assert ctype == "text/html; charset=utf-8"
    assert body.startswith(b"<!DOCTYPE html>")
    assert "script-src" not in headers["Content-Security-Policy"]
    assert headers["Content-Security-Policy"].startswith("default-src 'none'")
    assert route.answer("format=html", "*/*")[1] == "text/html; charset=utf-8"
    assert route.answer("format=text", browser)[1] == "text/plain; charset=utf-8"
    assert route.answer("", "text/html;q=0.5, text/plain")[1] == "text/plain; charset=utf-8"
    assert route.answer("", "text/html;q=0")[1] == "text/plain; charset=utf-8"


@dataclass(frozen=True, kw_only=True, slots=True)
class _PluginConfig:
    domain: str = "example.com"
    api_token: str = "s3cr3t"
    webhook: dict[str, str] = field(default_factory=lambda: {"url": "u", "password": "pw"})
    signing: str = field(default="k3y", metadata={"secret": True})


def test_flagz_lists_the_effective_configuration_with_secrets_redacted() -> None:
    config, controllers = parse(
        {"leaderElection": {"leaseDuration": 20}, "controllers": {"p": {"workers": 3}}},
        {"p": _PluginConfig},
    )
    values = dict(flag_values(config, dict(controllers)))
    assert values["leaderElection.leaseDuration"] == "20.0"
    assert values["metricsBindAddress"] == ":8080"
    assert values["controllers.p.workers"] == "3"
    assert values["controllers.p.domain"] == "example.com"
    assert values["controllers.p.apiToken"] == REDACTED
    assert values["controllers.p.webhook.password"] == REDACTED
    assert values["controllers.p.webhook.url"] == "u"
    assert values["controllers.p.signing"] == REDACTED
    page = render_flagz("overseer", flag_values(config, dict(controllers)))
    assert page.splitlines()[:3] == ["overseer flagz", WARNING, ""]
    assert "s3cr3t" not in page and "pw" not in page.split() and "k3y" not in page
    assert "controllers.p.workers=3" in page.splitlines()
    status, ctype, body = flagz_route("overseer", [("a", "1")])("", None)
    assert (status, ctype, body) == (
        200,
        "text/plain; charset=utf-8",
        render_flagz("overseer", [("a", "1")]).encode(),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class _Tls:
    secret_name: str = "web-tls"
    token_file: str = "/var/run/token"


@dataclass(frozen=True, kw_only=True, slots=True)
class _QuotaConfig:
    tls: _Tls = field(default_factory=_Tls)
    hard: dict[str, str] = field(default_factory=lambda: {"requests.cpu": "8", "pods": "10"})
    client_secret: str = "hidden"


def test_flagz_shows_names_and_paths_of_secrets_and_keys_with_dots_unambiguously() -> None:
    """A Secret's *name*, or a token's *path*, is not a secret; a map key with a dot
    (a ResourceQuota's ``requests.cpu``) is quoted, not taken for two levels."""
    config, controllers = parse({"controllers": {"q": {}}}, {"q": _QuotaConfig})
    values = dict(flag_values(config, dict(controllers)))
    assert values["controllers.q.tls.secretName"] == "web-tls"
    assert values["controllers.q.tls.tokenFile"] == "/var/run/token"
    assert values["controllers.q.clientSecret"] == REDACTED
    assert values['controllers.q.hard["requests.cpu"]'] == "8"
    assert values["controllers.q.hard.pods"] == "10"
    assert "controllers.q.hard.requests.cpu" not in values


def test_flagz_of_options_without_a_file() -> None:
    values = dict(flag_values(OverseerConfig()))
    assert values["controllers"] == "{}"
    assert values["log.format"] == "text"
