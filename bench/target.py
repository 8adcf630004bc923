"""Where the benchmarks run: the local API server in its own process, or a cluster.

:func:`local_server` starts ``python -m bench.localserver`` (``LocalApiServer`` plus its
request record on a side port) as a separate process (so the server's CPU is not charged
to the benchmarked client), waits for its kubeconfig and ``/readyz``, and kills it on
exit. With ``--kubeconfig`` the harness uses that cluster instead; every benchmark then
works in namespaces it creates and deletes, and creates only what a real cluster keeps:
pods are never bound to a node (no Node exists for them: the pod garbage collector would
delete them) and name a scheduler that does not exist (the default scheduler leaves them
Pending, untouched), and no workload controller owns them. :attr:`Target.requests`
counts API requests on either (:mod:`bench.requests`).

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
from bench.requests import RequestCounter

READY_TIMEOUT = 30.0  # seconds for the server to write its kubeconfig and answer /readyz
_names = itertools.count(1)


@dataclass
class Target:
    """An API server the benchmarks talk to."""

    kubeconfig: str
    local: bool
    server: subprocess.Popen[bytes] | None = None
    requests_url: str | None = None  # the local server's request record
    raw: RawClient = field(init=False)
    requests: RequestCounter = field(init=False)
    namespaces: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.raw = RawClient(self.kubeconfig, pool_size=16)
        self.requests = RequestCounter(local_url=self.requests_url, raw=self.raw)

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
        self.requests.close()
        self.raw.close()


def _wait_ready(
    proc: subprocess.Popen[bytes], kubeconfig: Path, requests_out: Path, log: Path
) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"local API server exited ({proc.returncode}): {log.read_text()}")
        if kubeconfig.exists() and requests_out.exists():
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
def local_server(feature_gates: str = "") -> Iterator[Target]:
    """The local API server (``python -m bench.localserver``) in a child process,
    killed on exit; ``feature_gates`` as its ``--feature-gates`` (e.g.
    ``ShardedListAndWatch=true``)."""
    with tempfile.TemporaryDirectory(prefix="overseer-bench-") as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        requests_out = Path(tmp) / "requests-url"
        log = Path(tmp) / "apiserver.log"
        cmd = [
            sys.executable,
            "-m",
            "bench.localserver",
            "--kubeconfig-out",
            str(kubeconfig),
            "--requests-out",
            str(requests_out),
        ]
        if feature_gates:
            cmd += ["--feature-gates", feature_gates]
        with log.open("wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        target: Target | None = None
        try:
            _wait_ready(proc, kubeconfig, requests_out, log)
            url = requests_out.read_text().strip()
            target = Target(str(kubeconfig), local=True, server=proc, requests_url=url)
            yield target
        finally:
            if target is not None:
                target.requests.close()
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
