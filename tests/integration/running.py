"""A manager's ``run`` in a thread, for the tests that drive a :class:`Manager` they
built themselves (options the YAML loader does not reach, their return code, the
moment they stop). Plugin-style tests use :func:`manager.testing.run_manager`."""

from __future__ import annotations

import threading

from manager.manager import Manager


class ManagerThread:
    """Starts ``mgr.run`` at once; :meth:`close` stops it and joins every thread."""

    def __init__(self, mgr: Manager) -> None:
        self.mgr = mgr
        self.stop = threading.Event()
        self.rc: int | None = None
        self.thread = threading.Thread(target=self._run, name="test-manager")
        self.thread.start()

    def _run(self) -> None:
        self.rc = self.mgr.run(self.stop)

    def ended_within(self, seconds: float) -> bool:
        """Whether ``run`` has returned within ``seconds``."""
        self.thread.join(seconds)
        return not self.thread.is_alive()

    def close(self, *releases: threading.Event) -> int | None:
        """Set ``releases`` (gates a test holds reconciles on), stop, join; the return
        code of ``run``."""
        for release in releases:
            release.set()
        self.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive(), "manager did not return"
        assert self.mgr.join(15), "manager threads still running"
        return self.rc
