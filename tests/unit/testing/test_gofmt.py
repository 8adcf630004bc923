"""Bad values in field errors as kube-apiserver 1.36 renders them (``field.Error``'s
``ErrorBody``: ``%v`` for numbers and booleans, ``%q`` for strings, ``json.Marshal``
for the rest)."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.api.field import invalid, label_selector_value, not_supported, str_list, str_map
from apiserver.api.gofmt import go_json, go_v


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "null"),
        (True, "true"),
        (7, "7"),
        (1.0, "1"),
        (2.5, "2.5"),
        (1e16, "10000000000000000"),
        (1e21, "1e+21"),
        (1.5e-7, "1.5e-7"),
        ("a<b>&c", '"a\\u003cb\\u003e\\u0026c"'),
        ('q"\\\n\t\x01\u2028é', '"q\\"\\\\\\n\\t\\u0001\\u2028é"'),
        ({"b": [1, "x"], "a": {}}, '{"a":{},"b":[1,"x"]}'),
        ([], "[]"),
    ],
)
def test_go_json_writes_what_encoding_json_writes(value: Any, text: str) -> None:
    assert go_json(value) == text


def test_lists_and_maps_render_json_like() -> None:
    assert str(not_supported("dryRun", str_list(["Yes"]), ["All"])) == (
        'dryRun: Unsupported value: ["Yes"]: supported values: "All"'
    )
    assert str(invalid("spec.clusterIPs", ["192.0.2.10"], "failed")) == (
        'spec.clusterIPs: Invalid value: ["192.0.2.10"]: failed'
    )
    assert str_map({"b": "2", "a": "1"}).text == '{"a":"1","b":"2"}'
    assert str_list(None).text == "null"
    assert str(invalid("x", {"k": 1}, "bad")) == 'x: Invalid value: {"k":1}: bad'


def test_a_label_selector_renders_its_fields_in_struct_order_without_empty_ones() -> None:
    selector = {
        "matchExpressions": [{"key": "tier", "operator": "Exists"}],
        "matchLabels": {"app": "web"},
    }
    assert label_selector_value(selector).text == (
        '{"matchLabels":{"app":"web"},"matchExpressions":[{"key":"tier","operator":"Exists"}]}'
    )
    assert label_selector_value({}).text == "{}"
    assert label_selector_value(None).text == "null"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (
            {"zeta": 1, "data": {"a": "2"}, "list": ["x", 2.5, None, True]},
            "map[data:map[a:2] list:[x 2.5 <nil> true] zeta:1]",
        ),
        (123456, "123456"),
        (1e6, "1e+06"),
        (1234567, "1.234567e+06"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (-2.5, "-2.5"),
    ],
)
def test_go_v_prints_what_fmt_prints_for_decoded_json(value: Any, text: str) -> None:
    assert go_v(value) == text
