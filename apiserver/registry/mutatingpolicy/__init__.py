"""MutatingAdmissionPolicy: CEL mutations of writes, as kube-apiserver's admission plugin
applies them (``staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/mutating``).

- :mod:`.dispatcher`: the plugin: which policies apply, their mutations in order,
  ``failurePolicy``, reinvocation;
- :mod:`.patchers`: the two kinds of mutation, an apply configuration merged in as
  server-side apply merges, or a JSON Patch;
- :mod:`.objects`: ``Object{...}``, ``JSONPatch{...}`` and ``jsonpatch.escapeKey`` in CEL.

Thread-safety: see each module.
"""

from __future__ import annotations

from apiserver.registry.mutatingpolicy.dispatcher import (
    BINDINGS,
    POLICIES,
    MutatingPolicyAdmission,
    Reinvocation,
)

__all__ = ["BINDINGS", "POLICIES", "MutatingPolicyAdmission", "Reinvocation"]
