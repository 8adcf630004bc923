"""Unit tests of fieldValidation: repeated keys, unknown fields, Go's type errors."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.machinery import fieldvalidation as fv
from apiserver.machinery import typeinfo

DEPLOYMENT = typeinfo.builtin("apps", "v1", "Deployment")
SECRET = typeinfo.builtin("", "v1", "Secret")
LEASE = typeinfo.builtin("coordination.k8s.io", "v1", "Lease")


def test_bodies_without_repeated_key_text_take_the_fast_path() -> None:
    obj, tracked = fv.decode(b'{"a": {"b": 1}, "c": [{"d": 2}]}')
    assert (obj, tracked) == ({"a": {"b": 1}, "c": [{"d": 2}]}, False)


def test_repeated_keys_are_found_with_their_paths() -> None:
    obj, tracked = fv.decode(b'{"a": 1, "s": {"x": [{"k": 1, "k": 2}], "b": 1, "b": 2}, "a": 3}')
    assert tracked
    assert fv.duplicates(obj) == ["s.x[0].k", "s.b", "a"]
    assert fv.plain(obj) == {"a": 3, "s": {"x": [{"k": 2}], "b": 2}}


def test_typed_walk_reports_in_document_order_and_drops_unknown_fields() -> None:
    assert DEPLOYMENT is not None
    obj, _ = fv.decode(
        b'{"spec": {"zz": 1, "paused": true, "paused": false,'
        b' "template": {"spec": {"containers": [{"name": "c", "extra": 1}]}}}}'
    )
    issues: list[str] = []
    cleaned = fv.check_typed(obj, DEPLOYMENT, issues=issues)
    assert issues == [
        'unknown field "spec.zz"',
        'duplicate field "spec.paused"',
        'unknown field "spec.template.spec.containers[0].extra"',
    ]
    assert fv.plain(cleaned) == {
        "spec": {"paused": False, "template": {"spec": {"containers": [{"name": "c"}]}}}
    }


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            {"spec": {"replicas": "3"}},
            "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas "
            "of type int32",
        ),
        (
            {"spec": {"paused": 1}},
            "json: cannot unmarshal number into Go struct field DeploymentSpec.spec.paused "
            "of type bool",
        ),
        (
            {"spec": {"template": {"spec": {"containers": {}}}}},
            "json: cannot unmarshal object into Go struct field PodSpec.spec.template.spec."
            "containers of type []v1.Container",
        ),
        (
            {"spec": {"replicas": 1.5}},
            "json: cannot unmarshal number 1.5 into Go struct field DeploymentSpec.spec.replicas "
            "of type int32",
        ),
    ],
)
def test_wrong_types_are_go_errors(obj: dict[str, Any], message: str) -> None:
    assert DEPLOYMENT is not None
    with pytest.raises(fv.TypeError_) as caught:
        fv.check_typed(obj, DEPLOYMENT, issues=None)
    assert str(caught.value) == message


def test_bytes_must_be_base64_and_micro_times_have_six_digits() -> None:
    assert SECRET is not None and LEASE is not None
    with pytest.raises(fv.TypeError_, match="illegal base64 data at input byte 4"):
        fv.check_typed({"data": {"a": "YWJjZA"}}, SECRET, issues=None)
    fv.check_typed({"data": {"a": "YWJjZA=="}}, SECRET, issues=None)
    with pytest.raises(fv.TypeError_, match=r'cannot parse "\.123Z" as "\.000000"'):
        fv.check_typed({"spec": {"renewTime": "2026-01-02T03:04:05.123Z"}}, LEASE, issues=None)


def test_directive_modes() -> None:
    strict = fv.Directive(mode="Strict", prefix="P: ", issues=['unknown field "x"'])
    assert strict.finish() == 'P: strict decoding error: unknown field "x"'
    warn = fv.Directive(mode="Warn", issues=['unknown field "x"'])
    assert warn.finish() is None
    assert warn.warnings == ['unknown field "x"']
    ignore = fv.Directive(mode="Ignore", issues=['unknown field "x"'])
    assert ignore.finish() is None
    assert ignore.warnings == []


def test_yaml_repeats_name_their_line() -> None:
    doc, repeats = fv.decode_yaml(b"a: 1\nb:\n  c: 1\n  c: 2\n")
    assert doc == {"a": 1, "b": {"c": 2}}
    assert repeats == ['line 4: key "c" already set in map']
    assert fv.warning_header(repeats[0]) == '299 - "line 4: key \\"c\\" already set in map"'


POD = typeinfo.builtin("", "v1", "Pod")
QUOTA = typeinfo.builtin("", "v1", "ResourceQuota")


def test_quantities_are_found_from_the_protobuf_tables_and_decoded_canonical() -> None:
    assert POD is not None and QUOTA is not None
    hard = {"cpu": "0.5", "memory": "1024Mi", "pods": "07", "services": None, "secrets": 3}
    cleaned = fv.check_typed({"spec": {"hard": hard}}, QUOTA, issues=[])
    assert cleaned["spec"]["hard"] == {
        "cpu": "500m",
        "memory": "1Gi",
        "pods": "07",  # canonical digits: kept as written
        "services": "0",  # a null map element decodes to a zero Quantity
        "secrets": "3",  # a JSON number by its text
    }
    env = {"name": "E", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}
    ctr = {"name": "c", "env": [env], "resources": {"limits": {"cpu": 2}}}
    vol = {"name": "v", "emptyDir": {"sizeLimit": "1.5Gi"}}  # inlined VolumeSource member
    pod = fv.check_typed({"spec": {"containers": [ctr], "volumes": [vol]}}, POD, issues=[])
    assert pod["spec"]["volumes"][0]["emptyDir"]["sizeLimit"] == "1536Mi"
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "2"}
    # divisor is a Go value member: json.Marshal writes it at its zero
    assert pod["spec"]["containers"][0]["env"][0]["valueFrom"]["resourceFieldRef"] == {
        "resource": "limits.cpu",
        "divisor": "0",
    }
    assert ctr["resources"]["limits"] == {"cpu": 2}  # the input is not modified


def test_a_quantity_that_does_not_parse_is_the_parsers_error_without_a_path() -> None:
    assert QUOTA is not None
    with pytest.raises(fv.TypeError_) as caught:
        fv.check_typed({"spec": {"hard": {"pods": "lots"}}}, QUOTA, issues=[])
    assert str(caught.value).startswith("quantities must match the regular expression '^(")
    assert fv.decode_quantities({"spec": {"hard": {"cpu": "0.5"}}}, QUOTA) == {
        "spec": {"hard": {"cpu": "500m"}}
    }
