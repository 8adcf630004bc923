"""openapidocs.json: the descriptions kubectl explain shows, for every served kind."""

from __future__ import annotations

import orjson

from manager.testing import openapi
from manager.testing.protoschema import KINDS
from manager.testing.registry import ResourceRegistry


def test_the_data_file_says_where_it_comes_from() -> None:
    raw = (openapi.Path(openapi.__file__).parent / "openapidocs.json").read_bytes()
    first = raw.splitlines()[0]
    assert b"regenerate: python tools/openapidocs.py" in first
    assert b"v0.36" in first
    assert orjson.loads(raw)[""].startswith("derived by tools/openapidocs.py")


def test_every_served_builtin_kind_is_described() -> None:
    docs = openapi._docs()
    for served in ResourceRegistry():
        r = served.resource
        message = KINDS.get((r.group, r.version, r.kind))
        if served.custom or message is None:
            continue
        assert docs.get(message, {}).get("d"), f"{message} has no description"


def test_documents_carry_required_and_enums() -> None:
    doc = openapi.group_version_document(ResourceRegistry(), "apps", "v1")
    assert doc is not None
    schemas = doc["components"]["schemas"]
    spec = schemas["io.k8s.api.apps.v1.DeploymentSpec"]
    assert spec["required"] == ["selector", "template"]
    assert spec["properties"]["replicas"]["description"].startswith("Number of desired pods.")
    strategy = schemas["io.k8s.api.apps.v1.DeploymentStrategy"]
    assert strategy["properties"]["type"]["enum"] == ["Recreate", "RollingUpdate"]
    intstr = schemas["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]
    assert intstr["oneOf"] == [{"type": "integer"}, {"type": "string"}]
    assert "type" not in intstr
