"""z-pages: ``/statusz`` and ``/flagz``, as Kubernetes components serve them (KEP-4827
statusz, KEP-4828 flagz; ``k8s.io/component-base/zpages``).

* ``/statusz``: what this replica is and does now — version, start time and uptime, its
  identity, its role (leader, standby, ring member), who leads, the shard ring and the
  keys it owns, the clusters of its fleet (each one's state: connecting, ready,
  unreachable, ...), and every controller with its workers, queue depth and last error. Plain
  text by default (``text/plain``, like kube's); an HTML view of the same for people,
  chosen by ``?format=html`` or by an ``Accept`` header that prefers ``text/html`` (a
  browser's). The HTML page is static: no script, and a Content-Security-Policy that
  allows none.
* ``/flagz``: the effective configuration, one ``key=value`` per line (keys are the
  configuration file's dotted camelCase paths), after command-line flags were applied.
  Values of settings that hold secrets are shown as ``[REDACTED]``: a field whose
  metadata says ``secret=True``, or whose name says so (password, token, secret,
  credential, private key, api key) unless its metadata says ``secret=False``.

Both start with kube's warning that they are not meant to be machine parseable. They are
served next to ``/metrics`` (and guarded like it when metrics are secure: the
SubjectAccessReview names the path, ``/statusz`` or ``/flagz``).

Thread-safe: pure functions over snapshots; the routes call their source per request.
"""

from __future__ import annotations

import dataclasses
import html
import json
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from manager.sharding import RingStatus

__all__ = [
    "REDACTED",
    "WARNING",
    "ClusterStatus",
    "ControllerStatus",
    "Status",
    "flag_values",
    "flagz_route",
    "render_flagz",
    "render_statusz_html",
    "render_statusz_text",
    "statusz_route",
]

WARNING: Final = (
    "Warning: This endpoint is not meant to be machine parseable, has no formatting "
    "compatibility guarantees and is for debugging purposes only."
)
REDACTED: Final = "[REDACTED]"
_SECRET_NAME = re.compile(
    r"password|passwd|secret|token|credential|private_?key|api_?key", re.IGNORECASE
)
# What names or locates a secret is not one: a Secret's name, a token file's path.
_REFERENCE = re.compile(r"(name|namespace|ref|path|file|dir)$", re.IGNORECASE)
# A map key printed as a path segment (``a.b``); any other is quoted (``a["b.c"]``).
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")
_TEXT = "text/plain; charset=utf-8"
_HTML = "text/html; charset=utf-8"
# The HTML view runs no script and loads nothing: only its own inline style.
HTML_HEADERS: Final = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "X-Content-Type-Options": "nosniff",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class ControllerStatus:
    """One controller on ``/statusz``."""

    name: str
    mode: str  # "leader-elected", "no-election" (election off), "sharded", "every replica"
    running: bool  # its workers run in this replica now
    workers: int  # configured worker threads
    active: int  # reconciles running now
    queue_depth: int | None  # requests waiting (None: not started here)
    last_error: str = ""  # "namespace/name: Type: message" of the last failed reconcile
    last_error_time: float | None = None  # wall-clock seconds of that failure


@dataclass(frozen=True, kw_only=True, slots=True)
class ClusterStatus:
    """One cluster of the fleet on ``/statusz``."""

    name: str
    provider: str  # the provider that reported it ("kubeconfigs", "secrets", "home", ...)
    server: str  # its API server's URL, "(home)" for the manager's own cluster
    state: str  # connecting, ready, leaving, unreachable, failed, not engaged, stopped
    since: float | None  # wall-clock seconds it has been in that state since
    reason: str = ""  # why it is not ready ("" when it is)


@dataclass(frozen=True, kw_only=True, slots=True)
class Status:
    """A snapshot of one replica for ``/statusz``."""

    component: str  # "overseer"
    version: str  # Overseer's version
    python: str  # the interpreter's version
    identity: str  # this replica's identity (leader election, shard Lease holder)
    started: float  # wall-clock seconds when the manager started
    uptime: float  # seconds since then (monotonic)
    role: str  # "leader", "standby", "leader (no election)", "stopping", "lost its Lease"
    leader: str  # the Lease holder this replica last saw ("" unknown or none)
    lease: str  # "namespace/name" of the leader Lease ("" without leader election)
    ring: RingStatus | None  # the shard ring (None without sharded controllers)
    controllers: tuple[ControllerStatus, ...]
    clusters: tuple[ClusterStatus, ...] = ()  # the fleet's clusters (none without a fleet)


# -- /statusz ---------------------------------------------------------------------------


def _uptime(seconds: float) -> str:
    s = int(max(seconds, 0))
    return f"{s // 3600} hr {s % 3600 // 60:02d} min {s % 60:02d} sec"


def _when(wall: float) -> str:
    # kube's layout: Mon Jan  2 15:04:05 UTC 2006
    return time.strftime("%a %b %e %H:%M:%S UTC %Y", time.gmtime(wall))


