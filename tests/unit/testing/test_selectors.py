"""Label and field selectors parse and match as kube-apiserver's do."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.storage.selectors import FieldSelector, object_fields, supported_fields
from manager.labels import (
    LabelSelector,
    SelectorError,
    is_qualified_name,
    is_valid_label_value,
    label_selector_from_dict,
)

LABELS = {"app": "web", "tier": "front", "env": "prod", "n": "5"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app = web", True),
        ("app=db", False),
        ("app!=db", True),
        ("app!=web", False),
        ("missing!=x", True),  # != matches when the key is absent
        ("app in (web,db)", True),
        ("app in ( db , web )", True),
        ("app in (db)", False),
        ("app notin (db)", True),
        ("app notin (web)", False),
        ("missing notin (x)", True),  # notin matches when the key is absent
        ("missing in (x)", False),
        ("app", True),
        ("missing", False),
        ("!missing", True),
        ("!app", False),
        ("app=web,tier=front", True),
        ("app=web,tier=back", False),
        ("app=web, !missing, env in (prod)", True),
        ("n>4", True),
        ("n<4", False),
        ("n>5", False),
        ("missing=", False),
        ("in=x", False),  # "in" is an ordinary key where a key is expected
    ],
)
def test_label_selector_matches(text: str, expected: bool) -> None:
    assert LabelSelector.parse(text).matches(LABELS) is expected


def test_empty_value_matches_empty_label() -> None:
    assert LabelSelector.parse("a=").matches({"a": ""})
    assert not LabelSelector.parse("a=").matches({})
    assert LabelSelector.parse("a in ()").matches({"a": ""})


def test_prefixed_keys_parse() -> None:
    sel = LabelSelector.parse("app.kubernetes.io/name=web")
    assert sel.matches({"app.kubernetes.io/name": "web"})


def test_requirements_are_sorted_by_key_like_kube() -> None:
    sel = LabelSelector.parse("z=1,a in (y,x),!m")
    assert str(sel) == "a in (x,y),!m,z=1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("=x", "found '=', expected: !, identifier, or 'end of string'"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        ("a=b,", "found '', expected: identifier after ','"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a in x", "unable to parse requirement: found 'x' expected: '('"),
        ("a in (x", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("a in (x y)", "unable to parse requirement: found 'y', expected: ',' or ')'"),
        ("a=(", "unable to parse requirement: found '(', expected: identifier"),
        ("a@b=c", 'unable to parse requirement: <nil>: Invalid value: "a@b": name part must'),
        ("a=b@c", 'unable to parse requirement: values[0][a]: Invalid value: "b@c"'),
        ("a>x", "for 'Gt', 'Lt' operators, the value must be an integer"),
        ("a/b/c=d", "a qualified name must consist of"),
        ("/a=b", "prefix part must be non-empty"),
        ("a=" + "x" * 64, "must be no more than 63 characters"),
    ],
)
def test_label_selector_errors_read_like_kube(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as exc:
        LabelSelector.parse(text)
    assert message in str(exc.value)


def test_selector_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unable to parse requirement"):
        LabelSelector.parse("a@=b")


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("app", True),
        ("example.com/app", True),
        ("App_1.x-y", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("-app", False),
        ("app-", False),
        ("Example.com/app", False),  # the prefix is a lowercase DNS subdomain
        ("a/b/c", False),
        ("", False),
    ],
)
def test_qualified_names(key: str, ok: bool) -> None:
    assert (is_qualified_name(key) == []) is ok


@pytest.mark.parametrize(
    ("value", "ok"), [("", True), ("v1.2_x-y", True), ("-x", False), ("x" * 64, False)]
)
def test_label_values(value: str, ok: bool) -> None:
    assert (is_valid_label_value(value) == []) is ok


@pytest.mark.parametrize(
    ("sel", "labels", "expected"),
    [
        ({}, {"a": "b"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "web", "x": "y"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "db"}, False),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]},
            {"a": "2"},
            True,
        ),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": ""}, False),
        (
            {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["x"]}],
            },
            {"app": "web", "tier": "y"},
            False,
        ),
    ],
)
def test_label_selector_from_dict(
    sel: dict[str, Any], labels: dict[str, str], expected: bool
) -> None:
    assert label_selector_from_dict(sel).matches(labels) is expected


@pytest.mark.parametrize(
    ("sel", "message"),
    [
        ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, '"Gt" is not'),
        ({"matchExpressions": [{"key": "a", "operator": "In"}]}, "values set can't be empty"),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            "values set must be empty",
        ),
        ({"matchLabels": {"a b": "c"}}, "name part must consist"),
    ],
)
def test_label_selector_from_dict_rejects(sel: dict[str, Any], message: str) -> None:
    with pytest.raises(SelectorError, match=message):
        label_selector_from_dict(sel)


POD = {
    "metadata": {"name": "p1", "namespace": "ns"},
    "spec": {"nodeName": "n1", "restartPolicy": "Always", "hostNetwork": True},
    "status": {"phase": "Running", "podIP": "10.0.0.1"},
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", True),
        ("metadata.name=p1", True),
        ("metadata.name==p1", True),
        ("metadata.name!=p1", False),
        ("metadata.namespace=ns,spec.nodeName=n1", True),
        ("spec.nodeName=n2", False),
        ("spec.hostNetwork=true", True),
        ("status.phase!=Failed,status.phase!=Succeeded", True),
        ("status.nominatedNodeName=", True),  # missing values are ""
        ("spec.schedulerName!=", False),
        ("metadata.name=p1,", True),
    ],
)
def test_field_selector_on_pods(text: str, expected: bool) -> None:
    fields = object_fields("pods", "", POD)
    assert FieldSelector.parse(text, supported_fields("pods", "")).matches(fields) is expected


def test_field_selector_rejects_unsupported_fields() -> None:
    with pytest.raises(SelectorError, match=r"^field label not supported: spec\.foo$"):
        FieldSelector.parse("spec.foo=bar", supported_fields("pods", ""))
    with pytest.raises(
        SelectorError,
        match=r'^"spec\.nodeName" is not a known field selector: '
        r'only "metadata\.name", "metadata\.namespace"$',
    ):
        FieldSelector.parse("spec.nodeName=x", supported_fields("deployments", "apps"))
    with pytest.raises(SelectorError, match=r'^field label "spec\.x" not supported for "Job"$'):
        FieldSelector.parse("spec.x=1", supported_fields("jobs", "batch"))
    with pytest.raises(SelectorError, match=r"^field label not supported: metadata\.namespace$"):
        FieldSelector.parse("metadata.namespace=x", supported_fields("nodes", ""))


def test_field_selector_needs_an_operator() -> None:
    with pytest.raises(SelectorError, match="invalid selector: 'a=b,c'; can't understand 'c'"):
        FieldSelector.parse("a=b,c", {"a", "c"})


def test_field_selector_escapes() -> None:
    sel = FieldSelector.parse(r"metadata.name=a\,b\=c", {"metadata.name"})
    assert sel.matches({"metadata.name": "a,b=c"})
    with pytest.raises(SelectorError, match="invalid escape sequence"):
        FieldSelector.parse(r"metadata.name=a\x", {"metadata.name"})


@pytest.mark.parametrize(
    ("plural", "group", "present", "absent"),
    [
        ("pods", "", {"spec.nodeName", "status.podIP", "metadata.namespace"}, {"spec.foo"}),
        ("events", "", {"involvedObject.uid", "reason", "source", "type"}, {"status.phase"}),
        ("namespaces", "", {"metadata.name", "status.phase"}, {"metadata.namespace"}),
        ("secrets", "", {"type", "metadata.namespace"}, {"status.phase"}),
        ("nodes", "", {"spec.unschedulable"}, {"metadata.namespace"}),
        ("deployments", "apps", {"metadata.name", "metadata.namespace"}, {"spec.replicas"}),
        ("widgets", "example.com", {"metadata.name", "metadata.namespace"}, {"spec.size"}),
    ],
)
def test_supported_fields(plural: str, group: str, present: set[str], absent: set[str]) -> None:
    fields = supported_fields(plural, group)
    assert present <= fields
    assert not absent & fields


def test_object_fields_of_events_and_nodes() -> None:
    event = {
        "metadata": {"name": "e", "namespace": "ns"},
        "involvedObject": {"kind": "Pod", "name": "p", "uid": "u1"},
        "reason": "Started",
        "source": {"component": "kubelet"},
        "type": "Normal",
    }
    fields = object_fields("events", "", event)
    assert fields["involvedObject.kind"] == "Pod"
    assert fields["source"] == "kubelet"
    assert fields["involvedObject.fieldPath"] == ""
    node = object_fields("nodes", "", {"metadata": {"name": "n"}})
    assert node == {"metadata.name": "n", "spec.unschedulable": "false"}


def test_selectors_are_immutable_values() -> None:
    a = LabelSelector.parse("b=1, a=2")
    assert a == LabelSelector.parse("a=2,b=1")
    assert hash(a) == hash(LabelSelector.parse("a=2,b=1"))
    with pytest.raises(AttributeError):
        a.requirements = ()  # type: ignore[misc]
