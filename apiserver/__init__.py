"""A local Kubernetes API server: kube-apiserver's REST protocol over HTTP, for tests and demos.

:class:`LocalApiServer` serves what DESIGN.md §5 describes on 127.0.0.1, so the official
``kubernetes`` client, ``kubectl``, kopf, client-go programs and Overseer itself use it as a
cluster. It is its own package: the controller manager (``manager``) never imports it;
``manager.testing`` loads it when a fixture starts one, and ``overseer run --embedded`` /
``overseer apiserver`` when asked. See ``docs/local-apiserver.md``.

The modules form layers; a module imports only from its own layer or the ones below
(``make test`` checks it with import-linter, ``[tool.importlinter]`` in pyproject.toml):

* ``apiserver.http`` — HTTP routing, discovery, OpenAPI, Table printing, audit, faults;
* ``apiserver.registry`` — the resources' strategies: defaulting and validation of each
  kind, admission (quota, ValidatingAdmissionPolicy), subresources, the controllers the
  server runs (garbage collector, quota, workloads);
* ``apiserver.machinery`` — the REST verbs over storage (create, update, patch, apply,
  delete, list), field validation, managed fields, patches, content negotiation,
  protobuf, authentication and authorization;
* ``apiserver.storage`` — the versioned object store, watches, compaction, selectors;
* ``apiserver.api`` — the served resources' table, field errors, Go-style rendering.
"""

from __future__ import annotations

from apiserver.http.faults import Faults
from apiserver.http.featuregates import parse_feature_gates
from apiserver.http.server import LocalApiServer

__all__ = ["Faults", "LocalApiServer", "parse_feature_gates"]
