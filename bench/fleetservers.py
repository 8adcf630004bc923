"""Member clusters for ``python -m bench fleet``: ``python -m bench.fleetservers --count N
--objects M --dir D``.

Starts ``N`` local API servers in this one process (20 server processes would cost the
2-core machine more than the replicas measured), creates ``M`` ConfigMaps labelled
``bench-fleet=true`` (256 bytes of data each) in ``default`` of each, writes each
server's kubeconfig to ``D/member-<i>.kubeconfig`` and then the file ``D/ready``. Runs
until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import FrameType

PAYLOAD = "x" * 256


def main(argv: list[str] | None = None) -> int:
    from apiserver.http.gcpause import freeze_after_full_collections
    from manager import KubeClient, builtin
    from manager.client import ClientOptions
    from manager.logs import configure
    from manager.testing import LocalApiServer

    parser = argparse.ArgumentParser(prog="python -m bench.fleetservers")
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--objects", type=int, required=True)
    parser.add_argument("--dir", required=True)
    args = parser.parse_args(argv)
    configure("warning", "text")
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    freeze_after_full_collections()
    out = Path(args.dir)
    configmaps = builtin("v1", "configmaps")
    with contextlib.ExitStack() as stack:
        servers = [
            stack.enter_context(
                LocalApiServer(port=0, kubeconfig_path=out / f"member-{i}.kubeconfig")
            )
            for i in range(args.count)
        ]
        for server in servers:
            options = ClientOptions(qps=10_000.0, burst=10_000)  # the default 20/s would pace it
            path = str(server.kubeconfig_path)
            with KubeClient.from_kubeconfig(path, options=options) as client:

                def create(i: int, client: KubeClient = client) -> None:
                    body = {
                        "metadata": {"name": f"cm-{i}", "labels": {"bench-fleet": "true"}},
                        "data": {"payload": PAYLOAD},
                    }
                    client.create(configmaps, body, "default")

                with ThreadPoolExecutor(8) as pool:
                    list(pool.map(create, range(args.objects)))
        (out / "ready").write_text("ok")
        stop.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