def _fields(status: Status) -> list[tuple[str, str]]:
    fields = [
        ("Started", _when(status.started)),
        ("Up", _uptime(status.uptime)),
        ("Python version", status.python),
        ("Binary version", status.version),
        ("Identity", status.identity),
        ("Role", status.role),
    ]
    if status.lease:
        fields.append(("Leader", status.leader or "(none seen)"))
        fields.append(("Lease", status.lease))
    return fields


def _ring_fields(ring: RingStatus) -> list[tuple[str, str]]:
    return [
        ("Ring", ring.ring),
        ("Shard Lease", ring.lease),
        ("Member", "yes" if ring.member else "no"),
        ("Ring version", ring.version or "(none applied)"),
        ("Members", ", ".join(ring.members) or "(none)"),
        ("Keys owned", str(ring.keys_owned)),
    ]


_COLUMNS = ("NAME", "MODE", "RUNNING", "WORKERS", "ACTIVE", "QUEUE", "LAST ERROR")


def _rows(status: Status) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for c in status.controllers:
        error = "-"
        if c.last_error:
            at = "" if c.last_error_time is None else f" (at {_when(c.last_error_time)})"
            error = c.last_error + at
        rows.append(
            (
                c.name,
                c.mode,
                "yes" if c.running else "no",
                str(c.workers),
                str(c.active),
                "-" if c.queue_depth is None else str(c.queue_depth),
                error,
            )
        )
    return rows


_CLUSTER_COLUMNS = ("NAME", "PROVIDER", "SERVER", "STATE", "SINCE", "REASON")


def _cluster_rows(status: Status) -> list[tuple[str, ...]]:
    return [
        (
            c.name,
            c.provider or "-",
            c.server,
            c.state,
            "-" if c.since is None else _when(c.since),
            c.reason or "-",
        )
        for c in status.clusters
    ]


def _table(columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    """Aligned columns, the last one as long as it is."""
    rows = [columns, *rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(columns) - 1)]
    return [
        "  "
        + "  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]).rstrip()
        for row in rows
    ]


def render_statusz_text(status: Status) -> str:
    """The text page: a header, ``Field: value`` lines, the ring, the fleet's clusters, a
    controller table."""
    lines = [f"{status.component} statusz", WARNING, ""]
    lines += [f"{k}: {v}" for k, v in _fields(status)]
    if status.ring is not None:
        lines += ["", "Shard ring:"] + [f"  {k}: {v}" for k, v in _ring_fields(status.ring)]
    if status.clusters:
        lines += ["", "Clusters:", *_table(_CLUSTER_COLUMNS, _cluster_rows(status))]
    lines += ["", "Controllers:"]
    rows = _rows(status)
    if not rows:
        lines.append("  (none)")
    else:
        lines += _table(_COLUMNS, rows)
    return "\n".join(lines) + "\n"


_STYLE = (
    "body{font-family:sans-serif;margin:2em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em}"
    "th,td{border:1px solid #bbb;padding:.3em .7em;text-align:left;vertical-align:top}"
    "th{background:#eee}.warning{color:#666;font-size:.9em}"
    "td.error{color:#a00}.role{font-weight:bold}"
)


def _dl(fields: Iterable[tuple[str, str]], id_prefix: str) -> list[str]:
    out = ["<table>"]
    for key, value in fields:
        slug = id_prefix + re.sub(r"[^a-z0-9]+", "-", key.lower()).strip("-")
        out.append(f'<tr><th>{html.escape(key)}</th><td id="{slug}">{html.escape(value)}</td></tr>')
    out.append("</table>")
    return out


def render_statusz_html(status: Status) -> str:
    """The same as :func:`render_statusz_text`, as a static HTML page (ids on the values,
    ``data-controller`` on the controller rows, for tests and scrapers of last resort)."""
    title = html.escape(f"{status.component} statusz")
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{title}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{title}</h1>",
        f'<p class="warning">{html.escape(WARNING)}</p>',
        *_dl(_fields(status), ""),
    ]
    if status.ring is not None:
        out += ["<h2>Shard ring</h2>", *_dl(_ring_fields(status.ring), "ring-")]
    if status.clusters:
        out += ["<h2>Clusters</h2>", '<table id="clusters"><tr>']
        out += [f"<th>{html.escape(c.title())}</th>" for c in _CLUSTER_COLUMNS]
        out.append("</tr>")
        for row in _cluster_rows(status):
            tds = "".join(f"<td>{html.escape(cell)}</td>" for cell in row)
            out.append(f'<tr data-cluster="{html.escape(row[0])}">{tds}</tr>')
        out.append("</table>")
    out.append("<h2>Controllers</h2>")
    rows = _rows(status)
    if not rows:
        out.append('<p id="no-controllers">No controllers.</p>')
    else:
        out.append('<table id="controllers"><tr>')
        out += [f"<th>{html.escape(c.title())}</th>" for c in _COLUMNS]
        out.append("</tr>")
        for row in rows:
            cells = [f"<td>{html.escape(cell)}</td>" for cell in row[:-1]]
            error_class = ' class="error"' if row[-1] != "-" else ""
            cells.append(f"<td{error_class}>{html.escape(row[-1])}</td>")
            out.append(f'<tr data-controller="{html.escape(row[0])}">{"".join(cells)}</tr>')
        out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _wants_html(query: str, accept: str) -> bool:
    params = dict(p.partition("=")[::2] for p in query.split("&") if p)
    if "format" in params:
        return params["format"] == "html"
    # The first of text/html and text/plain that the Accept header lists, by q-value
    # then order: a browser asks for text/html first, curl for */*.
    best: tuple[float, int, str] | None = None
    for i, part in enumerate(accept.split(",")):
        media, *opts = (x.strip() for x in part.split(";"))
        if media not in ("text/html", "text/plain"):
            continue
        q = 1.0
        for opt in opts:
            name, _, value = opt.partition("=")
            if name.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if q > 0 and (best is None or (q, -i) > (best[0], best[1])):
            best = (q, -i, media)
    return best is not None and best[2] == "text/html"


