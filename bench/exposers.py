"""The exposer subjects, each started in its own process with a :class:`ProcessSampler`.

``overseer``
    ``python -m manager run --kubeconfig K --config C``: only the ``exposer`` controller
    enabled (4 workers), leader election off, metrics and probes off (``"0"``),
    ``watchNamespace`` the benchmark's namespace, client limit 1000 QPS / burst 2000 (the
    default 20 QPS would make the figure the limiter's; the peers have no client limit).
``overseer-noevent``
    the same with ``exposedEvent: false`` (no first-exposure ``Exposed`` Event): the
    difference between the two is what the Event costs, measured in the same run.
``baseline``, ``baseline-noevent``
    the same two, run from another checkout of Overseer (``$BENCH_BASELINE``: a work tree
    with its own ``.venv``), so that old and new code are measured side by side in one
    session; only when ``BENCH_BASELINE`` is set.
``official``
    ``python -m bench.peers.official_exposer`` (:mod:`bench.peers.official_exposer`).
``kopf``
    ``python -m kopf run --standalone --namespace NS bench/peers/kopf_exposer.py``.

Every subject uses ``--workers`` concurrent reconciles and the Ingress domain
:data:`DOMAIN`. Output goes to a log file in the run's scratch directory, shown when a
subject fails. :meth:`Subject.stop` ends the process (SIGTERM, then SIGKILL).

Not thread-safe: one owner per subject.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from bench.sampler import ProcessSampler
from bench.target import stop_process

ROOT = Path(__file__).resolve().parent.parent
DOMAIN = "bench.example.test"
OVERSEERS = ("overseer", "overseer-noevent")
PEERS = ("official", "kopf")
BASELINES = ("baseline", "baseline-noevent")
ALL_EXPOSERS = (*OVERSEERS, *PEERS, *BASELINES)


def _exposers() -> tuple[str, ...]:
    """The subjects of this session: ``$BENCH_EXPOSERS`` (comma-separated) if set, else
    Overseer with and without the Event, the peers, and the baselines if
    ``$BENCH_BASELINE`` names a checkout."""
    chosen = os.environ.get("BENCH_EXPOSERS", "")
    if chosen:
        names = tuple(n.strip() for n in chosen.split(",") if n.strip())
        unknown = [n for n in names if n not in ALL_EXPOSERS]
        if unknown:
            raise ValueError(
                f"BENCH_EXPOSERS: unknown subject(s) {', '.join(unknown)}; "
                f"known: {', '.join(ALL_EXPOSERS)}"
            )
        return names
    return (*OVERSEERS, *PEERS, *(BASELINES if os.environ.get("BENCH_BASELINE") else ()))


EXPOSERS = _exposers()
PAIRS = (("overseer", "overseer-noevent"), ("baseline", "baseline-noevent"))


def turn_order(index: int) -> list[str]:
    """The subjects of run ``index``: each takes its turn first, but the two halves of a
    pair (with and without the Event) run back to back, in alternating order, so that
    their ratio compares neighbours on a machine whose load drifts."""
    units: list[tuple[str, ...]] = []
    for name in EXPOSERS:
        pair = next((p for p in PAIRS if name in p), None)
        if pair is None:
            units.append((name,))
        elif all(n in EXPOSERS for n in pair):
            if pair not in units:
                units.append(pair)
        else:
            units.append((name,))
    turn = index % len(units)
    ordered = units[turn:] + units[:turn]
    return [n for unit in ordered for n in (unit if index % 2 == 0 else unit[::-1])]


def per_run_ratio(metrics: dict[str, float], metric: str, on: str, off: str) -> float | None:
    """``on``'s ``metric`` over ``off``'s, in one run (None: one of them did not run)."""
    a, b = metrics.get(f"{on}_{metric}"), metrics.get(f"{off}_{metric}")
    return a / b if a is not None and b else None


QPS = 1000.0
BURST = 2000


def installed_controllers() -> list[str]:
    """Names of the installed ``overseer.controllers`` plugins (none imported)."""
    from manager.plugins import discover

    return [info.name for info in discover()]


def overseer_config(
    path: Path,
    namespace: str,
    *,
    enable: dict[str, dict[str, Any]],
    leader_election: dict[str, Any] | None = None,
    log_level: str = "warning",
) -> Path:
    """Write an ``overseer run`` config: controllers in ``enable`` on, every other off."""
    controllers: dict[str, Any] = {name: {"enabled": False} for name in installed_controllers()}
    for name, section in enable.items():
        controllers[name] = {"enabled": True, **section}
    doc = {
        "client": {"qps": QPS, "burst": BURST},
        "leaderElection": leader_election or {"enabled": False},
        "metricsBindAddress": "0",
        "healthProbeBindAddress": "0",
        "watchNamespace": namespace,
        "log": {"format": "json", "level": log_level},
        "controllers": controllers,
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def sharded_config(
    path: Path, namespace: str, *, ring: str, metrics_port: int, enable: dict[str, dict[str, Any]]
) -> Path:
    """An ``overseer run`` config for one replica of a ring: ``enable``'s controllers on
    (every other off), leader election off, plain /metrics on 127.0.0.1:``metrics_port``,
    the shard Leases and the watch in ``namespace``."""
    controllers: dict[str, Any] = {name: {"enabled": False} for name in installed_controllers()}
    for name, section in enable.items():
        controllers[name] = {"enabled": True, **section}
    doc = {
        "client": {"qps": 1000.0, "burst": 2000},
        "leaderElection": {"enabled": False},
        "sharding": {"ringName": ring, "namespace": namespace},
        "metricsBindAddress": f"127.0.0.1:{metrics_port}",
        "metrics": {"secure": False},
        "healthProbeBindAddress": "0",
        "watchNamespace": namespace,
        "log": {"format": "json", "level": "warning"},
        "controllers": controllers,
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Subject:
    """One controller process under test."""

    def __init__(
        self,
        name: str,
        cmd: list[str],
        log: Path,
        env: dict[str, str] | None = None,
        *,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                cwd=cwd,
            )
        self.sampler = ProcessSampler(self.proc.pid)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        self.sampler.sample()
        self.sampler.stop()
        stop_process(self.proc, grace=5.0)


def start_exposer(
    kind: str, kubeconfig: str, namespace: str, scratch: Path, *, workers: int = 4
) -> Subject:
    """Start exposer ``kind`` (one of :data:`EXPOSERS`) scoped to ``namespace``."""
    scratch.mkdir(parents=True, exist_ok=True)
    log = scratch / f"{kind}-{namespace}.log"
    if kind in OVERSEERS or kind in BASELINES:
        section: dict[str, Any] = {"workers": workers, "domain": DOMAIN}
        if kind.endswith("-noevent"):
            section["exposedEvent"] = False
        config = overseer_config(
            scratch / f"{kind}-{namespace}.yaml", namespace, enable={"exposer": section}
        )
        python, cwd = sys.executable, None
        if kind in BASELINES:
            tree = Path(os.environ.get("BENCH_BASELINE", ""))
            python, cwd = str(tree / ".venv" / "bin" / "python"), tree
            if not tree.name or not Path(python).exists():
                raise ValueError(f"BENCH_BASELINE={tree}: not a checkout with a .venv")
        cmd = [python, "-m", "manager", "run", "--kubeconfig", kubeconfig]
        return Subject(kind, [*cmd, "--config", str(config)], log, cwd=cwd)
    if kind == "official":
        cmd = [
            sys.executable,
            "-m",
            "bench.peers.official_exposer",
            "--kubeconfig",
            kubeconfig,
            "--namespace",
            namespace,
            "--workers",
            str(workers),
            "--domain",
            DOMAIN,
        ]
        return Subject(kind, cmd, log)
    if kind == "kopf":
        script = ROOT / "bench" / "peers" / "kopf_exposer.py"
        cmd = [
            sys.executable,
            "-m",
            "kopf",
            "run",
            os.environ.get("BENCH_KOPF_VERBOSITY", "--quiet"),
            "--standalone",
        ]
        env = {
            "KUBECONFIG": kubeconfig,
            "BENCH_DOMAIN": DOMAIN,
            "BENCH_WORKERS": str(workers),
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        }
        return Subject(kind, [*cmd, "--namespace", namespace, str(script)], log, env)
    raise ValueError(f"unknown exposer {kind!r}; known: {', '.join(EXPOSERS)}")
