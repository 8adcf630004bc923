"""Conformance: ``kubectl apply --server-side`` (field managers, conflicts, force).

Skipped with a message when kubectl is not installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

KUBECTL = shutil.which("kubectl")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (not on PATH)")

CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: demo
data:
  a: "{value}"
"""


def _kubectl(
    kubeconfig_path: str, tmp_path: Path, namespace: str, *args: str
) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return subprocess.run(
        [
            KUBECTL,
            "--kubeconfig",
            kubeconfig_path,
            "--cache-dir",
            str(tmp_path / "cache"),
            "-n",
            namespace,
            *args,
        ],
        capture_output=True,
        check=False,
        text=True,
        timeout=60,
    )


def _manifest(tmp_path: Path, value: str) -> str:
    path = tmp_path / f"cm-{value}.yaml"
    path.write_text(CONFIGMAP.format(value=value))
    return str(path)


def test_server_side_apply_with_kubectl(
    kubeconfig_path: str, tmp_path: Path, namespace: str
) -> None:
    one = _manifest(tmp_path, "1")
    created = _kubectl(kubeconfig_path, tmp_path, namespace, "apply", "--server-side", "-f", one)
    assert created.returncode == 0, created.stderr
    assert "configmap/demo serverside-applied" in created.stdout
    two = _manifest(tmp_path, "2")
    clash = _kubectl(
        kubeconfig_path,
        tmp_path,
        namespace,
        "apply",
        "--server-side",
        "--field-manager",
        "other",
        "-f",
        two,
    )
    assert clash.returncode != 0
    assert 'Apply failed with 1 conflict: conflict with "kubectl": .data.a' in clash.stderr
    forced = _kubectl(
        kubeconfig_path,
        tmp_path,
        namespace,
        "apply",
        "--server-side",
        "--field-manager",
        "other",
        "--force-conflicts",
        "-f",
        two,
    )
    assert forced.returncode == 0, forced.stderr
    shown = _kubectl(
        kubeconfig_path,
        tmp_path,
        namespace,
        "get",
        "configmap",
        "demo",
        "-o",
        "json",
        "--show-managed-fields",
    )
    assert shown.returncode == 0, shown.stderr
    obj = json.loads(shown.stdout)
    assert obj["data"] == {"a": "2"}
    owners = {(e["manager"], e["operation"]) for e in obj["metadata"]["managedFields"]}
    assert ("other", "Apply") in owners


def _get(kubeconfig_path: str, tmp_path: Path, namespace: str) -> dict[str, Any]:
    shown = _kubectl(
        kubeconfig_path,
        tmp_path,
        namespace,
        "get",
        "configmap",
        "demo",
        "-o",
        "json",
        "--show-managed-fields",
    )
    assert shown.returncode == 0, shown.stderr
    obj: dict[str, Any] = json.loads(shown.stdout)
    return obj


def _managers(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"]): e["fieldsV1"] for e in obj["metadata"]["managedFields"]}


def test_server_side_apply_takes_over_from_client_side_apply(
    kubeconfig_path: str, tmp_path: Path, namespace: str
) -> None:
    """The upgrade path: ``kubectl apply``, then ``kubectl apply --server-side``: the
    fields client-side apply set (as its last-applied annotation records them) are taken
    over without a conflict, kubectl migrates their ownership, and from then on another
    manager conflicts with ``kubectl``."""
    created = _kubectl(
        kubeconfig_path, tmp_path, namespace, "apply", "-f", _manifest(tmp_path, "1")
    )
    assert created.returncode == 0, created.stderr
    assert "configmap/demo created" in created.stdout
    upgraded = _kubectl(
        kubeconfig_path,
        tmp_path,
        namespace,
        "apply",
        "--server-side",
        "-f",
        _manifest(tmp_path, "2"),
    )
    assert upgraded.returncode == 0, upgraded.stderr
    assert "configmap/demo serverside-applied" in upgraded.stdout
    obj = _get(kubeconfig_path, tmp_path, namespace)
    assert obj["data"] == {"a": "2"}
    managers = _managers(obj)
    assert ("kubectl-client-side-apply", "Update") not in managers  # migrated by kubectl
    assert managers[("kubectl", "Apply")] == {"f:data": {"f:a": {}}}
    assert managers[("kubectl-last-applied", "Apply")] == {
        "f:metadata": {"f:annotations": {f"f:{LAST_APPLIED}": {}}}
    }
    # the server keeps the annotation of a "kubectl" apply up to date
    last = json.loads(obj["metadata"]["annotations"][LAST_APPLIED])
    assert last["data"] == {"a": "2"}
    clash = _kubectl(
        kubeconfig_path,
        tmp_path,
        namespace,
        "apply",
        "--server-side",
        "--field-manager",
        "other",
        "-f",
        _manifest(tmp_path, "3"),
    )
    assert clash.returncode != 0
    assert 'Apply failed with 1 conflict: conflict with "kubectl": .data.a' in clash.stderr
    assert _get(kubeconfig_path, tmp_path, namespace)["data"] == {"a": "2"}


def test_forced_server_side_apply_after_client_side_apply_keeps_its_fields(
    kubeconfig_path: str, tmp_path: Path, namespace: str
) -> None:
    """``kubectl apply``, then ``kubectl apply --server-side --field-manager other
    --force-conflicts``: kubectl moves client-side apply's ownership (the annotation and
    ``data``) to ``other`` and applies again; that apply drops only what ``other`` no
    longer applies (the annotation), never the data it applies."""
    created = _kubectl(
        kubeconfig_path, tmp_path, namespace, "apply", "-f", _manifest(tmp_path, "1")
    )
    assert created.returncode == 0, created.stderr
    forced = _kubectl(
        kubeconfig_path,
        tmp_path,
        namespace,
        "apply",
        "--server-side",
        "--field-manager",
        "other",
        "--force-conflicts",
        "-f",
        _manifest(tmp_path, "2"),
    )
    assert forced.returncode == 0, forced.stderr
    obj = _get(kubeconfig_path, tmp_path, namespace)
    assert obj["data"] == {"a": "2"}
    assert "annotations" not in obj["metadata"]
    assert _managers(obj) == {("other", "Apply"): {"f:data": {"f:a": {}}}}
