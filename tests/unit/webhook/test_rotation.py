"""The managed certificate's rotation schedule, driven by an injected time: a serving
certificate renewed before it ends under the same CA, a CA renewed in three steps so
that an API server holding either bundle verifies what any replica serves, a Secret
that cannot be used made anew with the CAs replicas may still be serving under, and the
checks a replica makes before it serves a Secret."""

from __future__ import annotations

import base64
import datetime
import itertools
from typing import Any

import pytest

from manager.webhook.authority import (
    BACKDATE,
    Certificate,
    CertificateError,
    issue,
    new_authority,
)
from manager.webhook.rotation import (
    CA_CERT,
    CA_KEY,
    ROTATED_AT,
    TLS_CERT,
    TLS_KEY,
    Broken,
    RotationPolicy,
    ServingSecret,
    Step,
    observe,
    plan,
    read_secret,
    secret_body,
    service_names,
)

T0 = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
DAY = datetime.timedelta(days=1)
NAMES = service_names("overseer-webhook", "overseer-system")
POLICY = RotationPolicy(
    ca_validity=datetime.timedelta(days=300),
    cert_validity=datetime.timedelta(days=30),
    renew_before=1 / 3,
    overlap=datetime.timedelta(minutes=10),
)


def _object(step: Step, existing: dict[str, Any] | None = None) -> dict[str, Any]:
    """The Secret as the API server would store it after the step's write."""
    return secret_body(
        step, name="overseer-webhook-tls", namespace="ns", labels={}, existing=existing
    )


def _apply(secret: ServingSecret | None, *, now: datetime.datetime, injected: bool = True) -> Step:
    # injected: every configuration has carried the bundle since the Secret was written
    since = (secret.rotated_at if isinstance(secret, ServingSecret) else None) if injected else None
    return plan(secret, now=now, names=NAMES, policy=POLICY, injected_at=since)


def _reread(step: Step) -> ServingSecret:
    """Write the step's Secret and read it back as the next round would."""
    found = observe(_object(step), T0)
    assert isinstance(found, ServingSecret), found
    return found


def _verifies(bundle: tuple[Certificate, ...], leaf: Certificate, when: datetime.datetime) -> bool:
    """What an API server holding ``bundle`` as caBundle concludes of ``leaf``."""
    return leaf.valid_at(when) and any(leaf.signed_by(ca) and ca.valid_at(when) for ca in bundle)


def test_a_new_secret_has_a_ca_and_a_certificate_it_signed_for_the_service() -> None:
    step = _apply(None, now=T0)
    assert step.action == "create"
    secret = _reread(step)
    assert secret.ca is not None and secret.bundle == (secret.ca.certificate,)
    assert secret.issuer == secret.ca.certificate
    assert secret.leaf.dns_names == tuple(NAMES)
    assert "overseer-webhook.overseer-system.svc" in secret.leaf.dns_names
    # lifetimes as asked, from now (the backdating is not counted)
    assert secret.leaf.not_after == T0 + POLICY.cert_validity
    assert secret.ca.certificate.not_after == T0 + POLICY.ca_validity
    assert secret.leaf.not_before == T0 - BACKDATE
    assert secret.rotated_at == T0
    assert _verifies(secret.bundle, secret.leaf, T0)


def test_the_certificate_is_renewed_when_a_third_of_its_life_is_left_under_the_same_ca() -> None:
    first = _reread(_apply(None, now=T0))
    due = T0 + POLICY.cert_validity * (2 / 3)
    idle = _apply(first, now=due - datetime.timedelta(seconds=1))
    assert idle.action == "" and idle.secret is None
    assert idle.wake_at == due  # the rotator sleeps until then
    step = _apply(first, now=due)
    assert step.action == "issue" and "ends" in step.reason
    second = _reread(step)
    assert second.leaf.fingerprint != first.leaf.fingerprint
    assert second.leaf_key_pem != first.leaf_key_pem  # a new key too
    # the CA and so the caBundle do not change: API servers verify the new one as is
    assert second.bundle_pem == first.bundle_pem
    assert _verifies(first.bundle, second.leaf, due)


