"""Chaos scenarios (``e2e/chaos.py``, ``e2e/shardchaos.py``) run in child processes, a
few at a time, for the test suite (``e2e/test_chaos.py``).

A scenario spends most of its time waiting — for a Lease to expire, a hold to end, the
controllers to converge — on about a third of one CPU: two of them side by side take
little more than one. Each run is a child process of its own,
``python -m e2e.scenariopool KIND NAME WORKDIR [--fence-off] [--resending]
[--preconditions-off]``, in a session of its own (its replicas share its process group):
its own local API server, its own replicas, nothing shared with another run. It writes
its result as JSON to ``WORKDIR/result.json`` and what it printed to ``WORKDIR/run.log``.

What the test suite would have caught around a scenario run in its own process is
caught in the child and reported with the result: an exception (the harness not
starting, say) with its traceback; an exception no thread handled and a warning (as
pytest's ``filterwarnings = error`` makes them); a thread of the run still alive 5 s after
it ended (as the suite's ``no_thread_leaks`` fixture does).

:class:`ScenarioPool` starts runs in the order given, at most ``parallel`` at once, as
their results are asked for (:meth:`ScenarioPool.result` starts the next ones while it
waits: no thread of its own), and :meth:`ScenarioPool.close` ends what still runs
(SIGTERM: the run stops its replicas and its server; SIGKILL to its process group after a
grace). Used from one thread.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from e2e.chaos import ScenarioResult
from e2e.replicapool import Exit
from e2e.shardchaos import ShardResult

__all__ = ["Run", "RunFailed", "ScenarioPool"]

ROOT = Path(__file__).resolve().parent.parent
RESULT, LOG = "result.json", "run.log"
# threads other libraries start once per process and keep (as the suite's conftest.py)
_ALLOWED_THREAD_PREFIXES = ("local-apiserver", "OtelBatch", "ThreadPoolExecutor")
_THREAD_GRACE = 5.0  # seconds a run's threads get to finish after it (as no_thread_leaks)
_KILL_GRACE = 30.0  # seconds a run gets to stop its replicas after SIGTERM


@dataclass(frozen=True)
class Run:
    """One scenario run: which suite, which scenario, which test-only switch."""

    kind: Literal["leader", "sharding"]
    name: str
    fence: bool = True  # False: the write fence switched off (e2e/unfenced.py)
    resending: bool = False  # leader: the client's old resend on (e2e/resending.py)
    preconditions: bool = True  # sharding, owned mode: False drops the uid preconditions

    @property
    def key(self) -> str:
        switches = [
            s
            for s, on in (
                ("fence-off", not self.fence),
                ("resending", self.resending),
                ("preconditions-off", not self.preconditions),
            )
            if on
        ]
        return "-".join([self.kind, self.name, *switches])

    def argv(self, workdir: Path) -> list[str]:
        return [
            self.kind,
            self.name,
            str(workdir),
            *(["--fence-off"] if not self.fence else []),
            *(["--resending"] if self.resending else []),
            *(["--preconditions-off"] if not self.preconditions else []),
        ]


class RunFailed(AssertionError):
    """A run ended without a result, or with what the suite counts as a failure around
    it (an exception, a thread's unhandled exception, a warning, a leaked thread)."""


class _Child:
    def __init__(self, run: Run, workdir: Path) -> None:
        self.run = run
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        with (workdir / LOG).open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "e2e.scenariopool", *run.argv(workdir)],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                start_new_session=True,  # its replicas in its process group: one kill
            )

    def done(self) -> bool:
        return self.proc.poll() is not None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = (self.workdir / LOG).read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def result(self) -> ScenarioResult | ShardResult:
        try:
            payload = json.loads((self.workdir / RESULT).read_text())
        except (OSError, ValueError) as exc:
            raise RunFailed(
                f"{self.run.key}: no result (exit {self.proc.returncode}: {exc})\n"
                + self.log_tail()
            ) from None
        problems = [
            *([payload["error"]] if payload.get("error") else []),
            *(f"unhandled in a thread: {e}" for e in payload.get("thread_errors", [])),
            *(f"warning: {w}" for w in payload.get("warnings", [])),
            *([f"leaked threads: {payload['leaked']}"] if payload.get("leaked") else []),
        ]
        if problems:
            raise RunFailed(f"{self.run.key}:\n" + "\n".join(problems))
        return _decode(self.run, payload["result"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(_KILL_GRACE)
        # what it could not stop (replicas it had started): its group outlives it while a
        # member is alive, and Linux gives no new process a PID still used as a group's id
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)


class ScenarioPool:
    """Runs scenarios in child processes, at most ``parallel`` at once, in the order of
    ``runs`` (a run asked for that is not among them joins the queue's head)."""

    def __init__(self, runs: Iterable[Run], workdir: Path, *, parallel: int = 2) -> None:
        if parallel < 1:
            raise ValueError(f"parallel must be at least 1, got {parallel}")
        self.workdir = workdir
        self.parallel = parallel
        self._queue: list[Run] = list(dict.fromkeys(runs))
        self._children: dict[Run, _Child] = {}

    def result(self, run: Run, timeout: float) -> ScenarioResult | ShardResult:
        """The result of ``run``, once it has ended (starting it and others meanwhile).

        Raises:
            RunFailed: it ended without a result, or with a failure around it; or it did
                not end within ``timeout`` seconds (it is stopped).
        """
        if run not in self._children and run not in self._queue:
            self._queue.insert(0, run)
        deadline = time.monotonic() + timeout
        while True:
            self._fill()
            child = self._children.get(run)
            if child is not None and child.done():
                return child.result()
            if time.monotonic() > deadline:
                tail = child.log_tail() if child is not None else "(never started)"
                if child is not None:
                    child.stop()
                raise RunFailed(f"{run.key}: not done after {timeout} s\n{tail}")
            time.sleep(0.1)

    def close(self) -> None:
        """Stop every run still going; forget those not started."""
        self._queue.clear()
        for child in self._children.values():
            child.stop()

    def _fill(self) -> None:
        running = sum(1 for c in self._children.values() if not c.done())
        while self._queue and running < self.parallel:
            run = self._queue.pop(0)
            self._children[run] = _Child(run, self.workdir / run.key)
            running += 1


def _decode(run: Run, data: dict[str, Any]) -> ScenarioResult | ShardResult:
    data = {**data, "exits": [Exit(**e) for e in data.get("exits", [])]}
    if run.kind == "leader":
        return ScenarioResult(**data)
    return ShardResult(**data)


# -- the child ----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.scenariopool", description="one chaos scenario run, as JSON"
    )
    parser.add_argument("kind", choices=("leader", "sharding"))
    parser.add_argument("name")
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--fence-off", action="store_true")
    parser.add_argument("--resending", action="store_true")
    parser.add_argument("--preconditions-off", action="store_true")
    args = parser.parse_args(argv)
    run = Run(
        args.kind,
        args.name,
        fence=not args.fence_off,
        resending=args.resending,
        preconditions=not args.preconditions_off,
    )

    def terminate(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)  # the harness's with-blocks stop what it started

    signal.signal(signal.SIGTERM, terminate)
    thread_errors: list[str] = []

    def on_thread_exception(hook: threading.ExceptHookArgs) -> None:
        where = hook.thread.name if hook.thread is not None else "?"
        thread_errors.append(
            f"{where}: "
            + "".join(traceback.format_exception(hook.exc_type, hook.exc_value, hook.exc_traceback))
        )

    def on_unraisable(hook: Any) -> None:
        thread_errors.append(f"unraisable: {hook.exc_type.__name__}: {hook.exc_value}")

    threading.excepthook = on_thread_exception
    sys.unraisablehook = on_unraisable
    before = set(threading.enumerate())
    payload: dict[str, Any] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            payload["result"] = dataclasses.asdict(_run(run, args.workdir / "scenario"))
        except Exception:
            payload["error"] = traceback.format_exc()
    payload["warnings"] = [
        f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})" for w in caught
    ]
    payload["thread_errors"] = thread_errors
    payload["leaked"] = _leaked(before)
    path = args.workdir / RESULT
    path.with_suffix(".tmp").write_text(json.dumps(payload))
    path.with_suffix(".tmp").replace(path)  # whole or not at all
    return 0


def _run(run: Run, workdir: Path) -> ScenarioResult | ShardResult:
    if run.kind == "leader":
        from e2e.chaos import run_scenario

        return run_scenario(run.name, workdir, fence=run.fence, resending=run.resending)
    from e2e.shardchaos import run_shard_scenario

    return run_shard_scenario(run.name, workdir, fence=run.fence, preconditions=run.preconditions)


def _leaked(before: set[threading.Thread]) -> list[str]:
    deadline = time.monotonic() + _THREAD_GRACE
    while True:
        leaked = [
            t
            for t in threading.enumerate()
            if t not in before and t.is_alive() and not t.name.startswith(_ALLOWED_THREAD_PREFIXES)
        ]
        if not leaked or time.monotonic() > deadline:
            return sorted(t.name for t in leaked)
        time.sleep(0.02)


if __name__ == "__main__":
    sys.exit(main())
