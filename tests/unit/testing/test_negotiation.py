"""Output negotiation of the local API server (``apiserver/machinery/negotiation.py``),
case by case against kube-apiserver's handlers/negotiation/negotiate.go and
RequestScope.AllowsMediaTypeTransform (issue 34: YAML answers, and a custom resource
asked for protobuf alone is a 406 before anything is read)."""

from __future__ import annotations

import pytest
import yaml

from apiserver.api.errors import StatusError
from apiserver.machinery import negotiation
from apiserver.machinery.negotiation import JSON, PROTOBUF, YAML, Accepted, Target

TABLE = Target("Table", "meta.k8s.io", "v1")
PARTIAL = Target("PartialObjectMetadata", "meta.k8s.io", "v1")


@pytest.mark.parametrize(
    ("accept", "custom", "expected"),
    [
        ("", False, Accepted(JSON)),
        ("application/json", False, Accepted(JSON)),
        (YAML, False, Accepted(YAML)),
        (YAML, True, Accepted(YAML)),
        (f"{PROTOBUF}, {JSON}", False, Accepted(PROTOBUF)),
        (f"{PROTOBUF}, {JSON}", True, Accepted(JSON)),  # no protobuf form: skipped
        (f"{YAML}, {JSON};q=0.9", False, Accepted(YAML)),
        (f"{JSON};q=0.5, {YAML}", False, Accepted(YAML)),  # by quality first
        (f"{JSON}, {YAML}", False, Accepted(JSON)),
        ("*/*;q=0.1, application/yaml", False, Accepted(YAML)),
        ("*", False, Accepted(JSON)),  # goautoneg reads a lone * as */*
        ("application/*", True, Accepted(JSON)),
        ("text/html, */*", False, Accepted(JSON)),
        (f"{JSON};as=Table;v=v1;g=meta.k8s.io, {JSON}", False, Accepted(JSON, TABLE)),
        (f"{YAML};as=Table;v=v1;g=meta.k8s.io", False, Accepted(YAML, TABLE)),
        (f"{PROTOBUF};as=Table;v=v1;g=meta.k8s.io, {JSON}", False, Accepted(JSON)),
        (f"{JSON};as=Table;v=v9;g=meta.k8s.io, {JSON}", False, Accepted(JSON)),
        (f"{JSON};as=Table, {JSON}", False, Accepted(JSON)),  # no group-version: no Table
        (
            f"{PROTOBUF};as=PartialObjectMetadata;g=meta.k8s.io;v=v1, {JSON}",
            True,
            Accepted(PROTOBUF, PARTIAL),  # metadata has a protobuf form, custom or not
        ),
        (f"{JSON};sv=v1", False, Accepted(JSON)),
        (f"{JSON};sv=v2, {YAML}", False, Accepted(YAML)),
        (f"{JSON};stream=watch", False, Accepted(JSON)),
        (f"{YAML};stream=watch, {PROTOBUF}", False, Accepted(PROTOBUF)),
    ],
)
def test_negotiate(accept: str, custom: bool, expected: Accepted) -> None:
    assert negotiation.negotiate(accept, custom=custom) == expected


@pytest.mark.parametrize(
    ("accept", "custom", "table"),
    [
        ("text/html", False, True),
        (PROTOBUF, True, True),
        (f"{JSON};as=Table;v=v1;g=meta.k8s.io", False, False),  # no table convertor
        (f"{JSON};as=APIGroupDiscoveryList;g=apidiscovery.k8s.io;v=v2", False, True),
        (" , ", False, True),  # not empty, and no clause in it
        ("Application/JSON", False, True),  # goautoneg compares as written
    ],
)
def test_nothing_acceptable_is_406(accept: str, custom: bool, table: bool) -> None:
    with pytest.raises(StatusError) as refused:
        negotiation.negotiate(accept, custom=custom, table=table)
    assert (refused.value.code, refused.value.reason) == (406, "NotAcceptable")
    assert refused.value.message == (
        "only the following media types are accepted: "
        "application/json, application/yaml, application/vnd.kubernetes.protobuf"
    )


def test_a_watch_needs_a_stream_form() -> None:
    assert negotiation.negotiate_stream(f"{PROTOBUF}, {JSON}") == Accepted(PROTOBUF)
    assert negotiation.negotiate_stream(f"{PROTOBUF}, {JSON}", custom=True) == Accepted(JSON)
    for accept in (YAML, f"{YAML}, {JSON}"):  # the first clause answerable is YAML
        with pytest.raises(StatusError) as refused:
            negotiation.negotiate_stream(accept)
        assert refused.value.code == 406
        assert refused.value.message == (
            "only the following media types are accepted: application/json;stream=watch, "
            "application/vnd.kubernetes.protobuf;stream=watch"
        )


@pytest.mark.parametrize(
    ("accept", "media"),
    [
        (PROTOBUF, PROTOBUF),  # a Status has a protobuf form, for custom resources too
        (f"{PROTOBUF}, {JSON}", PROTOBUF),
        (YAML, YAML),
        ("", JSON),
        (f"{JSON};as=Table;v=v1;g=meta.k8s.io, {YAML}", YAML),  # no transformation
        (f"{JSON};as=Table;v=v1;g=meta.k8s.io", None),  # then raw JSON
        ("text/html", None),
        (f"{JSON};sv=v1", None),  # the default restrictions allow no server version
    ],
)
def test_errors_are_negotiated_without_transformation(accept: str, media: str | None) -> None:
    assert negotiation.error_media(accept) == media


def test_yaml_is_the_json_rendering_in_yaml() -> None:
    obj = {
        "kind": "ConfigMap",
        "metadata": {
            "name": "x",
            "labels": {"on": "yes"},
            "creationTimestamp": "2026-01-02T03:04:05Z",
        },
        "data": {"n": "1", "empty": "", "multi": "a\nb\n", "null": "null"},
        "binaryData": {},
        "items": [],
        "count": 3,
        "ratio": 0.5,
        "flag": True,
        "none": None,
    }
    text = negotiation.to_yaml(obj)
    assert yaml.safe_load(text) == obj
    assert text.startswith(b"binaryData: {}\ncount: 3\n")  # keys sorted, block style
    assert text.endswith(b"\n")