def test_a_ca_rotation_keeps_every_bundle_verifying_every_certificate_served() -> None:
    """Three steps; between any two consecutive states, an API server with the older
    bundle verifies the newer certificate and one with the newer bundle the older
    certificate (replicas and API servers pick up changes at their own pace)."""
    state = _reread(_apply(None, now=T0))
    old_ca = state.ca
    assert old_ca is not None
    now = T0
    states = [state]
    actions = []
    # the certificate renews itself (same CA) until the CA is due at 2/3 of its life
    while "trim" not in actions:
        step = _apply(state, now=now)
        if step.secret is None:
            assert step.wake_at is not None and step.wake_at > now
            now = step.wake_at
            continue
        actions.append(step.action)
        state = _reread(step)
        states.append(state)
        if step.action == "rotate-ca":
            # the CA's key changed, the certificate did not: wait, even when injected,
            # until the overlap has passed
            assert state.ca is not None and state.ca.certificate != old_ca.certificate
            assert state.issuer == old_ca.certificate
            assert [c.fingerprint for c in state.bundle] == [
                state.ca.certificate.fingerprint,
                old_ca.certificate.fingerprint,
            ]
            waiting = _apply(state, now=now + POLICY.overlap / 2)
            assert waiting.action == "" and waiting.wake_at == now + POLICY.overlap
            not_injected = _apply(state, now=now + POLICY.overlap * 2, injected=False)
            assert not_injected.action == ""  # a configuration lacks the new CA yet
            # the overlap counts from when the last configuration took the new bundle
            late = now + POLICY.overlap / 2
            waiting = plan(
                state, now=now + POLICY.overlap, names=NAMES, policy=POLICY, injected_at=late
            )
            assert waiting.action == "" and waiting.wake_at == late + POLICY.overlap
    assert actions[-3:] == ["rotate-ca", "issue", "trim"], actions
    assert set(actions[:-3]) == {"issue"}  # renewals under the first CA before it
    for before, after in itertools.pairwise(states):
        when = after.rotated_at
        assert when is not None
        assert _verifies(before.bundle, after.leaf, when), (before, after)
        assert _verifies(after.bundle, before.leaf, when), (before, after)
    last = states[-1]
    assert last.ca is not None and len(last.bundle) == 1
    assert last.bundle[0] == last.ca.certificate != old_ca.certificate
    assert last.issuer == last.ca.certificate


def test_the_old_cas_certificate_is_replaced_at_once_when_due_during_the_overlap() -> None:
    """A CA rotation must not let the old CA's certificate run out while it waits."""
    policy = RotationPolicy(
        ca_validity=datetime.timedelta(hours=3),
        cert_validity=datetime.timedelta(hours=4),  # cut to the CA's end
        renew_before=0.5,
        overlap=datetime.timedelta(hours=1),
    )
    first = observe(_object(plan(None, now=T0, names=NAMES, policy=policy, injected_at=None)), T0)
    assert isinstance(first, ServingSecret)
    ca_due = T0 + datetime.timedelta(hours=1.5)
    steps = []
    state: ServingSecret = first
    while not steps or steps[-1] != "rotate-ca":
        step = plan(state, now=ca_due, names=NAMES, policy=policy, injected_at=state.rotated_at)
        steps.append(step.action)
        state = _reread(step)
    # the certificate was renewed just before (under the old CA), cut to the old CA's end
    assert steps == ["issue", "rotate-ca"]
    due = policy.renew_at(state.leaf)
    assert due < ca_due + policy.overlap
    waiting = plan(
        state, now=due - datetime.timedelta(seconds=1), names=NAMES, policy=policy, injected_at=None
    )
    assert waiting.action == "" and waiting.wake_at == due
    # due before the overlap ends: renewed by the new CA (the old one's key is gone), at
    # once, injected or not
    step = plan(state, now=due, names=NAMES, policy=policy, injected_at=None)
    assert step.action == "issue" and "due before the overlap ended" in step.reason
    assert state.ca is not None and _reread(step).issuer == state.ca.certificate


def test_a_certificate_without_the_services_names_is_reissued() -> None:
    first = _reread(_apply(None, now=T0))
    other = service_names("renamed", "overseer-system")
    step = plan(first, now=T0 + DAY, names=other, policy=POLICY, injected_at=T0)
    assert step.action == "issue" and "lacks the DNS names renamed.overseer-system.svc" in (
        step.reason
    )
    assert _reread(step).leaf.dns_names == tuple(other)


def _tampered(obj: dict[str, Any], **data: bytes) -> dict[str, Any]:
    out = {**obj, "data": dict(obj["data"])}
    for key, value in data.items():
        out["data"][key.replace("_", ".")] = base64.b64encode(value).decode()
    return out


