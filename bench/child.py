"""Child processes that report JSON lines on stdout (the subjects, the generator).

:class:`Child` starts ``python -m <module> ARGS``, reads its stdout on a thread, and
hands out the decoded lines with a timeout. Used as a context manager it always ends the
process (SIGTERM, then SIGKILL), whatever happened in between.

Thread-safe enough for its use: one reader thread feeds a ``queue.Queue``.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from types import TracebackType
from typing import Any

import orjson

from bench.target import stop_process


class Child:
    """``python -m module *args``, speaking JSON lines."""

    def __init__(
        self, module: str, *args: str, python: str | None = None, cwd: str | None = None
    ) -> None:
        """``python`` (default: this interpreter) runs ``module`` in ``cwd`` (default:
        this one): another checkout's code with its own interpreter."""
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in __exit__
        self.proc = subprocess.Popen(
            [python or sys.executable, "-m", module, *args],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            cwd=cwd,
        )
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name=f"bench-child/{module}")
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def next(self, timeout: float) -> dict[str, Any]:
        """The next JSON line; RuntimeError on timeout, exit, or a non-JSON line."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"child {self.proc.args} silent for {timeout}s") from None
        if line is None:
            raise RuntimeError(f"child {self.proc.args} exited: {self.stderr()}")
        doc = orjson.loads(line)
        if doc.get("ok") is False:
            raise RuntimeError(f"child {self.proc.args} failed: {doc} {self.stderr()}")
        return dict(doc)

    def pause(self) -> None:
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read()[-2000:].decode("utf-8", "replace")

    def __enter__(self) -> Child:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stop_process(self.proc, grace=5.0)
        self._reader.join(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()
