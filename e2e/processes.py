"""Run ``overseer run`` processes for end-to-end tests, and read the Lease they share.

Each :class:`Replica` is one ``python -m manager run`` child process with its own
``POD_NAME`` (so its Lease identity starts with it), a log file, and the test-only HA
plugin on ``PYTHONPATH`` (or the plugin directories it is given instead). Every wait
is bounded; :meth:`ReplicaSet.close` kills what is left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from manager.client import KubeClient
from manager.errors import NotFound
from manager.resources import builtin
from manager.testing import eventually

ROOT = Path(__file__).resolve().parent.parent
HA_PLUGIN = Path(__file__).resolve().parent / "ha_plugin"
LEASES = builtin("coordination.k8s.io/v1", "leases")


def write_config(path: Path, namespace: str, lease_name: str, **timings: float) -> Path:
    lease = {"leaseDuration": 3.0, "renewDeadline": 2.0, "retryPeriod": 0.5, **timings}
    doc: dict[str, Any] = {
        "leaderElection": {
            "enabled": True,
            "namespace": namespace,
            "leaseName": lease_name,
            **lease,
        },
        "metricsBindAddress": "0",
        "healthProbeBindAddress": "0",
        "gracefulShutdownTimeout": 10.0,
        "watchNamespace": namespace,
        "log": {"format": "json", "level": "info"},
        "controllers": {
            "exposer": {"enabled": False},
            "podport": {"enabled": False},
            "hatest": {"leaseName": lease_name, "leaseNamespace": namespace},
        },
    }
    path.write_text(yaml.safe_dump(doc))
    return path


class Replica:
    def __init__(
        self,
        name: str,
        config: Path,
        kubeconfig: str,
        logdir: Path,
        plugins: Sequence[Path] = (HA_PLUGIN,),
        *,
        fence: bool = True,
        resending: bool = False,
        module: str = "",
    ) -> None:
        if sum((resending, not fence, bool(module))) > 1:
            raise ValueError("one test-only switch at a time: fence off, resending or module")
        self.name = name
        self.log = logdir / f"{name}.log"
        if not module:
            module = "e2e.unfenced" if not fence else "e2e.resending" if resending else "manager"
        env = {
            **os.environ,
            "POD_NAME": name,
            "PYTHONPATH": os.pathsep.join([*map(str, plugins), str(ROOT)]),
        }
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    # the test-only switches: e2e/unfenced.py, e2e/resending.py, or
                    # another module that runs manager.cli.main (e2e/leaderonly.py, ...)
                    module,
                    "run",
                    "--config",
                    str(config),
                    "--kubeconfig",
                    kubeconfig,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=ROOT,
            )

    @property
    def returncode(self) -> int | None:
        """The exit status (negative: killed by that signal), None while running."""
        return self.proc.poll()

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def pause(self, timeout: float = 10.0) -> float:
        """SIGSTOP, and the time (``time.time()``) once the kernel shows the process
        stopped: it did nothing after that moment (sending the signal is not enough: the
        process runs on until the signal is delivered).

        Raises:
            AssertionError: not stopped within ``timeout`` seconds.
        """
        self.signal(signal.SIGSTOP)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if _state(self.proc.pid) in ("T", "t", "Z", ""):
                return time.time()
            time.sleep(0.005)
        raise AssertionError(f"{self.name} not stopped {timeout} s after SIGSTOP")

    def wait(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class ReplicaSet:
    def __init__(self, count: int, config: Path, kubeconfig: str, logdir: Path) -> None:
        self.replicas = [Replica(f"replica-{i}", config, kubeconfig, logdir) for i in range(count)]

    def by_identity(self, identity: str) -> Replica:
        for r in self.replicas:
            if identity.startswith(f"{r.name}_"):
                return r
        raise KeyError(identity)

    def close(self) -> None:
        for r in self.replicas:
            r.signal(signal.SIGTERM)
        for r in self.replicas:
            if r.wait(15) is None:
                r.signal(signal.SIGKILL)
                r.wait(5)

    def logs(self) -> str:
        return "\n".join(f"--- {r.name} ---\n{r.tail()}" for r in self.replicas)


def holder(client: KubeClient, namespace: str, lease: str) -> str:
    try:
        obj = client.get(LEASES, lease, namespace)
    except NotFound:
        return ""
    return str((obj.get("spec") or {}).get("holderIdentity") or "")


def _state(pid: int) -> str:
    """The process's state letter from ``/proc/<pid>/stat`` ("" when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat[stat.rindex(")") + 2 :].split(" ", 1)[0]


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, step: float = 0.02) -> Any:
    """The test kit's :func:`~manager.testing.eventually`, with these tests' argument order."""
    return eventually(predicate, timeout=timeout, what=what, interval=step)
