"""The garbage-collector settings of Overseer's own processes: the standalone local API
server freezes what survives each full collection; ``overseer run`` holds automatic
collection back until its caches have synced, then freezes what is alive. Each is checked
in a fresh interpreter (freezing the test process would keep its garbage cycles
forever)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_the_standalone_server_freezes_what_survives_a_full_collection() -> None:
    code = """
        import gc
        from apiserver.http.gcpause import freeze_after_full_collections
        kept = [[i] for i in range(10_000)]
        gc.collect(1)
        before = gc.get_freeze_count()
        freeze_after_full_collections()
        freeze_after_full_collections()  # once per process
        gc.collect(1)
        after_young = gc.get_freeze_count()
        gc.collect()
        print(before, after_young, gc.get_freeze_count() >= len(kept), len(gc.callbacks))
    """
    assert run(code) == "0 0 True 1"


def test_overseer_run_freezes_once_its_caches_have_synced() -> None:
    code = """
        import gc, threading
        from manager.cli import _freeze_after_sync

        class Informer:
            synced = False
            def has_synced(self): return self.synced

        class Factory:
            def __init__(self): self.list = [Informer(), Informer()]
            def informers(self): return self.list

        class Manager:
            factory = Factory()

        mgr, stop = Manager(), threading.Event()
        thread = threading.Thread(target=_freeze_after_sync, args=(mgr, stop))
        thread.start()
        thread.join(0.5)
        waiting = thread.is_alive() and gc.get_freeze_count() == 0
        paused = not gc.isenabled()  # no full collections while the caches fill
        mgr.factory.list[0].synced = mgr.factory.list[1].synced = True
        thread.join(5)
        print(waiting, paused, thread.is_alive(), gc.get_freeze_count() > 1000, gc.isenabled())
    """
    assert run(code) == "True True False True True"


def test_collection_resumes_when_the_caches_take_too_long_or_the_manager_stops() -> None:
    code = """
        import gc, threading, time
        from manager.cli import _freeze_after_sync

        class Informer:
            synced = False
            def has_synced(self): return self.synced

        class Factory:
            def __init__(self): self.list = [Informer()]
            def informers(self): return self.list

        class Manager:
            def __init__(self): self.factory = Factory()

        mgr, stop = Manager(), threading.Event()
        thread = threading.Thread(
            target=_freeze_after_sync, args=(mgr, stop), kwargs={"pause_limit": 0.3}
        )
        thread.start()
        deadline = time.monotonic() + 5
        while not gc.isenabled() and time.monotonic() < deadline:
            time.sleep(0.05)
        resumed = gc.isenabled() and thread.is_alive() and gc.get_freeze_count() == 0
        mgr.factory.list[0].synced = True  # still frozen once synced
        thread.join(5)
        frozen = gc.get_freeze_count() > 1000

        gc.unfreeze()
        mgr, stop = Manager(), threading.Event()
        thread = threading.Thread(target=_freeze_after_sync, args=(mgr, stop))
        thread.start()
        thread.join(0.3)
        paused = not gc.isenabled()
        stop.set()  # stopped before any sync: collection back on, nothing frozen
        thread.join(5)
        print(resumed, frozen, paused, thread.is_alive(), gc.isenabled(), gc.get_freeze_count())
    """
    assert run(code) == "True True True False True 0"
