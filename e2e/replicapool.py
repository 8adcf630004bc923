"""A Deployment-like set of ``overseer run`` processes for the chaos harnesses.

Each replica is one process (:class:`~e2e.processes.Replica`) behind its own
:class:`~manager.testing.proxy.TcpProxy` (to cut, slow or stall its path to the API
server), with a kubeconfig whose token names it (so the local server's audit says who
wrote what) and a probe port of its own. A supervisor plays the Deployment: it keeps
:attr:`ReplicaPool.target` replicas running, replacing one that exits by a new one (a new
name), and records every exit with the reason a scenario gave for it (or none: a crash).

Subclasses say what a replica runs: :meth:`ReplicaPool._config` writes its configuration
file, :meth:`ReplicaPool._plugins` names the plugin directories on its ``PYTHONPATH``.

Thread-safe: one lock guards the processes; the supervisor is one thread.
"""

from __future__ import annotations

import contextlib
import re
import signal
import socket
import threading
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from e2e.processes import Replica
from manager.testing import LocalApiServer
from manager.testing.proxy import TcpProxy

__all__ = ["Exit", "ReplicaPool", "free_port"]

# the probe server's log line: {"msg":"serving","server":"probes","address":["127.0.0.1",N]}
_PROBES = re.compile(r'"server":\s*"probes",\s*"address":\s*\["[^"]*",\s*(\d+)\]')


@dataclass
class _Proc:
    replica: Replica
    proxy: TcpProxy
    health_port: int  # 0 until read from its log
    expected: str = ""  # why it will exit: "kill", "stop", "term", or "" (it should not)
    exit_code: int | None = None


