"""Structural schemas default, prune and validate custom resources as kube-apiserver does."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from apiserver.machinery.schema import (
    apply_schema,
    from_storage,
    schema_errors,
    structural_errors,
    version_schema,
)
from apiserver.registry.core import Cause


def _obj(spec: Any, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": spec,
        **extra,
    }


def _root(spec: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"spec": spec}, **extra}


def _apply(schema: dict[str, Any], obj: dict[str, Any]) -> tuple[dict[str, Any], list[Cause]]:
    return apply_schema(schema, obj, kind="Widget", status_subresource=False)


def _causes(spec_schema: dict[str, Any], spec: Any) -> list[tuple[str, str, str]]:
    _, causes = _apply(_root(spec_schema), _obj(spec))
    return [(c.field, c.reason, c.message) for c in causes]


def _obj_schema(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


INT: dict[str, Any] = {"type": "integer"}
STR: dict[str, Any] = {"type": "string"}


# --- validation ------------------------------------------------------------------------

VALIDATION_CASES: list[tuple[str, dict[str, Any], Any, list[tuple[str, str, str]]]] = [
    (
        "type error on a field",
        _obj_schema(size=INT),
        {"size": "big"},
        [
            (
                "spec.size",
                "FieldValueTypeInvalid",
                'Invalid value: "string": spec.size in body must be of type integer: "string"',
            )
        ],
    ),
    (
        "type error in an array of objects",
        _obj_schema(items={"type": "array", "items": _obj_schema(name=STR)}),
        {"items": [{"name": "a"}, {"name": 5}]},
        [
            (
                "spec.items[1].name",
                "FieldValueTypeInvalid",
                'Invalid value: "integer": spec.items[1].name in body must be of type string: '
                '"integer"',
            )
        ],
    ),
    (
        "fractional number is not an integer",
        _obj_schema(size=INT),
        {"size": 1.5},
        [
            (
                "spec.size",
                "FieldValueTypeInvalid",
                'Invalid value: "number": spec.size in body must be of type integer: "number"',
            )
        ],
    ),
    ("integral float is an integer", _obj_schema(size=INT), {"size": 2.0}, []),
    ("integer is a number", _obj_schema(ratio={"type": "number"}), {"ratio": 2}, []),
    (
        "bool is not an integer",
        _obj_schema(size=INT),
        {"size": True},
        [
            (
                "spec.size",
                "FieldValueTypeInvalid",
                'Invalid value: "boolean": spec.size in body must be of type integer: "boolean"',
            )
        ],
    ),
    (
        "minimum",
        _obj_schema(size={"type": "integer", "minimum": 0}),
        {"size": -1},
        [
            (
                "spec.size",
                "FieldValueInvalid",
                "Invalid value: -1: spec.size in body should be greater than or equal to 0",
            )
        ],
    ),
    (
        "exclusive minimum",
        _obj_schema(size={"type": "integer", "minimum": 0, "exclusiveMinimum": True}),
        {"size": 0},
        [
            (
                "spec.size",
                "FieldValueInvalid",
                "Invalid value: 0: spec.size in body should be greater than 0",
            )
        ],
    ),
    (
        "maximum",
        _obj_schema(ratio={"type": "number", "maximum": 1.5}),
        {"ratio": 2.25},
        [
            (
                "spec.ratio",
                "FieldValueInvalid",
                "Invalid value: 2.25: spec.ratio in body should be less than or equal to 1.5",
            )
        ],
    ),
    (
        "exclusive maximum",
        _obj_schema(size={"type": "integer", "maximum": 10, "exclusiveMaximum": True}),
        {"size": 10},
        [
            (
                "spec.size",
                "FieldValueInvalid",
                "Invalid value: 10: spec.size in body should be less than 10",
            )
        ],
    ),
    (
        "multipleOf",
        _obj_schema(size={"type": "integer", "multipleOf": 5}),
        {"size": 7},
        [
            (
                "spec.size",
                "FieldValueInvalid",
                "Invalid value: 7: spec.size in body should be a multiple of 5",
            )
        ],
    ),
    (
        "maxLength",
        _obj_schema(name={"type": "string", "maxLength": 3}),
        {"name": "abcd"},
        [("spec.name", "FieldValueTooLong", "Too long: may not be more than 3 bytes")],
    ),
    (
        "minLength",
        _obj_schema(name={"type": "string", "minLength": 3}),
        {"name": "ab"},
        [
            (
                "spec.name",
                "FieldValueInvalid",
                'Invalid value: "ab": spec.name in body should be at least 3 chars long',
            )
        ],
    ),
    (
        "pattern",
        _obj_schema(name={"type": "string", "pattern": "^[a-z]+$"}),
        {"name": "Ab1"},
        [
            (
                "spec.name",
                "FieldValueInvalid",
                "Invalid value: \"Ab1\": spec.name in body should match '^[a-z]+$'",
            )
        ],
    ),
    (
        "pattern is a search, not a full match",
        _obj_schema(name={"type": "string", "pattern": "[a-z]"}),
        {"name": "A-b"},
        [],
    ),
    (
        "format date-time",
        _obj_schema(at={"type": "string", "format": "date-time"}),
        {"at": "yesterday"},
        [
            (
                "spec.at",
                "FieldValueTypeInvalid",
                'Invalid value: "yesterday": spec.at in body must be of type date-time: '
                '"yesterday"',
            )
        ],
    ),
    (
        "format date-time accepts RFC 3339",
        _obj_schema(at={"type": "string", "format": "date-time"}),
        {"at": "2024-05-01T10:00:00.5+02:00"},
        [],
    ),
    (
        "format int32 is not range-checked",
        _obj_schema(n={"type": "integer", "format": "int32"}),
        {"n": 2**40},
        [],
    ),
    (
        "enum",
        _obj_schema(mode={"type": "string", "enum": ["a", "b"]}),
        {"mode": "x"},
        [
            (
                "spec.mode",
                "FieldValueNotSupported",
                'Unsupported value: "x": supported values: "a", "b"',
            )
        ],
    ),
    (
        "enum of numbers",
        _obj_schema(n={"type": "integer", "enum": [1, 2]}),
        {"n": 3},
        [("spec.n", "FieldValueNotSupported", 'Unsupported value: 3: supported values: "1", "2"')],
    ),
    (
        "minItems",
        _obj_schema(tags={"type": "array", "items": STR, "minItems": 2}),
        {"tags": ["a"]},
        [
            (
                "spec.tags",
                "FieldValueInvalid",
                "Invalid value: 1: spec.tags in body should have at least 2 items",
            )
        ],
    ),
    (
        "maxItems",
        _obj_schema(tags={"type": "array", "items": STR, "maxItems": 1}),
        {"tags": ["a", "b"]},
        [("spec.tags", "FieldValueTooMany", "Too many: 2: must have at most 1 item")],
    ),
    (
        "uniqueItems",
        _obj_schema(tags={"type": "array", "items": STR, "uniqueItems": True}),
        {"tags": ["a", "b", "a"]},
        [
            (
                "spec.tags",
                "FieldValueInvalid",
                'Invalid value: "": spec.tags in body shouldn\'t contain duplicates',
            )
        ],
    ),
    (
        "minProperties",
        _obj_schema(labels={"type": "object", "additionalProperties": STR, "minProperties": 1}),
        {"labels": {}},
        [
            (
                "spec.labels",
                "FieldValueInvalid",
                "Invalid value: 0: spec.labels in body should have at least 1 properties",
            )
        ],
    ),
    (
        "maxProperties",
        _obj_schema(labels={"type": "object", "additionalProperties": STR, "maxProperties": 1}),
        {"labels": {"a": "1", "b": "2"}},
        [("spec.labels", "FieldValueTooMany", "Too many: 2: must have at most 1 item")],
    ),
    (
        "additionalProperties schema validates each value",
        _obj_schema(labels={"type": "object", "additionalProperties": STR}),
        {"labels": {"a": "1", "b": 2}},
        [
            (
                "spec.labels.b",
                "FieldValueTypeInvalid",
                'Invalid value: "integer": spec.labels.b in body must be of type string: "integer"',
            )
        ],
    ),
    (
        "required",
        {**_obj_schema(size=INT, name=STR), "required": ["size", "name"]},
        {"name": "n"},
        [("spec.size", "FieldValueRequired", "Required value")],
    ),
    (
        "a default satisfies required",
        {**_obj_schema(size={"type": "integer", "default": 1}), "required": ["size"]},
        {},
        [],
    ),
    (
        "required inside array items",
        _obj_schema(
            ports={"type": "array", "items": {**_obj_schema(port=INT), "required": ["port"]}}
        ),
        {"ports": [{"port": 1}, {}]},
        [("spec.ports[1].port", "FieldValueRequired", "Required value")],
    ),
    (
        "null in an array item is a type error",
        _obj_schema(tags={"type": "array", "items": STR}),
        {"tags": ["a", None]},
        [
            (
                "spec.tags[1]",
                "FieldValueTypeInvalid",
                'Invalid value: "null": spec.tags[1] in body must be of type string: "null"',
            )
        ],
    ),
    (
        "nullable allows null",
        _obj_schema(tags={"type": "array", "items": {"type": "string", "nullable": True}}),
        {"tags": ["a", None]},
        [],
    ),
    (
        "int-or-string takes an int",
        _obj_schema(port={"x-kubernetes-int-or-string": True}),
        {"port": 80},
        [],
    ),
    (
        "int-or-string takes a string",
        _obj_schema(port={"x-kubernetes-int-or-string": True}),
        {"port": "http"},
        [],
    ),
    (
        "int-or-string refuses a bool",
        _obj_schema(port={"x-kubernetes-int-or-string": True}),
        {"port": True},
        [
            (
                "spec.port",
                "FieldValueTypeInvalid",
                'Invalid value: "boolean": spec.port in body must be of type integer,string: '
                '"boolean"',
            )
        ],
    ),
    (
        "list-type set duplicates",
        _obj_schema(tags={"type": "array", "items": STR, "x-kubernetes-list-type": "set"}),
        {"tags": ["a", "b", "a"]},
        [("spec.tags[2]", "FieldValueDuplicate", 'Duplicate value: "a"')],
    ),
    (
        "list-type map duplicates",
        _obj_schema(
            ports={
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": _obj_schema(name=STR, port=INT),
            }
        ),
        {"ports": [{"name": "http", "port": 80}, {"name": "http", "port": 81}]},
        [
            (
                "spec.ports[1]",
                "FieldValueDuplicate",
                'Duplicate value: {"name":"http"}',
            )
        ],
    ),
    (
        "list-type map with two keys",
        _obj_schema(
            ports={
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["port", "protocol"],
                "items": _obj_schema(port=INT, protocol=STR),
            }
        ),
        {
            "ports": [
                {"port": 80, "protocol": "TCP"},
                {"port": 80, "protocol": "UDP"},
                {"port": 80, "protocol": "TCP"},
            ]
        },
        [
            (
                "spec.ports[2]",
                "FieldValueDuplicate",
                'Duplicate value: {"port":80,"protocol":"TCP"}',
            )
        ],
    ),
    (
        "anyOf none matches",
        _obj_schema(n={"type": "integer", "anyOf": [{"minimum": 10}, {"maximum": 0}]}),
        {"n": 5},
        [
            (
                "spec.n",
                "FieldValueInvalid",
                'Invalid value: "": "spec.n" must validate at least one schema (anyOf)',
            ),
            (
                "spec.n",
                "FieldValueInvalid",
                "Invalid value: 5: spec.n in body should be greater than or equal to 10",
            ),
        ],
    ),
    (
        "anyOf one matches",
        _obj_schema(n={"type": "integer", "anyOf": [{"minimum": 10}, {"maximum": 0}]}),
        {"n": -5},
        [],
    ),
    (
        "oneOf two match",
        _obj_schema(n={"type": "integer", "oneOf": [{"minimum": 0}, {"maximum": 10}]}),
        {"n": 5},
        [
            (
                "spec.n",
                "FieldValueInvalid",
                'Invalid value: "": "spec.n" must validate one and only one schema (oneOf). '
                "Found 2 valid alternatives",
            )
        ],
    ),
    (
        "allOf",
        _obj_schema(n={"type": "integer", "allOf": [{"minimum": 0}, {"maximum": 10}]}),
        {"n": 11},
        [
            (
                "spec.n",
                "FieldValueInvalid",
                'Invalid value: "": "spec.n" must validate all the schemas (allOf)',
            ),
            (
                "spec.n",
                "FieldValueInvalid",
                "Invalid value: 11: spec.n in body should be less than or equal to 10",
            ),
        ],
    ),
    (
        "not",
        _obj_schema(mode={"type": "string", "not": {"enum": ["off"]}}),
        {"mode": "off"},
        [
            (
                "spec.mode",
                "FieldValueInvalid",
                'Invalid value: "": "spec.mode" must not validate the schema (not)',
            )
        ],
    ),
    (
        "embedded resource needs apiVersion and kind",
        _obj_schema(
            template={
                "type": "object",
                "x-kubernetes-embedded-resource": True,
                "x-kubernetes-preserve-unknown-fields": True,
            }
        ),
        {"template": {"kind": "", "spec": {}}},
        [
            ("spec.template.apiVersion", "FieldValueRequired", "Required value: must not be empty"),
            ("spec.template.kind", "FieldValueInvalid", 'Invalid value: "": must not be empty'),
        ],
    ),
    (
        "every error is reported",
        _obj_schema(
            a={"type": "integer", "minimum": 1},
            b={"type": "string"},
            c={"type": "array", "items": INT},
        ),
        {"a": 0, "b": 1, "c": [1, "x"]},
        [
            (
                "spec.a",
                "FieldValueInvalid",
                "Invalid value: 0: spec.a in body should be greater than or equal to 1",
            ),
            (
                "spec.b",
                "FieldValueTypeInvalid",
                'Invalid value: "integer": spec.b in body must be of type string: "integer"',
            ),
            (
                "spec.c[1]",
                "FieldValueTypeInvalid",
                'Invalid value: "string": spec.c[1] in body must be of type integer: "string"',
            ),
        ],
    ),
]


@pytest.mark.parametrize(
    ("spec_schema", "spec", "expected"),
    [pytest.param(s, v, e, id=name) for name, s, v, e in VALIDATION_CASES],
)
def test_validation(
    spec_schema: dict[str, Any], spec: Any, expected: list[tuple[str, str, str]]
) -> None:
    assert _causes(spec_schema, spec) == expected


def test_required_at_the_root() -> None:
    schema = _root(_obj_schema(size=INT), required=["spec"])
    obj = _obj({})
    del obj["spec"]
    _, causes = _apply(schema, obj)
    assert causes == [Cause(reason="FieldValueRequired", message="Required value", field="spec")]


def test_metadata_is_validated_when_the_schema_describes_it() -> None:
    schema = {
        "type": "object",
        "properties": {
            "metadata": {
                "type": "object",
                "properties": {"name": {"type": "string", "maxLength": 1}},
            }
        },
    }
    obj = _obj({})
    obj["metadata"]["name"] = "widget"
    out, causes = _apply(schema, obj)
    assert out["metadata"] == {"name": "widget", "namespace": "ns"}
    assert [c.field for c in causes] == ["metadata.name"]


# --- defaulting ------------------------------------------------------------------------

DEFAULT_CASES: list[tuple[str, dict[str, Any], Any, Any]] = [
    (
        "absent field",
        _obj_schema(size={"type": "integer", "default": 1}),
        {},
        {"size": 1},
    ),
    (
        "present field is kept",
        _obj_schema(size={"type": "integer", "default": 1}),
        {"size": 3},
        {"size": 3},
    ),
    (
        "nested defaults inside an existing object",
        _obj_schema(
            strategy=_obj_schema(
                type={"type": "string", "default": "Rolling"},
                rolling=_obj_schema(surge={"type": "integer", "default": 1}),
            )
        ),
        {"strategy": {"rolling": {}}},
        {"strategy": {"type": "Rolling", "rolling": {"surge": 1}}},
    ),
    (
        "defaults apply inside a defaulted object",
        _obj_schema(
            strategy={
                **_obj_schema(type={"type": "string", "default": "Rolling"}),
                "default": {},
            }
        ),
        {},
        {"strategy": {"type": "Rolling"}},
    ),
    (
        "array of objects",
        _obj_schema(
            ports={
                "type": "array",
                "items": _obj_schema(port=INT, protocol={"type": "string", "default": "TCP"}),
            }
        ),
        {"ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]},
        {"ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]},
    ),
    (
        "map values",
        _obj_schema(
            groups={
                "type": "object",
                "additionalProperties": _obj_schema(size={"type": "integer", "default": 2}),
            }
        ),
        {"groups": {"a": {}, "b": {"size": 5}}},
        {"groups": {"a": {"size": 2}, "b": {"size": 5}}},
    ),
    (
        "non-nullable null takes the default",
        _obj_schema(size={"type": "integer", "default": 1}),
        {"size": None},
        {"size": 1},
    ),
    (
        "non-nullable null without a default is dropped",
        _obj_schema(size=INT),
        {"size": None},
        {},
    ),
    (
        "nullable null is kept",
        _obj_schema(size={"type": "integer", "nullable": True, "default": 1}),
        {"size": None},
        {"size": None},
    ),
    (
        # the decoder prunes, the codec's defaulter runs after it: a default is never
        # pruned (a CRD whose default has unknown fields is refused: definition.py)
        "defaults come after pruning",
        _obj_schema(s={**_obj_schema(a=INT), "default": {"a": 1, "junk": 2}}),
        {},
        {"s": {"a": 1, "junk": 2}},
    ),
]


@pytest.mark.parametrize(
    ("spec_schema", "spec", "expected"),
    [pytest.param(s, v, e, id=name) for name, s, v, e in DEFAULT_CASES],
)
def test_defaulting(spec_schema: dict[str, Any], spec: Any, expected: Any) -> None:
    out, causes = _apply(_root(spec_schema), _obj(spec))
    assert causes == []
    assert out["spec"] == expected


def test_default_of_a_whole_spec() -> None:
    schema = _root({**_obj_schema(size={"type": "integer", "default": 3}), "default": {}})
    obj = _obj({})
    del obj["spec"]
    out, _ = _apply(schema, obj)
    assert out["spec"] == {"size": 3}


def test_defaults_are_copies() -> None:
    default: dict[str, Any] = {"tags": []}
    schema = _root(
        _obj_schema(cfg={**_obj_schema(tags={"type": "array", "items": STR}), "default": default})
    )
    out, _ = _apply(schema, _obj({}))
    out["spec"]["cfg"]["tags"].append("x")
    assert default == {"tags": []}


# --- pruning ---------------------------------------------------------------------------

PRUNE_CASES: list[tuple[str, dict[str, Any], Any, Any]] = [
    ("unknown field is dropped", _obj_schema(size=INT), {"size": 1, "junk": 2}, {"size": 1}),
    (
        "unknown field nested in an array",
        _obj_schema(items={"type": "array", "items": _obj_schema(name=STR)}),
        {"items": [{"name": "a", "x": 1}]},
        {"items": [{"name": "a"}]},
    ),
    (
        "preserve-unknown-fields keeps unknown fields",
        {**_obj_schema(size=INT), "x-kubernetes-preserve-unknown-fields": True},
        {"size": 1, "junk": {"deep": 2}},
        {"size": 1, "junk": {"deep": 2}},
    ),
    (
        "preserve-unknown-fields still prunes inside known fields",
        {
            **_obj_schema(inner=_obj_schema(a=INT)),
            "x-kubernetes-preserve-unknown-fields": True,
        },
        {"inner": {"a": 1, "b": 2}, "other": 3},
        {"inner": {"a": 1}, "other": 3},
    ),
    (
        "additionalProperties keeps map keys",
        _obj_schema(labels={"type": "object", "additionalProperties": STR}),
        {"labels": {"a": "1", "b": "2"}},
        {"labels": {"a": "1", "b": "2"}},
    ),
    (
        "additionalProperties prunes inside map values",
        _obj_schema(groups={"type": "object", "additionalProperties": _obj_schema(n=INT)}),
        {"groups": {"a": {"n": 1, "x": 2}}},
        {"groups": {"a": {"n": 1}}},
    ),
    (
        "embedded resource keeps apiVersion, kind and metadata",
        _obj_schema(
            template={
                **_obj_schema(spec=_obj_schema(n=INT)),
                "x-kubernetes-embedded-resource": True,
            }
        ),
        {
            "template": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p"},
                "spec": {"n": 1, "x": 2},
                "junk": 1,
            }
        },
        {
            "template": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p"},
                "spec": {"n": 1},
            }
        },
    ),
]


@pytest.mark.parametrize(
    ("spec_schema", "spec", "expected"),
    [pytest.param(s, v, e, id=name) for name, s, v, e in PRUNE_CASES],
)
def test_pruning(spec_schema: dict[str, Any], spec: Any, expected: Any) -> None:
    out, causes = _apply(_root(spec_schema), _obj(spec))
    assert causes == []
    assert out["spec"] == expected


def test_root_keeps_apiversion_kind_metadata_and_drops_the_rest() -> None:
    out, causes = _apply(_root(_obj_schema(size=INT)), _obj({"size": 1}, status={"x": 1}))
    assert causes == []
    assert out == {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"size": 1},
    }


def test_pruning_happens_before_validation() -> None:
    """An unknown field with a bad value is dropped, not reported."""
    schema = _root({**_obj_schema(size=INT), "required": ["size"]})
    out, causes = _apply(schema, _obj({"size": 1, "bogus": None}))
    assert causes == []
    assert out["spec"] == {"size": 1}


def test_inputs_are_not_mutated() -> None:
    schema = _root(
        _obj_schema(
            size={"type": "integer", "default": 1},
            nested=_obj_schema(a={"type": "string", "default": "x"}),
        )
    )
    obj = _obj({"nested": {}, "junk": 1, "gone": None})
    schema_before, obj_before = copy.deepcopy(schema), copy.deepcopy(obj)
    out, _ = _apply(schema, obj)
    assert schema == schema_before
    assert obj == obj_before
    assert out["spec"] == {"size": 1, "nested": {"a": "x"}}
    assert out is not obj
    assert out["metadata"] is not obj["metadata"]


def test_status_is_validated_whatever_the_subresource() -> None:
    schema = {
        "type": "object",
        "properties": {"status": _obj_schema(ready={"type": "boolean"})},
    }
    for sub in (True, False):
        _, causes = apply_schema(
            schema, _obj({}, status={"ready": "yes"}), kind="Widget", status_subresource=sub
        )
        assert [c.field for c in causes] == ["status.ready"]


# --- version_schema --------------------------------------------------------------------

SCHEMA_V1 = {"type": "object", "properties": {"spec": {"type": "object"}}}
SCHEMA_OLD = {"type": "object"}


@pytest.mark.parametrize(
    ("crd_spec", "version", "expected"),
    [
        pytest.param(
            {
                "versions": [
                    {"name": "v1", "served": True, "schema": {"openAPIV3Schema": SCHEMA_V1}},
                    {"name": "v2", "served": True, "schema": {"openAPIV3Schema": SCHEMA_OLD}},
                ]
            },
            "v1",
            SCHEMA_V1,
            id="per-version",
        ),
        pytest.param(
            {
                "versions": [
                    {"name": "v1", "served": False, "schema": {"openAPIV3Schema": SCHEMA_V1}}
                ]
            },
            "v1",
            None,
            id="not served",
        ),
        pytest.param(
            {"versions": [{"name": "v1", "served": True}]}, "v2", None, id="unknown version"
        ),
        pytest.param(
            {
                "versions": [{"name": "v1", "served": True}],
                "validation": {"openAPIV3Schema": SCHEMA_OLD},
            },
            "v1",
            SCHEMA_OLD,
            id="spec.validation fallback",
        ),
        pytest.param(
            {"version": "v1beta1", "validation": {"openAPIV3Schema": SCHEMA_OLD}},
            "v1beta1",
            SCHEMA_OLD,
            id="v1beta1 single version",
        ),
        pytest.param({"versions": [{"name": "v1", "served": True}]}, "v1", None, id="no schema"),
    ],
)
def test_version_schema(crd_spec: dict[str, Any], version: str, expected: Any) -> None:
    assert version_schema({"spec": crd_spec}, version) == expected


# --- structural_errors -----------------------------------------------------------------

P = "spec.validation.openAPIV3Schema"

STRUCTURAL_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "valid",
        _root(
            {
                **_obj_schema(
                    size={"type": "integer", "minimum": 0},
                    port={"x-kubernetes-int-or-string": True},
                    raw={"x-kubernetes-preserve-unknown-fields": True},
                    labels={"type": "object", "additionalProperties": STR},
                    tags={"type": "array", "items": STR, "x-kubernetes-list-type": "set"},
                    n={"type": "integer", "anyOf": [{"minimum": 1}, {"maximum": -1}]},
                ),
            }
        ),
        [],
    ),
    (
        "missing type on a field",
        _root({"properties": {"size": INT}}),
        [
            f"{P}.properties[spec].type: Required value: "
            "must not be empty for specified object fields"
        ],
    ),
    (
        "missing type on array items",
        _root(_obj_schema(tags={"type": "array", "items": {}})),
        [
            f"{P}.properties[spec].properties[tags].items.type: Required value: "
            "must not be empty for specified array items"
        ],
    ),
    (
        "missing type at the root",
        {"properties": {"spec": {"type": "object"}}},
        [f"{P}.type: Required value: must not be empty at the root"],
    ),
    (
        "root must be an object",
        {"type": "string"},
        [f'{P}.type: Invalid value: "string": must be object at the root'],
    ),
    (
        "array without items",
        _root(_obj_schema(tags={"type": "array"})),
        [f"{P}.properties[spec].properties[tags].items: Required value: must be specified"],
    ),
    (
        "properties with additionalProperties",
        _root({**_obj_schema(a=INT), "additionalProperties": STR}),
        [
            f"{P}.properties[spec].additionalProperties: Forbidden: "
            "additionalProperties and properties are mutual exclusive"
        ],
    ),
    (
        "type inside anyOf",
        _root(_obj_schema(n={"type": "integer", "anyOf": [{"type": "integer"}]})),
        [
            f"{P}.properties[spec].properties[n].anyOf[0].type: Forbidden: "
            "must be empty to be structural"
        ],
    ),
    (
        "list-type map without keys",
        _root(
            _obj_schema(
                ports={
                    "type": "array",
                    "items": _obj_schema(name=STR),
                    "x-kubernetes-list-type": "map",
                }
            )
        ),
        [
            f"{P}.properties[spec].properties[ports].x-kubernetes-list-map-keys: "
            "Required value: must not be empty if x-kubernetes-list-type is map"
        ],
    ),
    (
        "preserve-unknown-fields false",
        _root({**_obj_schema(), "x-kubernetes-preserve-unknown-fields": False}),
        [
            f"{P}.properties[spec].x-kubernetes-preserve-unknown-fields: "
            "Invalid value: false: must be true or undefined"
        ],
    ),
]


@pytest.mark.parametrize(
    ("schema", "expected"),
    [pytest.param(s, e, id=name) for name, s, e in STRUCTURAL_CASES],
)
def test_structural_errors(schema: dict[str, Any], expected: list[str]) -> None:
    assert structural_errors(schema) == expected


def test_structural_errors_path_for_v1_crds() -> None:
    errs = structural_errors(
        _root({"properties": {}}), path="spec.versions[0].schema.openAPIV3Schema"
    )
    assert errs == [
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: "
        "must not be empty for specified object fields"
    ]


# --- from_storage ------------------------------------------------------------------------

STORED_SCHEMA = _root(
    _obj_schema(
        size={"type": "integer", "default": 1},
        ports={"type": "array", "items": _obj_schema(port=INT)},
    )
)


def test_from_storage_is_the_object_itself_when_nothing_changes() -> None:
    stored = _obj({"size": 3, "ports": [{"port": 80}]})
    assert from_storage(STORED_SCHEMA, stored) is stored


def test_from_storage_defaults_copying_only_what_changes() -> None:
    stored = _obj({"ports": [{"port": 80}]}, status={"ready": True})
    before = copy.deepcopy(stored)
    out = from_storage(STORED_SCHEMA, stored)
    assert out["spec"] == {"ports": [{"port": 80}], "size": 1}
    assert stored == before  # never mutated: storage's objects are shared
    assert out["metadata"] is stored["metadata"]
    assert out["spec"]["ports"] is stored["spec"]["ports"]
    assert "status" not in out  # a field the schema no longer describes is pruned


def test_from_storage_prunes_and_drops_non_nullable_nulls() -> None:
    stored = _obj({"size": 2, "ports": [{"port": 80, "gone": 1}], "old": "x"})
    out = from_storage(STORED_SCHEMA, {**stored, "spec": {**stored["spec"], "size": None}})
    assert out["spec"] == {"size": 1, "ports": [{"port": 80}]}


# --- schema_errors: defaults ---------------------------------------------------------------

V = "spec.versions[0].schema.openAPIV3Schema"

DEFAULT_ERROR_CASES: list[tuple[str, dict[str, Any], list[tuple[str, str, str]]]] = [
    (
        "valid defaults",
        _root(
            {
                **_obj_schema(
                    size={"type": "integer", "minimum": 0, "default": 1},
                    ports={
                        "type": "array",
                        "items": _obj_schema(protocol={"type": "string", "default": "TCP"}),
                        "default": [],
                    },
                    raw={"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                ),
                "default": {"size": 2, "raw": {"anything": True}},
            }
        ),
        [],
    ),
    (
        "a null default is no default",
        _root(_obj_schema(size={"type": "integer", "default": None})),
        [],
    ),
    (
        "wrong type, named from the default's own root",
        _root(_obj_schema(size={"type": "integer", "default": "big"})),
        [
            (
                f"{V}.properties[spec].properties[size].default",
                "FieldValueTypeInvalid",
                'Invalid value: "string":  in body must be of type integer: "string"',
            )
        ],
    ),
    (
        "a field inside the default",
        _root({**_obj_schema(size={"type": "integer", "minimum": 0}), "default": {"size": -1}}),
        [
            (
                f"{V}.properties[spec].default.size",
                "FieldValueInvalid",
                "Invalid value: -1: size in body should be greater than or equal to 0",
            )
        ],
    ),
    (
        "unknown fields",
        _root({**_obj_schema(size=INT), "default": {"size": 1, "extra": [1]}}),
        [
            (
                f"{V}.properties[spec].default",
                "FieldValueInvalid",
                'Invalid value: {"extra":[1],"size":1}: must not have unknown fields',
            )
        ],
    ),
    (
        "array items",
        _root(
            _obj_schema(
                ports={
                    "type": "array",
                    "items": _obj_schema(
                        protocol={"type": "string", "enum": ["TCP", "UDP"], "default": "SCTP"}
                    ),
                }
            )
        ),
        [
            (
                f"{V}.properties[spec].properties[ports].items.properties[protocol].default",
                "FieldValueNotSupported",
                'Unsupported value: "SCTP": supported values: "TCP", "UDP"',
            )
        ],
    ),
    (
        "top-level metadata",
        {
            "type": "object",
            "properties": {
                "metadata": {"type": "object", "default": {"labels": {"a": "b"}}},
                "kind": {"type": "string", "default": "Widget"},
            },
        },
        [
            (
                f"{V}.properties[metadata].default",
                "FieldValueForbidden",
                "Forbidden: must not be set in top-level metadata",
            ),
            (
                f"{V}.properties[kind].default",
                "FieldValueForbidden",
                "Forbidden: must not be set in top-level kind",
            ),
        ],
    ),
    (
        "map in an embedded resource's metadata",
        _root(
            _obj_schema(
                template={
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "properties": {
                        "metadata": _obj_schema(
                            name={"type": "string", "default": "made"},
                            labels={
                                "type": "object",
                                "additionalProperties": {"type": "string", "default": "x"},
                            },
                        )
                    },
                }
            )
        ),
        [
            (
                f"{V}.properties[spec].properties[template].properties[metadata].properties"
                "[labels].additionalProperties.default",
                "FieldValueForbidden",
                "Forbidden: must not be set inside additionalProperties applying to object "
                "metadata",
            )
        ],
    ),
    (
        "an embedded resource's default keeps its type and object meta",
        _root(
            _obj_schema(
                template={
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "properties": {"spec": {"type": "object"}},
                    "default": {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": {}},
                }
            )
        ),
        [],
    ),
    (
        "not structural: defaults are not looked at",
        _root({"properties": {"size": {"type": "integer", "default": "big"}}}),
        [
            (
                f"{V}.properties[spec].type",
                "FieldValueRequired",
                "Required value: must not be empty for specified object fields",
            )
        ],
    ),
]


@pytest.mark.parametrize(
    ("schema", "expected"),
    [pytest.param(s, e, id=name) for name, s, e in DEFAULT_ERROR_CASES],
)
def test_schema_errors_for_defaults(
    schema: dict[str, Any], expected: list[tuple[str, str, str]]
) -> None:
    causes = [e.cause() for e in schema_errors(schema, path=V)]
    assert [(c.field, c.reason, c.message) for c in causes] == expected
