"""Where the benchmarks run: the local API server in its own process, or a cluster.

:func:`local_server` starts ``python -m manager apiserver --port 0`` as a separate
process (so the server's CPU is not charged to the benchmarked client), waits for its
kubeconfig and ``/readyz``, and kills it on exit. With ``--kubeconfig`` the harness uses
that cluster instead; every benchmark then works in namespaces it creates and deletes.

Not thread-safe: one :class:`Target` per harness run; its :class:`RawClient` is.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench.rawhttp import RawClient

READY_TIMEOUT = 30.0  # seconds for the server to write its kubeconfig and answer /readyz
_names = itertools.count(1)


@dataclass
class Target:
    """An API server the benchmarks talk to."""

    kubeconfig: str
    local: bool
    server: subprocess.Popen[bytes] | None = None
    raw: RawClient = field(init=False)
    namespaces: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.raw = RawClient(self.kubeconfig, pool_size=16)

    def new_namespace(self, prefix: str) -> str:
        """Create a fresh namespace (deleted by :meth:`cleanup`) and wait for its SA."""
        name = f"{prefix}-{os.getpid()}-{next(_names)}"
        self.raw.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
        self.namespaces.append(name)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # pods need the namespace's default SA
            try:
                self.raw.request("GET", f"/api/v1/namespaces/{name}/serviceaccounts/default")
                break
            except RuntimeError:
                time.sleep(0.1)
        return name

    def delete_namespace(self, name: str) -> None:
        with contextlib.suppress(Exception):
            self.raw.request("DELETE", f"/api/v1/namespaces/{name}", ok=(200, 202, 404))
        if name in self.namespaces:
            self.namespaces.remove(name)

    def cleanup(self) -> None:
        for name in list(self.namespaces):
            self.delete_namespace(name)
        self.raw.close()


def _wait_ready(proc: subprocess.Popen[bytes], kubeconfig: Path, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"local API server exited ({proc.returncode}): {log.read_text()}")
        if kubeconfig.exists():
            try:
                raw = RawClient(str(kubeconfig))
                raw.request("GET", "/readyz", timeout=2.0)
                raw.close()
                return
            except Exception:  # not listening yet
                pass
        time.sleep(0.05)
    raise RuntimeError(f"local API server not ready after {READY_TIMEOUT}s: {log.read_text()}")


def stop_process(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds; never raises."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGCONT)
        proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(5)


@contextlib.contextmanager
def local_server() -> Iterator[Target]:
    """The local API server (``python -m manager apiserver``) in a child process,
    killed on exit."""
    with tempfile.TemporaryDirectory(prefix="overseer-bench-") as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        log = Path(tmp) / "apiserver.log"
        cmd = [
            sys.executable,
            "-m",
            "manager",
            "apiserver",
            "--port",
            "0",
            "--kubeconfig-out",
            str(kubeconfig),
        ]
        with log.open("wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        target: Target | None = None
        try:
            _wait_ready(proc, kubeconfig, log)
            target = Target(str(kubeconfig), local=True, server=proc)
            yield target
        finally:
            if target is not None:
                target.raw.close()
            stop_process(proc)


@contextlib.contextmanager
def remote(kubeconfig: str) -> Iterator[Target]:
    """A cluster from a kubeconfig; namespaces created by benchmarks are deleted after."""
    target = Target(kubeconfig, local=False)
    try:
        yield target
    finally:
        target.cleanup()
