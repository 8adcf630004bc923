"""The cost of a subject process: CPU seconds over a window and peak RSS, from outside.

A :class:`ProcessSampler` follows one process (and its children) by pid with psutil:
a thread samples the RSS every ``interval`` seconds, and :meth:`peak_rss` takes the
larger of the highest sample and the kernel's high-water mark (``VmHWM`` in
``/proc/<pid>/status``), so a spike between two samples is not missed. :meth:`cpu`
returns the user + system CPU seconds the process has used so far; the caller takes the
difference over the window it measures.

Thread-safe: the figures are kept under a lock.
"""

from __future__ import annotations

import contextlib
import threading

import psutil

INTERVAL = 0.1  # seconds between RSS samples


def _hwm(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class ProcessSampler:
    """CPU seconds and peak RSS of process ``pid`` (children included)."""

    def __init__(self, pid: int, *, interval: float = INTERVAL) -> None:
        self.pid = pid
        self._proc = psutil.Process(pid)
        self._interval = interval
        self._peak = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"bench-sampler/{pid}")
        self._last_cpu = 0.0
        self._thread.start()

    def _procs(self) -> list[psutil.Process]:
        try:
            return [self._proc, *self._proc.children(recursive=True)]
        except psutil.Error:
            return []

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.sample()
            self.cpu()  # keeps the last figure of a process that is killed later

    def sample(self) -> None:
        """Record the current RSS (and the high-water mark) now."""
        rss = 0
        for p in self._procs():
            with contextlib.suppress(psutil.Error):
                rss += p.memory_info().rss
        hwm = _hwm(self.pid)
        with self._lock:
            self._peak = max(self._peak, rss, hwm)

    def cpu(self) -> float:
        """User + system CPU seconds used so far (the last value once the process ended)."""
        total = 0.0
        procs = self._procs()
        if not procs:
            with self._lock:
                return self._last_cpu
        for p in procs:
            with contextlib.suppress(psutil.Error):
                t = p.cpu_times()
                total += t.user + t.system
        with self._lock:
            self._last_cpu = max(self._last_cpu, total)
            return self._last_cpu

    def peak_rss(self) -> int:
        """The highest RSS seen, in bytes."""
        self.sample()
        with self._lock:
            return self._peak

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
