"""CRD conversion through a hub version, answered as a ConversionReview; the metadata
rules kube-apiserver enforces on converted objects (webhook_converter.go) enforced here,
with the failure the API server would report."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from manager import Conversion, JsonDict, Spoke
from manager.testing import convert_objects
from manager.webhook import BadReview, InvalidWebhook
from manager.webhook.conversion import convert
from manager.webhook.metrics import CONVERSION_PANICS

CALLS: list[str] = []


def v1_to_hub(obj: JsonDict) -> JsonDict:
    CALLS.append("v1->v2")
    obj["spec"] = {"size": {"value": obj["spec"].pop("size"), "unit": "items"}}
    return obj


def hub_to_v1(obj: JsonDict) -> JsonDict:
    CALLS.append("v2->v1")
    obj["spec"] = {"size": obj["spec"]["size"]["value"]}
    return obj


def v3_to_hub(obj: JsonDict) -> JsonDict:
    CALLS.append("v3->v2")
    return {**obj, "spec": {"size": {"value": obj["spec"]["sizeItems"], "unit": "items"}}}


def hub_to_v3(obj: JsonDict) -> JsonDict:
    CALLS.append("v2->v3")
    # a fresh object without metadata: the framework keeps the original's
    return {"spec": {"sizeItems": obj["spec"]["size"]["value"]}}


WIDGETS = Conversion(
    crd="widgets.example.com",
    hub="v2",
    spokes={"v1": Spoke(to_hub=v1_to_hub, from_hub=hub_to_v1), "v3": Spoke(v3_to_hub, hub_to_v3)},
)


def _v1(name: str = "w", size: int = 3, **meta: Any) -> JsonDict:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": f"uid-{name}",
            "resourceVersion": "42",
            "labels": {"app": "web"},
            **meta,
        },
        "spec": {"size": size},
    }


def test_spoke_to_spoke_goes_through_the_hub_and_keeps_the_metadata() -> None:
    CALLS.clear()
    original = _v1(finalizers=["example.com/keep"])
    [converted] = convert_objects(WIDGETS, [original], "example.com/v3")
    assert CALLS == ["v1->v2", "v2->v3"]
    assert converted == {
        "apiVersion": "example.com/v3",
        "kind": "Widget",
        "metadata": original["metadata"],
        "spec": {"sizeItems": 3},
    }


def test_to_and_from_the_hub_and_a_list_in_order() -> None:
    CALLS.clear()
    hub = convert_objects(WIDGETS, [_v1("a", 1), _v1("b", 2)], "example.com/v2")
    assert [o["spec"]["size"]["value"] for o in hub] == [1, 2]
    assert all(o["apiVersion"] == "example.com/v2" for o in hub)
    back = convert_objects(WIDGETS, hub, "example.com/v1")
    assert back == [_v1("a", 1), _v1("b", 2)]
    assert CALLS == ["v1->v2", "v1->v2", "v2->v1", "v2->v1"]


def test_an_object_already_in_the_desired_version_is_returned_as_it_came() -> None:
    CALLS.clear()
    assert convert_objects(WIDGETS, [_v1()], "example.com/v1") == [_v1()]
    assert CALLS == []


def test_labels_and_annotations_come_from_the_converted_object_the_rest_from_the_original() -> None:
    def relabel(obj: JsonDict) -> JsonDict:
        obj["metadata"]["labels"] = {"app": "web", "converted": "yes"}
        obj["metadata"]["annotations"] = {"example.com/from": "v1"}
        obj["metadata"]["resourceVersion"] = "999"  # not the converter's to change: restored
        obj["metadata"]["finalizers"] = ["sneaky"]
        return v1_to_hub(obj)

    conversion = Conversion(
        crd="widgets.example.com", hub="v2", spokes={"v1": Spoke(relabel, hub_to_v1)}
    )
    [hub] = convert_objects(conversion, [_v1()], "example.com/v2")
    assert hub["metadata"] == {
        **_v1()["metadata"],
        "labels": {"app": "web", "converted": "yes"},
        "annotations": {"example.com/from": "v1"},
    }


def _failure(conversion: Conversion, objects: list[JsonDict], to: str) -> str:
    with pytest.raises(AssertionError) as error:
        convert_objects(conversion, objects, to)
    return str(error.value)


@pytest.mark.parametrize(
    ("to_hub", "message"),
    [
        (
            lambda o: {**o, "metadata": {**o["metadata"], "name": "other"}},
            "converted widgets.example.com w: must have the same name: 'w' != 'other'",
        ),
        (lambda o: {**o, "kind": "Gadget"}, "must have the same kind: Widget != Gadget"),
        (
            lambda o: {**o, "metadata": {**o["metadata"], "labels": {"a": 1}}},
            "metadata.labels[a] must be a string, but is 1",
        ),
        (
            lambda o: {**o, "metadata": {**o["metadata"], "labels": {"a b": "x"}}},
            'metadata.labels: Invalid value: "a b"',
        ),
        (lambda o: [o], "returned list, expected the converted object"),
    ],
)
def test_what_kube_would_refuse_fails_the_review(to_hub: Any, message: str) -> None:
    conversion = Conversion(
        crd="widgets.example.com", hub="v2", spokes={"v1": Spoke(to_hub, hub_to_v1)}
    )
    assert message in _failure(conversion, [_v1()], "example.com/v2")


def test_a_converter_that_raises_fails_the_review_and_is_counted() -> None:
    def broken(obj: JsonDict) -> JsonDict:
        raise ValueError("no size")

    conversion = Conversion(
        crd="widgets.example.com", hub="v2", spokes={"v1": Spoke(broken, hub_to_v1)}
    )
    before = CONVERSION_PANICS._value.get()
    message = _failure(conversion, [_v1()], "example.com/v2")
    assert "converting widgets.example.com w from v1 to the hub v2: ValueError: no size" in message
    assert CONVERSION_PANICS._value.get() == before + 1


def test_versions_the_declaration_does_not_cover_are_named() -> None:
    message = _failure(WIDGETS, [_v1()], "example.com/v4")
    assert (
        "no conversion for the desired version 'v4': the hub is 'v2', the spokes v1, v3" in message
    )
    other = {**_v1(), "apiVersion": "example.com/v0"}
    assert "no conversion for objects[0]'s version 'v0'" in _failure(
        WIDGETS, [other], "example.com/v2"
    )
    gadget = {**_v1(), "apiVersion": "other.io/v1"}
    assert "apiVersion 'other.io/v1' is not of widgets.example.com" in _failure(
        WIDGETS, [gadget], "example.com/v2"
    )


def test_the_review_answer_is_a_v1_conversion_review_with_the_uid() -> None:
    body = orjson.dumps(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": "u-1", "desiredAPIVersion": "example.com/v2", "objects": [_v1()]},
        }
    )
    ok, _, sent = convert(body, WIDGETS)
    review = orjson.loads(sent)
    assert ok and review["apiVersion"] == "apiextensions.k8s.io/v1"
    assert review["kind"] == "ConversionReview"
    assert review["response"]["uid"] == "u-1"
    assert review["response"]["result"] == {"status": "Success"}
    failed = orjson.loads(convert(body.replace(b"example.com/v2", b"example.com/v9"), WIDGETS)[2])
    assert failed["response"]["result"]["status"] == "Failure"
    assert "convertedObjects" not in failed["response"]


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"uid": "u", "objects": []}, "request.desiredAPIVersion: expected group/version"),
        ({"uid": "u", "desiredAPIVersion": "example.com/v1"}, "request.objects: expected a list"),
        ({"desiredAPIVersion": "example.com/v1", "objects": []}, "request has no uid"),
    ],
)
def test_a_malformed_review_is_a_bad_review(request_: JsonDict, message: str) -> None:
    body = orjson.dumps(
        {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": request_}
    )
    with pytest.raises(BadReview, match=message):
        convert(body, WIDGETS)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"crd": "widgets"}, "crd: Invalid value: 'widgets': the CRD's name, <plural>.<group>"),
        ({"crd": "widgets.local"}, "the CRD's name"),
        ({"hub": "V2"}, "version 'V2': a DNS-1035 label"),
        ({"spokes": {}}, "spokes: at least one version besides the hub"),
        ({"spokes": {"v2": Spoke(v1_to_hub, hub_to_v1)}}, "spokes: 'v2' is the hub"),
        (
            {"spokes": {"v1": (v1_to_hub, hub_to_v1)}},
            "spokes[v1]: expected Spoke(to_hub=..., from_hub=...)",
        ),
        ({"path": "/convert//x"}, "path: segment[1] may not be empty"),
    ],
)
def test_declarations_kube_would_refuse(fields: dict[str, Any], message: str) -> None:
    declared: dict[str, Any] = {
        "crd": "widgets.example.com",
        "hub": "v2",
        "spokes": {"v1": Spoke(v1_to_hub, hub_to_v1)},
        **fields,
    }
    with pytest.raises(InvalidWebhook) as error:
        Conversion(**declared)
    assert any(message in p for p in error.value.problems), error.value.problems


def test_the_crd_conversion_stanza() -> None:
    stanza = WIDGETS.client_config({"service": {"name": "overseer-webhook", "namespace": "ops"}})
    assert stanza == {
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": {
                "service": {
                    "name": "overseer-webhook",
                    "namespace": "ops",
                    "path": "/convert/widgets.example.com",
                }
            },
            "conversionReviewVersions": ["v1"],
        },
    }
