"""The ``overseer`` command line.

Commands:
    ``overseer run``               run the controller manager (flags override the file)
    ``overseer run --embedded``    ... against an in-process local API server
    ``overseer run --embedded --demo``  ... seeded with sample objects; prints what the
                                   controllers made
    ``overseer config defaults``   print the full default configuration, commented
    ``overseer config validate F`` check a configuration file
    ``overseer plugins``           list installed controllers
    ``overseer version``           print the version
    ``overseer apiserver``         run only the local API server (for kubectl, demos)

Exit codes: 0 success or graceful stop; 1 runtime failure (caches never synced, lost
leadership); 2 bad configuration, bad flags or a controller that cannot load.

Only the CLI configures logging handlers; library modules just log.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

from manager import __version__
from manager.errors import ConfigError, OverseerError, PluginLoadError

__all__ = ["main"]

logger = logging.getLogger("overseer")

DEMO_NAMESPACE = "demo"
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


# -- plugins and configuration ------------------------------------------------------


@dataclasses.dataclass
class _Loaded:
    schemas: dict[str, type[Any]]
    plugins: dict[str, Any]
    broken: dict[str, PluginLoadError]
    infos: dict[str, Any]


def _load_plugins() -> _Loaded:
    from manager.plugins import discover, load

    loaded = _Loaded({}, {}, {}, {})
    for info in discover():
        loaded.infos[info.name] = info
        try:
            plugin = load(info)
        except PluginLoadError as exc:
            loaded.broken[info.name] = exc
            continue
        loaded.plugins[info.name] = plugin
        loaded.schemas[info.name] = plugin.config_class
    return loaded


def _read_config(path: str | None, loaded: _Loaded) -> tuple[Any, dict[str, Any], list[str]]:
    """Validate the file (or the defaults); returns settings, controllers and warnings.

    A plugin that cannot load cannot have its section validated: if the file enables it
    (a section without ``enabled: false``), that is fatal; otherwise a warning, returned
    for the caller to log once logging is configured.
    """
    from manager.config import parse, read_yaml

    raw = {} if path is None else read_yaml(path)
    sections_in = raw.get("controllers") if isinstance(raw, dict) else None
    sections = dict(sections_in) if isinstance(sections_in, dict) else {}
    problems = []
    warnings = []
    for name, error in sorted(loaded.broken.items()):
        section = sections.pop(name, None)
        disabled = isinstance(section, dict) and section.get("enabled") is False
        if section is not None and not disabled:
            problems.append(f"controllers.{name}: enabled but cannot load: {error}")
        else:
            warnings.append(f"controller {name!r} is not enabled and cannot load: {error}")
    if problems:
        raise PluginLoadError("; ".join(problems))
    doc = {**raw, "controllers": sections} if isinstance(raw, dict) and sections_in else raw
    config, controllers = parse(
        doc, loaded.schemas, source=path or "<defaults>", installed=sorted(loaded.infos)
    )
    return config, controllers, warnings


def _warn(warnings: list[str]) -> None:
    """For the commands that do not configure logging: one line each on stderr."""
    for text in warnings:
        print(f"overseer: warning: {text}", file=sys.stderr)


# -- run ------------------------------------------------------------------------------


def _add_run_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="configuration file (YAML)")
    p.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)",
    )
    p.add_argument("--context", metavar="NAME", help="kubeconfig context")
    p.add_argument(
        "--leader-elect",
        dest="leader_elect",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="use Lease leader election (default: from the file, on)",
    )
    p.add_argument("--leader-election-namespace", metavar="NS", help="namespace of the Lease")
    p.add_argument(
        "--metrics-bind-address",
        metavar="ADDR",
        help='address for /metrics, e.g. ":8080"; "0" disables it',
    )
    p.add_argument(
        "--health-probe-bind-address",
        metavar="ADDR",
        help='address for /healthz and /readyz, e.g. ":8081"; "0" disables them',
    )
    p.add_argument("--log-format", choices=("text", "json"), help="log format")
    p.add_argument(
        "--log-level", choices=("debug", "info", "warning", "error"), help="lowest level logged"
    )
    p.add_argument(
        "--embedded",
        action="store_true",
        help="start a local API server in this process and run against it",
    )
    p.add_argument(
        "--demo",
        action="store_true",
        help="with --embedded: seed sample Deployments and Pods and show the result",
    )


def _override(config: Any, args: argparse.Namespace) -> Any:
    le = config.leader_election
    if args.leader_elect is not None:
        le = dataclasses.replace(le, enabled=args.leader_elect)
    if args.leader_election_namespace:
        le = dataclasses.replace(le, namespace=args.leader_election_namespace)
    log = config.log
    if args.log_format:
        log = dataclasses.replace(log, format=args.log_format)
    if args.log_level:
        log = dataclasses.replace(log, level=args.log_level)
    changes: dict[str, Any] = {"leader_election": le, "log": log}
    if args.metrics_bind_address is not None:
        changes["metrics_bind_address"] = args.metrics_bind_address
    if args.health_probe_bind_address is not None:
        changes["health_probe_bind_address"] = args.health_probe_bind_address
    return dataclasses.replace(config, **changes)


def _run(args: argparse.Namespace) -> int:
    from manager.healthz import parse_bind_address
    from manager.kube import ClientOptions, KubeClient, StopAwareSleep
    from manager.logs import configure
    from manager.manager import Manager, ManagerOptions
    from manager.plugins import PluginContext
    from manager.tracing import setup_tracing

    if args.demo and not args.embedded:
        raise ConfigError(["--demo needs --embedded"])
    loaded = _load_plugins()
    config, controllers, warnings = _read_config(args.config, loaded)
    config = _override(config, args)
    configure(config.log.level, config.log.format)
    for text in warnings:
        logger.warning("controller plugin skipped", extra={"reason": text})
    for address in (config.metrics_bind_address, config.health_probe_bind_address):
        try:
            parse_bind_address(address)
        except ValueError as exc:
            raise ConfigError([str(exc)]) from None
    provider = setup_tracing(
        config.tracing.exporter or None, service_name=config.tracing.service_name
    )

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            logger.warning("second signal: exiting at once")
            os._exit(EXIT_FAILED)
        logger.info("signal received, stopping", extra={"signal": signal.Signals(signum).name})
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    server = None
    kubeconfig = args.kubeconfig
    if args.embedded:
        from manager.testing import LocalApiServer

        server = LocalApiServer().start()
        kubeconfig = str(server.kubeconfig_path)
        print(f"embedded API server: {server.url}", flush=True)
        print(
            f"kubeconfig: {kubeconfig}  (kubectl --kubeconfig {kubeconfig} get all -A)", flush=True
        )
    try:
        options = ClientOptions(
            qps=config.client.qps, burst=config.client.burst, timeout=config.client.timeout
        )
        # After a SIGTERM, retries still honour Retry-After, within the shutdown budget.
        retry_sleep = StopAwareSleep(stop, config.graceful_shutdown_timeout)
        client = KubeClient.load(kubeconfig, args.context, options=options, retry_sleep=retry_sleep)
        le = config.leader_election
        mgr = Manager(
            client,
            ManagerOptions(
                metrics_bind_address=config.metrics_bind_address,
                health_probe_bind_address=config.health_probe_bind_address,
                leader_election=le.enabled,
                leader_election_id=le.lease_name,
                leader_election_namespace=le.namespace,
                lease_duration=le.lease_duration,
                renew_deadline=le.renew_deadline,
                retry_period=le.retry_period,
                warm_standby=config.warm_standby,
                graceful_shutdown_timeout=config.graceful_shutdown_timeout,
                cache_sync_timeout=config.cache_sync_timeout,
                namespace=config.watch_namespace or None,
            ),
        )
        enabled = []
        for name, (settings, own) in sorted(controllers.items()):
            if not settings.enabled:
                continue
            plugin_config = own
            if args.embedded and "install_crd" in {f.name for f in dataclasses.fields(own)}:
                # a fresh embedded server has no CRDs: let the plugin install its own
                plugin_config = dataclasses.replace(own, install_crd=True)
            loaded.plugins[name].setup(mgr, PluginContext(name, plugin_config, settings, mgr))
            enabled.append(name)
        logger.info("starting", extra={"version": __version__, "controllers": ",".join(enabled)})
        demo = None
        if args.demo and server is not None:
            demo = threading.Thread(target=_demo, args=(server, stop), name="demo")
            demo.start()
        try:
            rc = mgr.run(stop)
        except OSError as exc:  # a bind address in use or not permitted
            stop.set()
            if demo is not None:
                demo.join()
            raise _ListenError(f"cannot listen: {exc}") from None
        if rc != 0:
            # Lost leadership, reconciles that outlasted the graceful shutdown (the Lease
            # kept), or caches never synced: leave now, so nothing still running here can
            # write again; the Deployment restarts us clean.
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(rc)
        stop.set()
        if demo is not None:
            demo.join()
        if not mgr.join(5.0):
            # a thread stuck in a request to an unreachable server: do not hang the exit
            logger.warning("threads still running at exit; exiting anyway")
            if provider is not None:
                provider.shutdown()
            if server is not None:
                server.stop()
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(rc)
        client.close()
        return rc
    finally:
        if provider is not None:
            provider.shutdown()
        if server is not None:
            server.stop()


class _ListenError(OverseerError):
    """A metrics or probe address cannot be bound."""


# -- demo -----------------------------------------------------------------------------


def _seed_demo(server: Any) -> list[str]:
    server.create("v1", "namespaces", {"metadata": {"name": DEMO_NAMESPACE}})
    made = []
    for name, port in (("web", 8080), ("api", 9090)):
        labels = {"app": name}
        container = {
            "name": name,
            "image": f"example/{name}:1.0",
            "ports": [{"name": "http", "containerPort": port}],
        }
        server.create(
            "apps/v1",
            "deployments",
            {
                "metadata": {"name": name, "annotations": {"overseer.io/expose": "true"}},
                "spec": {
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [container]},
                    },
                },
            },
            namespace=DEMO_NAMESPACE,
        )
        made.append(f"deployment/{name}")
        for i in range(2):
            server.create(
                "v1",
                "pods",
                {
                    "metadata": {"name": f"{name}-{i}", "labels": labels},
                    "spec": {"containers": [{"name": name, "image": f"example/{name}:1.0"}]},
                },
                namespace=DEMO_NAMESPACE,
            )
            made.append(f"pod/{name}-{i}")
    return made


def _demo_table(server: Any) -> tuple[list[str], bool]:
    rest = server.rest
    lines = ["", "What the controllers made:", ""]
    done = True
    deploys = rest.list(server.resource("apps/v1", "deployments"), DEMO_NAMESPACE, _list_options())[
        "items"
    ]
    lines.append(f"  {'DEPLOYMENT':<12} {'SERVICE':<10} {'INGRESS':<10} URL")
    for d in deploys:
        name = d["metadata"]["name"]
        svc = _exists(server, "v1", "services", name)
        ing = _exists(server, "networking.k8s.io/v1", "ingresses", name)
        url = _ingress_url(server, name) if ing else "-"
        done = done and svc and ing and url != "-"
        lines.append(f"  {name:<12} {'yes' if svc else '-':<10} {'yes' if ing else '-':<10} {url}")
    lines.append("")
    lines.append(f"  {'POD':<12} {'IP':<16} {'MAC':<18} LOGICAL PORT")
    pods = rest.list(server.resource("v1", "pods"), DEMO_NAMESPACE, _list_options())["items"]
    for p in pods:
        ann = p["metadata"].get("annotations") or {}
        ip = ann.get("overseer.io/ip", "-")
        done = done and ip != "-"
        lines.append(
            f"  {p['metadata']['name']:<12} {ip:<16} {ann.get('overseer.io/mac', '-'):<18} "
            f"{ann.get('overseer.io/logical-port', '-')}"
        )
    return lines, done


def _list_options() -> Any:
    from manager.testing.rest import ListOptions

    return ListOptions()


def _ingress_url(server: Any, name: str) -> str:
    """The URL the exposer annotated on the Ingress ``name`` (the Deployment is not written)."""
    ingress = server.rest.get(
        server.resource("networking.k8s.io/v1", "ingresses"), DEMO_NAMESPACE, name
    )
    return str((ingress["metadata"].get("annotations") or {}).get("overseer.io/exposed-url", "-"))


def _exists(server: Any, api_version: str, plural: str, name: str) -> bool:
    from manager.testing.rest import StatusError

    try:
        server.rest.get(server.resource(api_version, plural), DEMO_NAMESPACE, name)
    except StatusError:
        return False
    return True


def _demo(server: Any, stop: threading.Event) -> None:
    made = _seed_demo(server)
    print(f"demo: seeded namespace {DEMO_NAMESPACE!r}: {', '.join(made)}", flush=True)
    deadline = time.monotonic() + 20
    lines, done = _demo_table(server)
    while not done and time.monotonic() < deadline and not stop.wait(0.2):
        lines, done = _demo_table(server)
    print("\n".join(lines), flush=True)
    if not done:
        print("\n(not everything converged within 20 s: see the log above)", flush=True)
    print("\nRunning; press Ctrl-C to stop.", flush=True)


# -- other commands -------------------------------------------------------------------


def _config_defaults(args: argparse.Namespace) -> int:
    from manager.config import render_defaults

    loaded = _load_plugins()
    sys.stdout.write(render_defaults(loaded.schemas))
    return EXIT_OK


def _config_validate(args: argparse.Namespace) -> int:
    loaded = _load_plugins()
    _, _, warnings = _read_config(args.file, loaded)
    _warn(warnings)
    print(f"{args.file}: valid")
    return EXIT_OK


def _plugins(args: argparse.Namespace) -> int:
    loaded = _load_plugins()
    enabled: dict[str, bool] = {}
    if args.config:
        _, controllers, warnings = _read_config(args.config, loaded)
        _warn(warnings)
        enabled = {name: s.enabled for name, (s, _) in controllers.items()}
    rows = [("NAME", "DISTRIBUTION", "VERSION", "ENABLED", "STATUS")]
    for name, info in sorted(loaded.infos.items()):
        status = "ok" if name in loaded.plugins else f"cannot load: {loaded.broken[name]}"
        on = enabled.get(name, name in loaded.plugins)
        rows.append((name, info.distribution, info.version, "yes" if on else "no", status))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(r[i].ljust(widths[i]) for i in range(4)) + "  " + r[4])
    return EXIT_OK


def _apiserver(args: argparse.Namespace) -> int:
    from manager.logs import configure
    from manager.testing import LocalApiServer

    configure("info", "text")
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
        print("press Ctrl-C to stop", flush=True)
        stop.wait()
    print("stopped")
    return EXIT_OK


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="overseer", description="A Kubernetes controller manager in Python."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = sub.add_parser(
        "run",
        help="run the controller manager",
        description="Run the controller manager until SIGTERM/SIGINT.",
    )
    _add_run_flags(run)
    run.set_defaults(func=_run)
    cfg = sub.add_parser(
        "config",
        help="print or check configuration",
        description="Print the default configuration or validate a file.",
    )
    cfg_sub = cfg.add_subparsers(dest="config_command", required=True, metavar="SUBCOMMAND")
    defaults = cfg_sub.add_parser(
        "defaults",
        help="print the full default file, commented",
        description="Print every setting with its default.",
    )
    defaults.set_defaults(func=_config_defaults)
    validate = cfg_sub.add_parser(
        "validate",
        help="check a configuration file",
        description="Check a file; every error with its path.",
    )
    validate.add_argument("file", metavar="FILE")
    validate.set_defaults(func=_config_validate)
    plugins = sub.add_parser(
        "plugins",
        help="list installed controllers",
        description="List the overseer.controllers entry points.",
    )
    plugins.add_argument("--config", metavar="FILE", help="show enabled as this file says")
    plugins.set_defaults(func=_plugins)
    version = sub.add_parser("version", help="print the version", description="Print the version.")
    version.set_defaults(func=lambda a: print(f"overseer {__version__}") or EXIT_OK)
    api = sub.add_parser(
        "apiserver",
        help="run the local Kubernetes API server",
        description="Run the local Kubernetes API server until Ctrl-C.",
    )
    api.add_argument("--port", type=int, default=0, help="port to bind (default: a free one)")
    api.add_argument(
        "--kubeconfig-out",
        metavar="PATH",
        help="write the server's kubeconfig here (default: a temporary file)",
    )
    api.add_argument("--demo", action="store_true", help="seed sample Deployments and Pods")
    api.set_defaults(func=_apiserver)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``overseer`` console script; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        rc: int = args.func(args)
        return rc
    except ConfigError as exc:
        print("overseer: invalid configuration:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  {problem}", file=sys.stderr)
        return EXIT_USAGE
    except PluginLoadError as exc:
        print(f"overseer: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OverseerError as exc:
        print(f"overseer: {exc}", file=sys.stderr)
        return EXIT_FAILED