@dataclass
class Exit:
    name: str
    code: int
    expected: str  # "" when nobody asked it to go


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ReplicaPool(ABC):
    """Replica processes against ``server``, ``target`` of them kept running.

    Args:
        server: the local API server (started by the caller).
        workdir: configs, kubeconfigs and logs.
        target: how many replicas the supervisor keeps running.
        fence: False runs them with the write fence switched off (``e2e.unfenced``).
        resending: True runs them with the client's old resend of a write whose
            connection broke after it was sent (``e2e.resending``).
        module: another test-only switch: the module run instead of ``manager`` (it
            runs ``manager.cli.main``; ``e2e.leaderonly``, ``e2e.oneshotrotation``).
    """

    def __init__(
        self,
        server: LocalApiServer,
        workdir: Path,
        *,
        target: int,
        fence: bool = True,
        resending: bool = False,
        module: str = "",
    ) -> None:
        self.server = server
        self.workdir = workdir
        self.target = target
        self.fence = fence
        self.resending = resending
        self.module = module
        self.exits: list[Exit] = []
        self._lock = threading.Lock()
        self._procs: dict[str, _Proc] = {}
        self._next = 0
        self._spawning = 0  # joins under way: not live yet, not to be replaced
        self._stop = threading.Event()
        self._supervisor: threading.Thread | None = None

    # what a subclass says

    @abstractmethod
    def _config(self, name: str, health_port: int) -> Path:
        """Write the configuration file of replica ``name``; its path."""

    def _plugins(self) -> Sequence[Path]:
        return ()

    # lifecycle

    def start_replicas(self) -> None:
        for _ in range(self.target):
            self._spawn()
        self._supervisor = threading.Thread(target=self._supervise, name="chaos/supervisor")
        self._supervisor.start()

    def stop_replicas(self, grace: float) -> None:
        """SIGTERM every replica (woken first if paused); SIGKILL what outlives ``grace``."""
        self._stop.set()
        if self._supervisor is not None:
            self._supervisor.join(10)
        with self._lock:
            procs = list(self._procs.values())
        for p in procs:
            p.proxy.clear_rules()
            with contextlib.suppress(ProcessLookupError):
                p.replica.signal(signal.SIGCONT)
            p.replica.signal(signal.SIGTERM)
        for p in procs:
            if p.replica.wait(grace) is None:
                p.replica.signal(signal.SIGKILL)
                p.replica.wait(5)
            p.proxy.stop()

    # replicas

    def live(self) -> list[str]:
        with self._lock:
            return [n for n, p in self._procs.items() if p.replica.returncode is None]

    def signal(self, name: str, sig: int, *, expected: str) -> None:
        with self._lock:
            proc = self._procs[name]
            if expected:
                proc.expected = expected
        proc.replica.signal(sig)

    def expect(self, name: str, why: str) -> None:
        """``name`` may exit now (it will lose its Lease): not a crash."""
        with self._lock:
            self._procs[name].expected = why

    def proxy(self, name: str) -> TcpProxy:
        with self._lock:
            return self._procs[name].proxy

    def wait_exit(self, name: str, timeout: float) -> int:
        with self._lock:
            proc = self._procs[name]
        code = proc.replica.wait(timeout)
        if code is None:
            raise AssertionError(f"{name} still runs after {timeout} s\n{self.logs()}")
        return code

    def join(self) -> str:
        """One more replica, kept from now on."""
        with self._lock:
            self.target += 1
            self._spawning += 1
        try:
            return self._spawn()
        finally:
            with self._lock:
                self._spawning -= 1

    def leave(self, name: str, timeout: float = 30.0) -> int:
        """SIGTERM ``name`` for good (not replaced); its exit code."""
        with self._lock:
            self.target -= 1
        self.signal(name, signal.SIGTERM, expected="term")
        return self.wait_exit(name, timeout)

    def all_ready(self) -> bool:
        live = self.live()
        return len(live) == self.target and all(map(self.ready, live))

    def health_port(self, name: str) -> int | None:
        """The port ``name``'s probe server bound (it binds port 0: a port picked here
        and released could be taken meanwhile by a replica of a harness running beside
        this one), read from its log once it serves; None until then."""
        with self._lock:
            proc = self._procs[name]
        if not proc.health_port:
            try:
                found = _PROBES.search(proc.replica.log.read_text(errors="replace"))
            except OSError:
                found = None
            if found is None:
                return None
            proc.health_port = int(found.group(1))
        return proc.health_port

    def ready(self, name: str) -> bool:
        port = self.health_port(name)
        if port is None:
            return False
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                return int(r.status) == 200
        except (urllib.error.URLError, OSError):
            return False

    def logs(self, lines: int = 15) -> str:
        with self._lock:
            procs = list(self._procs.items())
        return "\n".join(
            f"--- {n} (exit {p.replica.returncode}) ---\n{p.replica.tail(lines)}" for n, p in procs
        )

    def _spawn(self) -> str:
        with self._lock:
            name = f"replica-{self._next}"
            self._next += 1
        host, port = self.server.url.removeprefix("http://").split(":")
        proxy = TcpProxy((host, int(port))).start()
        kubeconfig = self.server.kubeconfig_for(
            name, self.workdir / f"{name}.kubeconfig", server=proxy.url
        )
        health_port = 0  # the replica binds a free port and logs it (health_port())
        replica = Replica(
            name,
            self._config(name, health_port),
            str(kubeconfig),
            self.workdir,
            plugins=self._plugins(),
            fence=self.fence,
            resending=self.resending,
            module=self.module,
        )
        with self._lock:
            self._procs[name] = _Proc(replica, proxy, health_port)
        return name

    def _supervise(self) -> None:
        """The Deployment: keep ``target`` replicas running."""
        while not self._stop.wait(0.1):
            with self._lock:
                gone = [
                    (n, p)
                    for n, p in self._procs.items()
                    if p.exit_code is None and p.replica.returncode is not None
                ]
                for name, proc in gone:
                    proc.exit_code = proc.replica.returncode
                    self.exits.append(Exit(name, int(proc.exit_code or 0), proc.expected))
                running = sum(1 for p in self._procs.values() if p.replica.returncode is None)
                missing = self.target - self._spawning - running
            for _, proc in gone:
                proc.proxy.stop()
            for _ in range(max(missing, 0)):
                self._spawn()
