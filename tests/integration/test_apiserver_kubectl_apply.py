"""Conformance: ``kubectl apply --server-side`` (field managers, conflicts, force).

Skipped with a message when kubectl is not installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

KUBECTL = shutil.which("kubectl")
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