def test_a_secret_that_cannot_be_served_is_refused_naming_the_problem() -> None:
    good = _object(_apply(None, now=T0))
    other = _object(_apply(None, now=T0))
    other_data = {k: base64.b64decode(v) for k, v in other["data"].items()}
    cases = {
        "tls.key is not the key of the certificate in tls.crt": _tampered(
            good, tls_key=other_data[TLS_KEY]
        ),
        "no CA of ca.crt signed the certificate in tls.crt": _tampered(
            good, ca_crt=other_data[CA_CERT]
        ),
        "tls.crt is not PEM certificates": _tampered(
            good, tls_crt=b"-----BEGIN CERTIFICATE-----\nxx"
        ),
        "tls.key is not a PEM private key": _tampered(good, tls_key=b"not a key"),
        "ca.crt holds a certificate that is no CA": _tampered(good, ca_crt=other_data[TLS_CERT]),
    }
    for message, obj in cases.items():
        with pytest.raises(CertificateError, match=message):
            read_secret(obj)
    missing = {**good, "data": {k: v for k, v in good["data"].items() if k != TLS_KEY}}
    with pytest.raises(CertificateError, match=r"tls\.key is missing"):
        read_secret(missing)
    bad64 = {**good, "data": {**good["data"], TLS_CERT: "***"}}
    with pytest.raises(CertificateError, match=r"tls\.crt is not base64"):
        read_secret(bad64)


def test_a_broken_secret_is_made_anew_keeping_the_cas_replicas_may_still_serve_under() -> None:
    good = _object(_apply(None, now=T0))
    served = read_secret(good)  # what the replicas serve
    other = _object(_apply(None, now=T0))
    broken = _tampered(good, tls_key=base64.b64decode(other["data"][TLS_KEY]))
    found = observe(broken, T0 + DAY)
    assert isinstance(found, Broken) and "tls.key is not the key" in found.problem
    step = _apply(found, now=T0 + DAY)  # type: ignore[arg-type]
    assert step.action == "regenerate" and "tls.key is not the key" in step.reason
    fresh = _reread(step)
    assert fresh.ca is not None and fresh.bundle[0] == fresh.ca.certificate
    # a replica still serving the previous certificate is verified by the new bundle
    assert _verifies(fresh.bundle, served.leaf, T0 + DAY)
    # and the old CA leaves after the overlap, like any old CA
    assert _apply(fresh, now=T0 + DAY).action == ""
    trim = _apply(fresh, now=T0 + DAY + POLICY.overlap)
    assert trim.action == "trim"
    assert _reread(trim).bundle == (fresh.ca.certificate,)


def test_a_secret_without_its_ca_key_is_served_but_made_anew_by_the_leader() -> None:
    good = _object(_apply(None, now=T0))
    no_key = {**good, "data": {k: v for k, v in good["data"].items() if k != CA_KEY}}
    secret = read_secret(no_key)  # a replica can serve it
    assert secret.ca is None and secret.ca_problem == "ca.key is missing"
    step = _apply(secret, now=T0 + DAY)
    assert step.action == "regenerate" and "ca.key is missing" in step.reason


def test_an_expired_ca_is_replaced() -> None:
    first = _reread(_apply(None, now=T0))
    step = _apply(first, now=T0 + POLICY.ca_validity + DAY)
    assert step.action == "regenerate" and "CA is not valid now" in step.reason


def test_the_written_secret_is_kube_tls_with_its_rotation_time() -> None:
    step = _apply(None, now=T0)
    body = _object(step)
    assert body["type"] == "kubernetes.io/tls"
    assert set(body["data"]) == {TLS_CERT, TLS_KEY, CA_CERT, CA_KEY}
    assert body["metadata"]["annotations"] == {ROTATED_AT: T0.isoformat()}
    # an update keeps the object's identity (its resourceVersion: the write is conditional)
    existing = {**body, "metadata": {**body["metadata"], "resourceVersion": "7", "uid": "u"}}
    again = secret_body(step, name="x", namespace="ns", labels={}, existing=existing)
    assert again["metadata"]["resourceVersion"] == "7" and again["metadata"]["name"] == (
        "overseer-webhook-tls"
    )


def test_a_certificate_never_outlives_its_ca() -> None:
    ca = new_authority("svc", now=T0, validity=DAY)
    leaf = issue(ca, ["svc.ns.svc"], now=T0, validity=DAY * 30)
    assert leaf.certificate.not_after == ca.certificate.not_after
    assert leaf.certificate.signed_by(ca.certificate)
    assert not ca.certificate.signed_by(leaf.certificate)


def test_policies_that_cannot_work_are_refused() -> None:
    with pytest.raises(ValueError, match="renew_before"):
        RotationPolicy(renew_before=1.0)
    with pytest.raises(ValueError, match="cert_validity"):
        RotationPolicy(cert_validity=datetime.timedelta(0))
