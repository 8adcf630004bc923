"""Structural schemas: what kube-apiserver does with a custom resource's OpenAPI v3 schema.

A CustomResourceDefinition version carries ``schema.openAPIV3Schema``, a *structural
schema*: every level says its ``type`` and the ``properties``, ``items`` or
``additionalProperties`` below it. The package follows apiextensions-apiserver's layout:

- :mod:`.nodes`: reading one schema node (``Structural``);
- :mod:`.coercion`: pruning and defaulting a value (``schema/pruning``,
  ``schema/defaulting``), copy on write;
- :mod:`.validation`: validating a value with kube-openapi's field errors and messages;
- :mod:`.definition`: what a CRD's schema must pass to be stored (``ValidateStructural``,
  ``ValidateDefaults``, the forbidden defaults);
- :mod:`.customresource`: a custom resource on a write (:func:`apply_schema`) and as read
  from storage (:func:`from_storage`).

Thread-safety: pure functions over JSON values; safe to share between threads.
"""

from __future__ import annotations

from apiserver.machinery.schema.customresource import apply_schema, from_storage, version_schema
from apiserver.machinery.schema.definition import schema_errors, structural_errors

__all__ = ["apply_schema", "from_storage", "schema_errors", "structural_errors", "version_schema"]
