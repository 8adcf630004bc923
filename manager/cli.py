"""The ``overseer`` command line.

Commands:
    ``overseer version``    print the version.
    ``overseer apiserver``  run the local Kubernetes API server (``manager.testing``) in
                            the foreground, print its kubeconfig path, and with
                            ``--demo`` seed it with sample objects; stops on Ctrl-C.

Only the CLI configures logging handlers; library modules just log.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from manager import __version__

__all__ = ["main"]

logger = logging.getLogger("overseer")

DEMO_NAMESPACE = "demo"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="overseer", description="A Kubernetes controller manager in Python."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("version", help="print the version and exit")
    api = sub.add_parser(
        "apiserver",
        help="run the local Kubernetes API server (for demos, tests and kubectl)",
        description="Run the local Kubernetes API server in the foreground until Ctrl-C.",
    )
    api.add_argument("--port", type=int, default=0, help="port to bind (default: a free one)")
    api.add_argument(
        "--kubeconfig-out",
        metavar="PATH",
        help="write the server's kubeconfig here (default: a temporary file, printed)",
    )
    api.add_argument("--demo", action="store_true", help="seed sample Deployments and Pods")
    return parser


def _seed_demo(server: object) -> list[str]:
    from manager.testing import LocalApiServer

    assert isinstance(server, LocalApiServer)
    server.create("v1", "namespaces", {"metadata": {"name": DEMO_NAMESPACE}})
    made = []
    for name, port in (("web", 8080), ("api", 9090)):
        labels = {"app": name}
        server.create(
            "apps/v1",
            "deployments",
            {
                "metadata": {"name": name, "annotations": {"overseer.io/expose": "true"}},
                "spec": {
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {
                            "containers": [
                                {
                                    "name": name,
                                    "image": f"example/{name}:1.0",
                                    "ports": [{"name": "http", "containerPort": port}],
                                }
                            ]
                        },
                    },
                },
            },
            namespace=DEMO_NAMESPACE,
        )
        made.append(f"deployment/{name}")
        for i in range(2):
            pod = f"{name}-{i}"
            server.create(
                "v1",
                "pods",
                {
                    "metadata": {"name": pod, "labels": labels},
                    "spec": {"containers": [{"name": name, "image": f"example/{name}:1.0"}]},
                },
                namespace=DEMO_NAMESPACE,
            )
            made.append(f"pod/{pod}")
    return made


def _run_apiserver(args: argparse.Namespace) -> int:
    from manager.testing import LocalApiServer

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    with LocalApiServer(port=args.port, kubeconfig_path=args.kubeconfig_out) as server:
        print(f"local API server listening on {server.url}")
        print(f"kubeconfig: {server.kubeconfig_path}")
        print(f"try: kubectl --kubeconfig {server.kubeconfig_path} get ns")
        if args.demo:
            made = _seed_demo(server)
            print(f"seeded namespace {DEMO_NAMESPACE!r}: {', '.join(made)}")
        print("press Ctrl-C to stop")
        sys.stdout.flush()
        stop.wait()
    print("stopped")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``overseer`` console script; returns the exit code."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if args.command == "version":
        print(f"overseer {__version__}")
        return 0
    if args.command == "apiserver":
        return _run_apiserver(args)
    raise AssertionError(f"unhandled command {args.command}")