def statusz_route(
    source: Callable[[], Status],
) -> Callable[[str, str], tuple[int, str, bytes, Mapping[str, str]]]:
    """``/statusz``: ``(query, accept header) -> (status, content type, body, headers)``."""

    def answer(query: str, accept: str) -> tuple[int, str, bytes, Mapping[str, str]]:
        status = source()
        if _wants_html(query, accept):
            return 200, _HTML, render_statusz_html(status).encode(), HTML_HEADERS
        return 200, _TEXT, render_statusz_text(status).encode(), {}

    return answer


# -- /flagz -----------------------------------------------------------------------------


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return json.dumps(value, sort_keys=True, default=str)


def _is_secret(name: str, meta: Mapping[str, Any]) -> bool:
    if "secret" in meta:  # said explicitly either way (``clusters.secrets`` holds none)
        return bool(meta["secret"])
    return bool(_SECRET_NAME.search(name)) and not _REFERENCE.search(name.replace("_", ""))


def _key(prefix: str, key: str) -> str:
    """``prefix.key``, or ``prefix["key"]`` for a key that is no plain word (a dot in
    it would read as one more level)."""
    if _PLAIN_KEY.fullmatch(key):
        return f"{prefix}.{key}" if prefix else key
    return f"{prefix}[{json.dumps(key)}]"


def _walk(prefix: str, value: Any, out: list[tuple[str, str]], secret: bool) -> None:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            key = f"{prefix}.{_camel(f.name)}" if prefix else _camel(f.name)
            _walk(key, getattr(value, f.name), out, secret or _is_secret(f.name, f.metadata))
        return
    if isinstance(value, Mapping):
        if not value:
            out.append((prefix, REDACTED if secret else "{}"))
        for k, v in value.items():
            _walk(_key(prefix, str(k)), v, out, secret or _is_secret(str(k), {}))
        return
    if isinstance(value, list | tuple):
        plain = [
            dataclasses.asdict(v) if dataclasses.is_dataclass(v) and not isinstance(v, type) else v
            for v in value
        ]
        out.append((prefix, REDACTED if secret else _scalar(plain)))
        return
    out.append((prefix, REDACTED if secret else _scalar(value)))


def flag_values(
    settings: Any, sections: Mapping[str, Sequence[Any]] | None = None
) -> list[tuple[str, str]]:
    """The effective configuration as ``(dotted key, value)`` pairs, secrets redacted.

    Args:
        settings: the manager's settings (a dataclass: :class:`~manager.config.
            OverseerConfig`, or :class:`~manager.manager.ManagerOptions`); its
            ``controllers`` field (raw sections) is left out when ``sections`` is given.
        sections: controller name → the dataclasses of its section (the common settings
            and the plugin's own), rendered under ``controllers.<name>``.
    """
    out: list[tuple[str, str]] = []
    if dataclasses.is_dataclass(settings) and not isinstance(settings, type):
        for f in dataclasses.fields(settings):
            if f.name == "controllers" and sections is not None:
                continue
            _walk(_camel(f.name), getattr(settings, f.name), out, _is_secret(f.name, f.metadata))
    for name, parts in sorted((sections or {}).items()):
        for part in parts:
            _walk(f"controllers.{name}", part, out, False)
    return sorted(out)


def render_flagz(component: str, values: Iterable[tuple[str, str]]) -> str:
    """The text page: a header, then ``key=value`` lines."""
    lines = [f"{component} flagz", WARNING, ""]
    lines += [f"{key}={value}" for key, value in values]
    return "\n".join(lines) + "\n"


def flagz_route(
    component: str, values: Sequence[tuple[str, str]]
) -> Callable[[str, str | None], tuple[int, str, bytes]]:
    """``/flagz``: the effective configuration (fixed once the manager is built)."""
    body = render_flagz(component, values).encode()

    def answer(query: str, sub: str | None) -> tuple[int, str, bytes]:
        return 200, _TEXT, body

    return answer
