"""The ``overseer`` command line.

Commands:
    ``overseer run``               run the controller manager (flags override the file)
    ``overseer run --embedded``    ... against an in-process local API server; metrics and
                                   probes on 127.0.0.1, free ports, unless set
    ``overseer run --embedded --demo``  ... seeded with sample objects; prints what the
                                   controllers made
    ``overseer run --plugin F.py:Class``  ... with a controller that is not installed
                                   (repeatable; also ``module:Class``; see plugins.py)
    ``overseer config defaults``   print the full default configuration, commented
    ``overseer config validate F`` check a configuration file
    ``overseer plugins``           list the controllers: installed and ``--plugin``
    ``overseer rbac``              print the RBAC objects the enabled controllers need
    ``overseer webhooks``          print the webhook configurations (and, with
                                   ``--conversions``, the CRD conversion patches) the
                                   enabled controllers declare
    ``overseer version``           print the version (also ``overseer --version``)
    ``overseer apiserver``         run only the local API server (for kubectl, demos)

Exit codes: 0 success or graceful stop; 1 runtime failure (caches never synced, lost
leadership, an address in use); 2 bad configuration, bad flags, or a controller that
cannot load or whose ``setup`` fails.

Only the CLI configures logging handlers; library modules just log.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
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
from manager.errors import ConfigError, OverseerError, PluginLoadError, PluginSetupError

__all__ = ["main"]

logger = logging.getLogger("overseer")

DEMO_NAMESPACE = "demo"
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EMBEDDED_BIND = "127.0.0.1:0"
EXIT_SIGPIPE = 128 + int(
    signal.SIGPIPE
)  # 141: the reader of our output went away  # --embedded: loopback, a free port (unless set)
# the server a bind address belongs to -> (its setting in the file, its flag)
BIND_SETTINGS = {
    "metrics": ("metricsBindAddress", "--metrics-bind-address"),
    "probes": ("healthProbeBindAddress", "--health-probe-bind-address"),
    "webhooks": ("webhooks.host and webhooks.port", ""),
}


# -- plugins and configuration ------------------------------------------------------


def _add_plugin_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--plugin",
        metavar="[NAME=]SPEC",
        action="append",
        default=[],
        help="also load this controller, not installed: path/to/file.py:Class or "
        "module:Class (repeatable). Its section is controllers.NAME; NAME defaults to "
        "Class in lower case without a trailing 'Plugin'",
    )


def _load(args: argparse.Namespace) -> tuple[Any, Any, dict[str, Any], list[str], Any]:
    """Plugins, then the file validated against them: (plugins, config, controllers,
    warnings, raw document)."""
    from manager.config import load_config, read_yaml
    from manager.plugins import load_plugins

    plugins = load_plugins(args.plugin)
    path = getattr(args, "config", None) or getattr(args, "file", None)
    raw = {} if path is None else read_yaml(path)
    config, controllers, warnings = load_config(raw, plugins, source=path or "<defaults>")
    return plugins, config, controllers, warnings, raw


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
        help='address for /metrics, e.g. ":8080"; "0" disables it (--embedded: 127.0.0.1:0)',
    )
    p.add_argument(
        "--health-probe-bind-address",
        metavar="ADDR",
        help='address for /healthz and /readyz, e.g. ":8081"; "0" disables them '
        "(--embedded: 127.0.0.1:0)",
    )
    p.add_argument(
        "--metrics-secure",
        dest="metrics_secure",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="serve /metrics over HTTPS to callers authorized by TokenReview and "
        "SubjectAccessReview (default: metrics.secure from the file, on; --embedded: off)",
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
    p.add_argument(
        "--kubeconfig-out",
        metavar="PATH",
        help="with --embedded: write the API server's kubeconfig here (default: a temporary file)",
    )
    _add_plugin_flag(p)


def _override(config: Any, args: argparse.Namespace, raw: Any) -> Any:
    from manager.config import camel

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
    in_file = raw if isinstance(raw, dict) else {}
    metrics_in_file = in_file.get("metrics")
    if not isinstance(metrics_in_file, dict):
        metrics_in_file = {}
    if args.metrics_secure is not None:
        changes["metrics"] = dataclasses.replace(config.metrics, secure=args.metrics_secure)
    elif args.embedded and "secure" not in metrics_in_file:
        # a laptop: plain HTTP on loopback, unless the file asks for TLS and tokens
        changes["metrics"] = dataclasses.replace(config.metrics, secure=False)
    for flag, key, field in (
        (args.metrics_bind_address, "metricsBindAddress", "metrics_bind_address"),
        (args.health_probe_bind_address, "healthProbeBindAddress", "health_probe_bind_address"),
    ):
        if flag is not None:
            changes[field] = flag
        elif args.embedded and key not in in_file:
            # a laptop, not a pod: never 0.0.0.0, never a port someone else may hold
            changes[field] = EMBEDDED_BIND
    webhooks_in_file = in_file.get("webhooks")
    if not isinstance(webhooks_in_file, dict):
        webhooks_in_file = {}
    if args.embedded:
        # the same for the webhook server; and no Service to leave: no shutdown delay
        embedded = {"host": "127.0.0.1", "port": 0, "shutdown_delay": 0.0}
        changes["webhooks"] = dataclasses.replace(
            config.webhooks,
            **{k: v for k, v in embedded.items() if camel(k) not in webhooks_in_file},
        )
    return dataclasses.replace(config, **changes)


def _run(args: argparse.Namespace) -> int:
    from prometheus_client import disable_created_metrics

    from manager.client import ClientOptions, KubeClient, StopAwareSleep
    from manager.config import manager_options
    from manager.healthz import BindError
    from manager.logs import configure
    from manager.malloc import limit_arenas
    from manager.manager import Manager
    from manager.plugins import setup_plugins
    from manager.tracing import setup_tracing
    from manager.zpages import flag_values

    if args.demo and not args.embedded:
        raise ConfigError(["--demo needs --embedded"])
    # Before any thread starts: the threads share two malloc arenas (manager.malloc).
    limit_arenas()
    # No *_created series (one more per counter and histogram child): kube components'
    # /metrics (client_golang) have none. Process-wide, so set by the command, never on
    # import of the library.
    disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus_client: no hints
    if args.kubeconfig_out and not args.embedded:
        raise ConfigError(["--kubeconfig-out needs --embedded"])
    plugins, config, controllers, warnings, raw = _load(args)
    config = _override(config, args, raw)
    configure(config.log.level, config.log.format)
    for text in warnings:
        logger.warning("controller plugin skipped", extra={"reason": text})
    _check_bind_addresses(config)
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
        from apiserver import LocalApiServer

        server = LocalApiServer(
            workload_controllers=True, kubeconfig_path=args.kubeconfig_out
        ).start()
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
        flags = flag_values(config, {n: own for n, own in controllers.items()})
        mgr = Manager(client, manager_options(config, controllers), flags=flags)
        if args.embedded:
            # a fresh embedded server has no CRDs: let the plugins install their own
            controllers = {
                name: (settings, _install_crds(own))
                for name, (settings, own) in controllers.items()
            }
        try:
            enabled = setup_plugins(mgr, plugins.plugins, controllers)
        except PluginSetupError as exc:
            logger.debug("controller setup failed", exc_info=exc.__cause__)
            raise
        logger.info("starting", extra={"version": __version__, "controllers": ",".join(enabled)})
        announcer = threading.Thread(
            target=_announce,
            args=(mgr, server if args.demo else None, stop, args.embedded),
            name="announce",
        )
        announcer.start()
        threading.Thread(
            target=_freeze_after_sync, args=(mgr, stop), name="gc-freeze", daemon=True
        ).start()
        try:
            rc = mgr.run(stop)
        except BindError as exc:
            stop.set()
            announcer.join()
            key, flag = BIND_SETTINGS.get(exc.server, ("", ""))
            setting = f" (set by {key} or {flag})" if flag else f" (set by {key})" if key else ""
            raise _ListenError(f"{exc.server}: {exc.strerror}{setting}") from None
        if rc != 0:
            # Lost leadership, reconciles that outlasted the graceful shutdown (the Lease
            # kept), or caches never synced: leave now, so nothing still running here can
            # write again; the Deployment restarts us clean.
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(rc)
        stop.set()
        announcer.join()
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


def _install_crds(own: Any) -> Any:
    if dataclasses.is_dataclass(own) and "install_crd" in {f.name for f in dataclasses.fields(own)}:
        return dataclasses.replace(own, install_crd=True)  # type: ignore[type-var]
    return own


SYNC_GC_PAUSE_LIMIT = 120.0
"""Seconds ``overseer run`` holds automatic garbage collection back while its caches
have not synced (see :func:`_freeze_after_sync`)."""


def _freeze_after_sync(
    mgr: Any, stop: threading.Event, *, pause_limit: float = SYNC_GC_PAUSE_LIMIT
) -> None:
    """Automatic garbage collection waits until the caches have synced, then every object
    alive (the modules, the plugins, the first lists' objects) is moved out of the
    collector's way (``gc.freeze``), and collection resumes.

    Why wait: the first lists build the whole cache, a million tracked objects for 10,000
    Pods (read-only cached objects are ``dict`` and ``list`` subclasses, tracked even when
    they hold only strings), and while it grows CPython runs a full collection each time
    it has grown by a quarter: some twenty scans of a growing heap that find nothing (the
    objects are trees, freed by reference counting), most of a large sync's CPU. After
    the sync, full collections would scan every cached object, and one stops every thread
    for tens of milliseconds (the latency tail): frozen objects are still freed by
    reference counting when the cache lets go of them; only a reference cycle among them
    would never be. Collection resumes after ``pause_limit`` seconds even if the caches
    have not synced (a list refused, a server away: garbage cycles must not pile up), and
    when the manager stops. Once per process, in ``overseer run`` only (not in a test
    process that runs managers)."""
    gc.disable()
    deadline = time.monotonic() + pause_limit
    try:
        while not stop.wait(0.1):
            informers = mgr.factory.informers()
            if informers and all(i.has_synced() for i in informers):
                gc.collect()
                gc.freeze()
                gc.enable()
                logger.info(
                    "caches synced; the objects alive now are left out of garbage collection "
                    "scans (gc.freeze), to keep collection pauses short",
                    extra={"gc_frozen_objects": gc.get_freeze_count()},
                )
                return
            if not gc.isenabled() and time.monotonic() >= deadline:
                gc.enable()
                logger.warning(
                    "caches not synced yet: garbage collection resumes (the objects alive "
                    "will be frozen once they have synced)",
                    extra={"waited_seconds": pause_limit},
                )
    finally:
        gc.enable()


def _announce(mgr: Any, demo_server: Any, stop: threading.Event, embedded: bool) -> None:
    """Once the manager listens: where (with --embedded), then the demo (with --demo).
    A manager that cannot bind its addresses sets ``stop``: nothing is printed."""

    def listening() -> list[str]:
        lines = []
        for what, address, option, paths in (
            ("metrics", mgr.metrics_address, mgr.options.metrics_bind_address, "/metrics"),
            (
                "probes",
                mgr.health_probe_address,
                mgr.options.health_probe_bind_address,
                "/healthz, /readyz",
            ),
        ):
            if option in ("0", ""):
                continue
            if address is None:
                return []
            host, port = address
            scheme = mgr.metrics_scheme if what == "metrics" else "http"
            lines.append(f"{what}: {scheme}://{host}:{port}{paths}")
        if mgr.webhooks.has_routes:
            if mgr.webhooks.url is None:
                return []
            lines.append(f"webhooks: {mgr.webhooks.url} {', '.join(mgr.webhooks.paths)}")
        return lines or ["(metrics and probes are off)"]

    lines = listening()
    while not lines and not stop.wait(0.02):
        lines = listening()
    if stop.is_set():
        return
    if embedded:
        print("\n".join(lines), flush=True)
    if demo_server is not None:
        _demo(demo_server, stop)


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
    pods = rest.list(server.resource("v1", "pods"), DEMO_NAMESPACE, _list_options())["items"]
    # the embedded workload controllers name pods <deployment>-<hash>-<suffix>
    width = max([12, *(len(p["metadata"]["name"]) for p in pods)])
    lines.append(f"  {'POD':<{width}} {'IP':<16} {'MAC':<18} LOGICAL PORT")
    for p in pods:
        ann = p["metadata"].get("annotations") or {}
        ip = ann.get("overseer.io/ip", "-")
        done = done and ip != "-"
        lines.append(
            f"  {p['metadata']['name']:<{width}} {ip:<16} {ann.get('overseer.io/mac', '-'):<18} "
            f"{ann.get('overseer.io/logical-port', '-')}"
        )
    return lines, done


def _list_options() -> Any:
    from apiserver.machinery.rest import ListOptions

    return ListOptions()


def _ingress_url(server: Any, name: str) -> str:
    """The URL the exposer annotated on the Ingress ``name`` (the Deployment is not written)."""
    ingress = server.rest.get(
        server.resource("networking.k8s.io/v1", "ingresses"), DEMO_NAMESPACE, name
    )
    return str((ingress["metadata"].get("annotations") or {}).get("overseer.io/exposed-url", "-"))


def _exists(server: Any, api_version: str, plural: str, name: str) -> bool:
    from apiserver.api.errors import StatusError

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
    from manager.plugins import load_plugins

    plugins = load_plugins(args.plugin)
    _warn(
        [
            f"controller {name!r} cannot load, its section is missing: {error.reason}"
            for name, error in sorted(plugins.broken.items())
        ]
    )
    sys.stdout.write(render_defaults(plugins.schemas))
    return EXIT_OK


def _config_validate(args: argparse.Namespace) -> int:
    """Every check ``overseer run`` makes before it connects: the file against the
    plugins' schemas, the bind addresses, the manager's options, and each enabled
    controller's ``setup`` (its wiring: a shard key its primary resource cannot have, a
    setting its own code refuses), run against a manager whose client never connects."""
    plugins, config, controllers, warnings, _ = _load(args)
    _warn(warnings)
    _check_bind_addresses(config)
    _check_setup(plugins, config, controllers)
    print(f"{args.file}: valid")
    return EXIT_OK


def _check_bind_addresses(config: Any) -> None:
    """The metrics and probe addresses ``overseer run`` would listen on.

    Raises:
        ConfigError: one names a setting that is no address.
    """
    from manager.healthz import parse_bind_address

    problems = []
    for which, address in (
        ("metrics", config.metrics_bind_address),
        ("probes", config.health_probe_bind_address),
    ):
        try:
            parse_bind_address(address)
        except ValueError as exc:
            key, flag = BIND_SETTINGS[which]
            problems.append(f"{key} ({flag}): {exc}")
    if problems:
        raise ConfigError(problems)


def _check_setup(plugins: Any, config: Any, controllers: dict[str, Any]) -> None:
    """Build the manager ``overseer run`` would build and set every enabled controller
    up on it, without starting anything or connecting (a setup that tries to reach the
    API server fails at once, saying so, instead of validating against a cluster).

    Raises:
        ConfigError: the manager's options refuse the configuration.
        PluginSetupError: a controller's setup refused it.
    """
    from manager.webhook.manifests import declared_webhooks

    declared_webhooks(plugins.plugins, config, controllers)


def _plugins(args: argparse.Namespace) -> int:
    from manager.config import read_yaml
    from manager.plugins import load_plugins

    plugins = load_plugins(args.plugin)
    raw = read_yaml(args.config) if args.config else {}
    sections = (raw.get("controllers") if isinstance(raw, dict) else None) or {}
    rows = [("NAME", "DISTRIBUTION", "VERSION", "ENABLED", "STATUS")]
    for name, info in plugins.infos.items():
        error = plugins.broken.get(name)
        section = sections.get(name) if isinstance(sections, dict) else None
        # an installed controller runs unless disabled (a broken one fails the start)
        on = not (isinstance(section, dict) and section.get("enabled") is False)
        status = "ok" if error is None else f"broken: {error.reason}"
        rows.append((name, info.distribution, info.version, "yes" if on else "no", status))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(r[i].ljust(widths[i]) for i in range(4)) + "  " + r[4])
    return EXIT_OK


def _rbac(args: argparse.Namespace) -> int:
    from manager.rbac import for_controllers
    from manager.webhook.manifests import declared_webhooks

    plugins, config, controllers, warnings, _ = _load(args)
    _warn(warnings)
    webhooks = None
    if config.webhooks.certificates == "managed":
        # what the leader writes the caBundle into depends on what is declared
        webhooks = declared_webhooks(plugins.plugins, config, controllers)
    text, silent = for_controllers(
        plugins.plugins,
        config,
        controllers,
        name=args.name,
        namespace=args.namespace,
        webhooks=webhooks,
    )
    _warn(
        [
            f"controller {name!r} declares no rbac_rules: what it needs is missing here"
            for name in silent
        ]
    )
    sys.stdout.write(text)
    return EXIT_OK


def _webhooks(args: argparse.Namespace) -> int:
    import textwrap

    import yaml

    from manager.webhook import Conversion
    from manager.webhook.manifests import (
        WebhookManifests,
        configurations,
        conversion_patches,
        declared_webhooks,
    )

    plugins, config, controllers, warnings, _ = _load(args)
    _warn(warnings)
    wh = config.webhooks
    managed = wh.certificates == "managed"
    if managed and args.inject_ca_from:
        raise ConfigError(
            ["--inject-ca-from: the leader fills caBundle (webhooks.certificates: managed)"]
        )
    if args.inject_ca_from and args.inject_ca_from.count("/") != 1:
        raise ConfigError(["--inject-ca-from: expected NAMESPACE/CERTIFICATE"])
    namespace = (
        args.namespace or wh.namespace or config.leader_election.namespace or "overseer-system"
    )
    options = WebhookManifests(
        name=wh.configuration_name,
        namespace=namespace,
        service=wh.service,
        managed=managed,
        inject_ca_from=args.inject_ca_from or "",
    )
    declared = declared_webhooks(plugins.plugins, config, controllers)
    owners = sorted({owner for _, owner in declared})
    if managed:
        ca = "caBundle: filled in by the leader (webhooks.certificates: managed)."
    elif args.inject_ca_from:
        ca = f"caBundle: filled in by cert-manager's CA injector from {args.inject_ca_from}."
    else:
        ca = (
            "caBundle: not set: give the CA of webhooks.certDir's certificate (or use "
            "--inject-ca-from with cert-manager, or webhooks.certificates: managed)."
        )
    docs = (conversion_patches if args.conversions else configurations)(declared, options)
    what = "CRD conversion patches (kubectl patch crd NAME --type merge --patch-file F)"
    if not args.conversions:
        what = "webhook configurations"
    header = (
        f"The {what} of Overseer with the controllers {', '.join(owners) or 'none'}. "
        "Generated by `overseer webhooks` from what each controller declares; the Service "
        f"{wh.service} in {namespace}, port {options.port}. {ca}"
    )
    lines = [f"# {line}" for line in textwrap.wrap(header, width=86)]
    text = "\n".join(lines) + "\n"
    for doc in docs:
        text += "---\n" + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)
    conversions = [h for h, _ in declared if isinstance(h, Conversion)]
    if conversions and not args.conversions:
        text += (
            f"# {len(conversions)} CRD(s) convert through the webhook: `overseer webhooks "
            "--conversions` prints their patches.\n"
        )
    if not docs:
        _warn([f"no enabled controller declares {what}"])
    sys.stdout.write(text)
    return EXIT_OK


def _apiserver(args: argparse.Namespace) -> int:
    from apiserver import LocalApiServer
    from manager.logs import configure

    configure("info", "text")
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    from apiserver import parse_feature_gates

    try:
        gates = parse_feature_gates(args.feature_gates or "")
    except ValueError as exc:
        print(f"overseer apiserver: --feature-gates: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from apiserver.http.gcpause import freeze_after_full_collections

    freeze_after_full_collections()
    server_ = LocalApiServer(
        port=args.port,
        kubeconfig_path=args.kubeconfig_out,
        feature_gates=gates,
        workload_controllers=True,
    )
    with server_ as server:
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
    parser.add_argument("--version", action="version", version=f"overseer {__version__}")
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
    _add_plugin_flag(defaults)
    defaults.set_defaults(func=_config_defaults)
    validate = cfg_sub.add_parser(
        "validate",
        help="check a configuration file",
        description="Check a file; every error with its path.",
    )
    validate.add_argument("file", metavar="FILE")
    _add_plugin_flag(validate)
    validate.set_defaults(func=_config_validate)
    plugins = sub.add_parser(
        "plugins",
        help="list the controllers",
        description="List the controllers: the overseer.controllers entry points and "
        "every --plugin; a broken one with why.",
    )
    plugins.add_argument("--config", metavar="FILE", help="show enabled as this file says")
    _add_plugin_flag(plugins)
    plugins.set_defaults(func=_plugins)
    rbac = sub.add_parser(
        "rbac",
        help="print the RBAC objects the enabled controllers need",
        description="Print the ClusterRole of the enabled controllers (from the rules "
        "each declares) and the manager's own Role, with their bindings, as YAML for "
        "kubectl or kustomize.",
    )
    rbac.add_argument("--config", metavar="FILE", help="configuration file (YAML)")
    rbac.add_argument(
        "--namespace",
        metavar="NS",
        help="namespace of the ServiceAccount and the Lease "
        "(default: leaderElection.namespace, else overseer-system)",
    )
    rbac.add_argument(
        "--name", metavar="NAME", default="overseer", help="name of the roles and ServiceAccount"
    )
    _add_plugin_flag(rbac)
    rbac.set_defaults(func=_rbac)
    hooks = sub.add_parser(
        "webhooks",
        help="print the webhook configurations the enabled controllers declare",
        description="Print the ValidatingWebhookConfiguration and "
        "MutatingWebhookConfiguration (webhooks.configurationName) of the admission "
        "webhooks the enabled controllers declare, calling the Service webhooks.service on "
        "port 443, as YAML for kubectl or kustomize; with --conversions, the merge patches "
        "that make their CRDs convert through the webhook instead.",
    )
    hooks.add_argument("--config", metavar="FILE", help="configuration file (YAML)")
    hooks.add_argument(
        "--namespace",
        metavar="NS",
        help="the Service's namespace (default: webhooks.namespace, else "
        "leaderElection.namespace, else overseer-system)",
    )
    hooks.add_argument(
        "--inject-ca-from",
        metavar="NS/CERT",
        help="annotate for cert-manager's CA injector (cert-manager.io/inject-ca-from): the "
        "Certificate whose Secret webhooks.certDir mounts",
    )
    hooks.add_argument(
        "--conversions",
        action="store_true",
        help="print the CRD conversion patches instead of the configurations",
    )
    _add_plugin_flag(hooks)
    hooks.set_defaults(func=_webhooks)
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
    api.add_argument(
        "--feature-gates",
        metavar="GATES",
        default="",
        help="kube-apiserver's syntax, Name=true,Other=false; known: ShardedListAndWatch "
        "(default false: shardSelector on list and watch)",
    )
    api.set_defaults(func=_apiserver)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``overseer`` console script; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        rc: int = args.func(args)
        sys.stdout.flush()
        return rc
    except BrokenPipeError:
        # the reader went away (`overseer plugins | head -1`): not our error; what is
        # left to flush goes nowhere, and the exit code is a SIGPIPE'd command's
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return EXIT_SIGPIPE
    except ConfigError as exc:
        print("overseer: invalid configuration:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  {problem}", file=sys.stderr)
        return EXIT_USAGE
    except PluginSetupError as exc:
        print(f"overseer: {exc}", file=sys.stderr)
        print("  (--log-level debug shows the traceback)", file=sys.stderr)
        return EXIT_USAGE
    except PluginLoadError as exc:
        print(f"overseer: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OverseerError as exc:
        print(f"overseer: {exc}", file=sys.stderr)
        return EXIT_FAILED
