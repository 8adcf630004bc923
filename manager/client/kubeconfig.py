"""Where an API server is and how to authenticate to it: kubeconfig and in-cluster loading.

The concept is client-go's ``clientcmd`` (a kubeconfig's context → cluster + user) and
``rest.InClusterConfig`` (the pod's service account), reduced to what a controller needs,
producing one frozen :class:`ClusterConfig` that :class:`~manager.client.KubeClient` turns
into a urllib3 connection pool (:func:`pool_manager`).

Why not the ``kubernetes`` package's loader: importing it imports every generated model
and API class of the official client (about 20 MiB of a replica's RSS, more than a third
of its baseline, for a client that never builds a model). It is still used, imported
lazily, for the one thing not written here: legacy ``auth-provider`` users (gcp, azure,
oidc), whose kubeconfigs keep working exactly as before.

What a kubeconfig may say, and what happens:

* Several files (``$KUBECONFIG``'s list) are merged as client-go's
  ``ClientConfigLoadingRules.Load`` merges them (``loader.go``): in order, a missing file
  skipped (but one must exist), an unreadable or invalid one an error; of ``clusters``,
  ``users`` and ``contexts``, the first file that defines a name gives that entry whole;
  ``current-context`` is the first one set. One file given explicitly (``--kubeconfig``)
  must exist and is read alone.
* ``current-context`` (or the ``context`` argument) selects the context, whose ``cluster``
  and ``user`` must exist; the context's ``namespace`` is kept (default ``default``).
* Relative paths (``certificate-authority``, ``client-certificate``, ``client-key``,
  ``tokenFile``, an ``exec`` command with a ``/``) are relative to the directory of the
  file that defined the cluster or user, as client-go's ``ResolveLocalPaths`` has them.
* cluster: ``server``; ``certificate-authority-data`` (base64 PEM) or
  ``certificate-authority`` (a file), else the system's trusted roots;
  ``insecure-skip-tls-verify``; ``tls-server-name`` (SNI and the name the certificate is
  checked against); ``proxy-url`` (http, https or socks5; without it ``HTTPS_PROXY`` /
  ``HTTP_PROXY`` / ``NO_PROXY`` apply, and, as in Go, loopback and ``localhost`` are never
  proxied).
* user, first that applies: ``auth-provider`` (the ``kubernetes`` package's loader);
  ``token``; ``tokenFile`` (re-read at most once a minute, so a rotated token is picked
  up, as client-go's cached file token source does); ``exec`` (a credential plugin,
  ``client.authentication.k8s.io/v1`` or ``v1beta1``: its token is cached until its
  ``expirationTimestamp``, then the plugin runs again; a client certificate it returns is
  used for the connections made from then on); ``username``/``password`` (basic auth).
  Client certificates: ``client-certificate-data``/``client-key-data`` or the file forms.
* user impersonation (client-go's ``ImpersonationConfig``): ``as``, ``as-uid``,
  ``as-groups``, ``as-user-extra`` become every request's ``Impersonate-User``,
  ``Impersonate-Uid``, one ``Impersonate-Group`` per group and one
  ``Impersonate-Extra-<key>`` per value (the key percent-encoded as client-go's
  ``transport/round_trippers.go`` does); a uid, groups or extra without ``as`` is an
  error, as in client-go. Through the ``kubernetes`` package too (which does not read
  them: they are added here).
* ``OVERSEER_KUBECONFIG_LOADER=kubernetes`` in the environment sends every kubeconfig
  through the ``kubernetes`` package's loader instead (for a kubeconfig feature not read
  here; the process then pays the package's import). Several files go to its
  ``KubeConfigMerger``, which merges them the same way.
* Files are read when the configuration is loaded, so a missing or unreadable one is a
  :class:`~manager.errors.ConfigError` naming it, not a failure at the first request; a
  problem of an entry names the file that defined it.
  A client key never touches the disk beyond the kubeconfig itself: key and certificate
  are loaded into the TLS context through a file that exists only while it loads.

Thread-safety: a :class:`ClusterConfig` is immutable; its :class:`Credentials` are shared
by every request of a client and are thread-safe (a refresh happens once, under a lock).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
import importlib
import ipaddress
import json
import logging
import os
import re
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Protocol
from urllib.parse import urlsplit
from urllib.request import getproxies

import urllib3
import yaml
from urllib3.util.ssl_ import create_urllib3_context

from manager.errors import ConfigError

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_DIR: Final = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_FILE_REREAD_SECONDS: Final = 60.0
EXEC_API_VERSIONS: Final = (
    "client.authentication.k8s.io/v1",
    "client.authentication.k8s.io/v1beta1",
)
EXEC_TIMEOUT_SECONDS: Final = 60.0
# OVERSEER_KUBECONFIG_LOADER=kubernetes: every kubeconfig through the kubernetes package
# (an escape hatch for a kubeconfig feature this loader does not read; costs ~20 MiB).
LOADER_ENV: Final = "OVERSEER_KUBECONFIG_LOADER"
# A token this close to its expiry is refreshed before it is sent.
EXPIRY_MARGIN_SECONDS: Final = 10.0


class Credentials(Protocol):
    """What authenticates each request: the ``Authorization`` header's value.

    Credentials that can be fetched again may also have ``rejected(authorization)``,
    which the client calls when the server answered 401 to a request carrying it.
    """

    def authorization(self) -> str | None:
        """The header value (``Bearer ...``, ``Basic ...``) for the next request, or None.

        Raises:
            ConfigError: the credentials could not be obtained (a token file gone, an
                exec plugin failing).
        """
        ...


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """One API server and how to reach it: what a kubeconfig context or a pod's service
    account says. Build it with :func:`load_kubeconfig` or :func:`load_in_cluster`.

    Certificates are PEM bytes (files were read when the configuration was loaded).
    ``proxy_url`` is the proxy in effect (the cluster's ``proxy-url``, else the
    environment's unless ``NO_PROXY`` or loopback exempts the server). ``source`` says
    where the configuration came from, for messages. ``impersonation``: whom every
    request acts as (None: the authenticated user itself).
    """

    server: str
    ca_pem: bytes | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    client_cert_pem: bytes | None = None
    client_key_pem: bytes | None = field(default=None, repr=False)
    proxy_url: str | None = None
    credentials: Credentials | None = field(default=None, compare=False, repr=False)
    namespace: str = "default"
    source: str = ""
    impersonation: Impersonation | None = None

    def __post_init__(self) -> None:
        parts = urlsplit(self.server)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            where = f"{self.source}: " if self.source else ""
            raise ConfigError([f"{where}server {self.server!r} is not an http(s) URL"])
        if (self.client_cert_pem is None) != (self.client_key_pem is None):
            where = f"{self.source}: " if self.source else ""
            raise ConfigError(
                [f"{where}a client certificate needs its key, and a key its certificate"]
            )


@dataclass(frozen=True, kw_only=True, slots=True)
class Impersonation:
    """Whom the requests act as: client-go's ``rest.ImpersonationConfig``, from a
    kubeconfig user's ``as``, ``as-uid``, ``as-groups`` and ``as-user-extra``. The API
    server authenticates the client as usual, checks that it may ``impersonate`` each of
    these, then handles the request as this user. Not a secret.

    Raises:
        ConfigError: no user (uid, groups or extra cannot be impersonated without one,
            as client-go and the API server refuse it), or a value that cannot be a
            header value (a control character).
    """

    user: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (key, values), in order

    def __post_init__(self) -> None:
        problems: list[str] = []
        if not self.user:
            problems.append("as: required (uid, groups and user-extra act as a user)")
        named = [("as", self.user), ("as-uid", self.uid)]
        named += [("as-groups", g) for g in self.groups]
        named += [(f"as-user-extra.{k}", v) for k, values in self.extra for v in values]
        for name, value in named:
            if _CONTROL_CHARACTER.search(value):
                problems.append(f"{name}: {value!r} has a control character")
        if problems:
            raise ConfigError(problems)

    def headers(self) -> tuple[tuple[str, str], ...]:
        """The request headers, as client-go's impersonating round tripper sets them:
        ``Impersonate-User``, ``Impersonate-Uid`` if set, one ``Impersonate-Group`` per
        group, one ``Impersonate-Extra-<key>`` per value of each extra key, the key
        percent-encoded (:func:`_header_key_escape`). Values are given as the latin-1
        reading of their UTF-8 bytes, so that the HTTP layer (which encodes header text
        as latin-1) sends the UTF-8 bytes, as Go does."""
        pairs = [("Impersonate-User", self.user)]
        if self.uid:
            pairs.append(("Impersonate-Uid", self.uid))
        pairs += [("Impersonate-Group", group) for group in self.groups]
        for key, values in self.extra:
            name = "Impersonate-Extra-" + _header_key_escape(key)
            pairs += [(name, value) for value in values]
        return tuple((name, value.encode().decode("latin-1")) for name, value in pairs)


# What Go's HTTP client refuses in a header value (httpguts.ValidHeaderFieldValue).
_CONTROL_CHARACTER: Final = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# RFC 7230 ``tchar``: what a header name may hold. Not "%": it starts an escape.
_HEADER_TOKEN_BYTES: Final = frozenset(
    b"!#$&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)


def _header_key_escape(key: str) -> str:
    """An extra key as client-go's ``headerKeyEscape`` writes it into a header name: each
    byte of its UTF-8 that is not a token character, and "%", as ``%XX`` (upper-case
    hex); the API server lower-cases the name and percent-decodes it."""
    return "".join(
        chr(byte) if byte in _HEADER_TOKEN_BYTES else f"%{byte:02X}" for byte in key.encode()
    )


# -- credentials --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StaticToken:
    """A bearer token that never changes (a kubeconfig's ``token``)."""

    token: str = field(repr=False)

    def authorization(self) -> str | None:
        return f"Bearer {self.token}"


@dataclass(frozen=True, slots=True)
class BasicAuth:
    """``username``/``password`` of a kubeconfig user."""

    username: str
    password: str = field(repr=False)

    def authorization(self) -> str | None:
        pair = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")


class TokenFile:
    """A bearer token read from a file and re-read once ``reread`` seconds have passed
    (a projected service account token is rotated by the kubelet; a kubeconfig's
    ``tokenFile`` may be too). A file that cannot be re-read keeps the last token (the
    server says when it is no longer good); one never read is a ConfigError.
    """

    def __init__(
        self,
        path: str,
        *,
        reread: float = TOKEN_FILE_REREAD_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._path = path
        self._reread = reread
        self._clock = clock
        self._lock = threading.Lock()
        self._token = _read_token(path)
        self._read_at: float = clock()

    @property
    def path(self) -> str:
        return self._path

    def authorization(self) -> str | None:
        if self._clock() - self._read_at >= self._reread:
            with self._lock:
                if self._clock() - self._read_at >= self._reread:
                    try:
                        self._token = _read_token(self._path)
                    except ConfigError as exc:
                        log.warning("keeping the last token: %s", exc)
                    self._read_at = self._clock()
        return f"Bearer {self._token}"


def _read_token(path: str) -> str:
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"token file {path}: cannot read: {_describe(exc)}"]) from None
    if not token:
        raise ConfigError([f"token file {path}: empty"])
    return token


class ExecPlugin:
    """A client-go credential plugin (``users[].user.exec``): runs ``command`` with
    ``args`` and ``env``, ``KUBERNETES_EXEC_INFO`` describing the request, and reads an
    ``ExecCredential`` from its standard output. A token is cached until
    ``status.expirationTimestamp`` (never refreshed without one), then the plugin runs
    again, once, under a lock. The process is never interactive (a controller has no
    terminal): ``interactiveMode: Always`` is refused.
    """

    def __init__(
        self,
        spec: Mapping[str, Any],
        *,
        where: str,
        cluster: Mapping[str, Any] | None,
        cwd: str | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        problems: list[str] = []
        api_version = spec.get("apiVersion")
        if api_version not in EXEC_API_VERSIONS:
            problems.append(
                f"{where}.apiVersion: {api_version!r} is not one of {', '.join(EXEC_API_VERSIONS)}"
            )
        command = spec.get("command")
        if not isinstance(command, str) or not command:
            problems.append(f"{where}.command: required")
        args = spec.get("args") or []
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            problems.append(f"{where}.args: must be a list of strings")
            args = []
        env: dict[str, str] = {}
        for i, item in enumerate(spec.get("env") or []):
            if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
                problems.append(f"{where}.env[{i}]: needs a name and a value")
                continue
            env[item["name"]] = str(item.get("value", ""))
        mode = spec.get("interactiveMode")
        if mode is None and api_version == "client.authentication.k8s.io/v1":
            problems.append(f"{where}.interactiveMode: required by {api_version}")
        elif mode not in (None, "Never", "IfAvailable", "Always"):
            problems.append(
                f"{where}.interactiveMode: {mode!r} is not Never, IfAvailable or Always"
            )
        elif mode == "Always":
            problems.append(
                f"{where}.interactiveMode: Always needs a terminal, and a controller has none"
            )
        if problems:
            raise ConfigError(problems)
        self._where = where
        self._api_version = str(api_version)
        command = str(command)
        if os.sep in command and not os.path.isabs(command) and cwd:
            command = os.path.normpath(os.path.join(cwd, command))  # as client-go resolves it
        self._argv = [command, *args]
        self._env = env
        self._install_hint = str(spec.get("installHint") or "")
        self._cluster = dict(cluster) if spec.get("provideClusterInfo") and cluster else None
        self._cwd = cwd
        self._clock = clock
        self._lock = threading.Lock()
        self._token: str | None = None
        self._expiry: float | None = None
        self.client_cert_pem: bytes | None = None
        self.client_key_pem: bytes | None = None
        self._run()

    def authorization(self) -> str | None:
        if self._expiry is not None and self._clock() >= self._expiry - EXPIRY_MARGIN_SECONDS:
            with self._lock:
                if (
                    self._expiry is not None
                    and self._clock() >= self._expiry - EXPIRY_MARGIN_SECONDS
                ):
                    self._run()
        return f"Bearer {self._token}" if self._token is not None else None

    def rejected(self, authorization: str) -> None:
        """The server answered 401 to ``authorization``: a token it gave is run for again
        at the next request (client-go's exec authenticator does the same), unless a newer
        one was fetched meanwhile. A plugin that gave only a certificate is left alone."""
        with self._lock:
            if self._token is not None and authorization == f"Bearer {self._token}":
                self._expiry = 0.0

    def _run(self) -> None:
        info: dict[str, Any] = {
            "apiVersion": self._api_version,
            "kind": "ExecCredential",
            "spec": {"interactive": False},
        }
        if self._cluster is not None:
            info["spec"]["cluster"] = self._cluster
        environ = dict(os.environ)
        environ.update(self._env)
        environ["KUBERNETES_EXEC_INFO"] = json.dumps(info)
        command = self._argv[0]
        if shutil.which(command, path=environ.get("PATH")) is None:
            hint = f" ({self._install_hint.strip()})" if self._install_hint.strip() else ""
            raise ConfigError([f"{self._where}.command: {command!r} not found{hint}"])
        try:
            done = subprocess.run(
                self._argv,
                env=environ,
                cwd=self._cwd,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=EXEC_TIMEOUT_SECONDS,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ConfigError([f"{self._where}: {command!r} failed: {_describe(exc)}"]) from None
        stderr = done.stderr.decode("utf-8", "replace").strip()
        if done.returncode != 0:
            said = f": {_shorten(stderr)}" if stderr else ""
            raise ConfigError(
                [f"{self._where}: {command!r} exited with status {done.returncode}{said}"]
            )
        if stderr:
            log.debug("exec plugin %s said: %s", command, _shorten(stderr))
        self._take(done.stdout)

    def _take(self, stdout: bytes) -> None:
        where = f"{self._where}: the ExecCredential {self._argv[0]!r} printed"
        try:
            answer = json.loads(stdout)
        except ValueError as exc:
            raise ConfigError([f"{where} is not JSON: {_describe(exc)}"]) from None
        if not isinstance(answer, Mapping) or answer.get("kind") != "ExecCredential":
            raise ConfigError([f"{where} is not an ExecCredential"])
        if answer.get("apiVersion") != self._api_version:
            raise ConfigError(
                [f"{where} has apiVersion {answer.get('apiVersion')!r}, not {self._api_version}"]
            )
        status = answer.get("status")
        if not isinstance(status, Mapping):
            raise ConfigError([f"{where} has no status"])
        token = status.get("token")
        cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
        if (cert is None) != (key is None):
            raise ConfigError(
                [f"{where}: status.clientCertificateData and clientKeyData go together"]
            )
        if not token and cert is None:
            raise ConfigError([f"{where}: status has neither a token nor a client certificate"])
        expiry: float | None = None
        stamp = status.get("expirationTimestamp")
        if stamp:
            try:
                expiry = datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
            except ValueError:
                raise ConfigError(
                    [f"{where}: status.expirationTimestamp {stamp!r} is not RFC 3339"]
                ) from None
        self._token = str(token) if token else None
        if cert is not None:
            self.client_cert_pem = str(cert).encode()
            self.client_key_pem = str(key).encode()
        self._expiry = expiry


class _KubernetesConfigurationAuth:
    """The ``Authorization`` header a ``kubernetes.client.Configuration`` gives (its
    ``refresh_api_key_hook`` runs first: a legacy auth-provider's refresh)."""

    def __init__(self, configuration: Any) -> None:
        self._configuration = configuration
        self._lock = threading.Lock()

    def authorization(self) -> str | None:
        cfg = self._configuration
        with self._lock:  # the hook rewrites the configuration's api_key
            for key in ("BearerToken", "authorization"):
                if key in (cfg.api_key or {}):
                    value = cfg.get_api_key_with_prefix(key)
                    if value:
                        return str(value)
        if cfg.username and cfg.password:
            return str(cfg.get_basic_auth_token())
        return None


# -- loading ------------------------------------------------------------------------------


def load_kubeconfig(path: str | Sequence[str], context: str | None = None) -> ClusterConfig:
    """The :class:`ClusterConfig` of a context of a kubeconfig file, or of several merged.

    A path (``--kubeconfig``) is one file, which must exist. A sequence of paths (the
    files of ``$KUBECONFIG``) is merged as client-go's ``ClientConfigLoadingRules.Load``
    merges its precedence list: the files in order, a missing one skipped (one must
    exist); of ``clusters``, ``users`` and ``contexts``, the first file that defines a
    name gives that entry whole (a later file's entry of the same name is ignored, even
    the fields the first one lacks); ``current-context`` is the first one set. Relative
    paths of an entry are relative to the directory of the file that defined it.

    Args:
        path: the kubeconfig, or the kubeconfigs in order of precedence.
        context: the context; default the ``current-context``.

    Raises:
        ConfigError: the file given is missing, no file of the list exists, a file is
            unreadable or not a kubeconfig, or the context, its cluster or its user is
            missing or unusable; every message names the file or files concerned.
    """
    documents: list[tuple[str, dict[str, Any]]] = []
    if isinstance(path, str):
        document = _read_kubeconfig(path)
        if document is None:
            raise ConfigError([f"kubeconfig {path}: no such file"])
        documents.append((path, document))
    else:
        paths = list(dict.fromkeys(p for p in path if p))
        for file in paths:
            document = _read_kubeconfig(file)
            if document is None:
                log.debug("kubeconfig file missing, skipped", extra={"path": file})
            else:
                documents.append((file, document))
        if not documents:
            listed = ", ".join(paths) if paths else "(none given)"
            raise ConfigError([f"kubeconfig: none of the files exists: {listed}"])
    return _from_merged(_merge(documents), context)


# What a kubeconfig held in memory (a Secret's) may not say: it would read this process's
# files (a service account token sent to any server) or run a command of its choosing.
_OUTSIDE_REFERENCES: Final = {
    "clusters": ("certificate-authority",),
    "users": ("client-certificate", "client-key", "tokenFile", "exec", "auth-provider"),
}


def load_kubeconfig_data(
    data: bytes | str, source: str, context: str | None = None
) -> ClusterConfig:
    """The :class:`ClusterConfig` of a kubeconfig held in memory (the ``value`` of a
    Cluster API ``<cluster>-kubeconfig`` Secret, say), one document, as
    :func:`load_kubeconfig` reads a file: its ``context`` (default the
    ``current-context``), that context's cluster and user.

    Only what the document embeds is used: certificates as ``*-data``, a ``token``, basic
    auth. A reference to anything outside it — a file (``certificate-authority``,
    ``client-certificate``, ``client-key``, ``tokenFile``), a credential plugin (``exec``)
    or an ``auth-provider`` — is refused: whoever may write the Secret could otherwise make
    this process send its own service account token to a server of theirs, or run a
    command. ``source`` names the document in messages (``secret fleet/east-kubeconfig``).

    Raises:
        ConfigError: not YAML, not a kubeconfig, a reference outside the document, or
            the context, its cluster or user missing or unusable.
    """
    try:
        document = yaml.safe_load(data)
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError([f"kubeconfig {source}: not valid YAML: {_describe(exc)}"]) from None
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ConfigError([f"kubeconfig {source}: not a kubeconfig (expected a YAML mapping)"])
    for section, keys in _OUTSIDE_REFERENCES.items():
        for item in document.get(section) or []:
            body = item.get(_SECTIONS[section]) if isinstance(item, Mapping) else None
            if not isinstance(body, Mapping):
                continue
            refused = [key for key in keys if body.get(key)]
            if refused:
                raise ConfigError(
                    [
                        f"kubeconfig {source}: {section}[{item.get('name')}]: {refused[0]} "
                        "refers to something outside the kubeconfig (a file or a command); "
                        "only embedded data (certificate-authority-data, "
                        "client-certificate-data, client-key-data, token) is read from here"
                    ]
                )
    return _from_merged(_merge([(source, document)]), context, in_memory=True)


def _read_kubeconfig(path: str) -> dict[str, Any] | None:
    """A kubeconfig file's document (an empty file is an empty kubeconfig, as in
    client-go); None if there is no such file."""
    try:
        with open(path, encoding="utf-8") as file:
            document = yaml.safe_load(file)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError([f"kubeconfig {path}: cannot read: {exc.strerror or exc}"]) from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError([f"kubeconfig {path}: not valid YAML: {_describe(exc)}"]) from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError([f"kubeconfig {path}: not a kubeconfig (expected a YAML mapping)"])
    return document


# The named sections of a kubeconfig, and the key of an entry's body in each.
_SECTIONS: Final = {"clusters": "cluster", "users": "user", "contexts": "context"}


@dataclass(frozen=True, slots=True)
class _Entry:
    """A cluster, user or context, as the first file that defined its name has it."""

    section: str
    name: str
    raw: Any
    file: str

    def body(self) -> Mapping[str, Any]:
        if self.raw is None:
            return {}
        if not isinstance(self.raw, Mapping):
            key = _SECTIONS[self.section]
            raise ConfigError(
                [f"kubeconfig {self.file}: {self.section}[{self.name}].{key}: not a mapping"]
            )
        return self.raw


@dataclass(frozen=True, slots=True)
class _Merged:
    """Kubeconfig documents merged: the files read (in order, with their documents),
    each section's entries by name, the current-context."""

    documents: tuple[tuple[str, Mapping[str, Any]], ...]
    entries: Mapping[str, Mapping[str, _Entry]]
    current_context: str | None

    @property
    def label(self) -> str:
        """The files, for a message about what none of them has."""
        return "kubeconfig " + ", ".join(file for file, _ in self.documents)


def _merge(documents: Sequence[tuple[str, Mapping[str, Any]]]) -> _Merged:
    """client-go's merge of a precedence list: of each name, the first definition (the
    first in a file, the first file); the first non-empty current-context."""
    entries: dict[str, dict[str, _Entry]] = {section: {} for section in _SECTIONS}
    current: str | None = None
    for file, document in documents:
        for section, key in _SECTIONS.items():
            listed = document.get(section) or []
            if not isinstance(listed, list):
                raise ConfigError([f"kubeconfig {file}: {section}: not a list"])
            for item in listed:
                if isinstance(item, Mapping) and isinstance(item.get("name"), str):
                    name = item["name"]
                    entries[section].setdefault(name, _Entry(section, name, item.get(key), file))
        if current is None and document.get("current-context"):
            current = str(document["current-context"])
    return _Merged(tuple(documents), entries, current)


@contextlib.contextmanager
def _in_file(file: str) -> Iterator[None]:
    """A ConfigError raised inside names ``file``: the kubeconfig of the entry at fault."""
    try:
        yield
    except ConfigError as exc:
        raise ConfigError([f"kubeconfig {file}: {p}" for p in exc.problems]) from None


def _from_merged(merged: _Merged, wanted: str | None, *, in_memory: bool = False) -> ClusterConfig:
    name = wanted or merged.current_context
    if not name:
        raise ConfigError([f"{merged.label}: no context given and no current-context set"])
    contexts = merged.entries["contexts"]
    context_entry = contexts.get(name)
    if context_entry is None:
        known = ", ".join(contexts) or "none"
        raise ConfigError([f"{merged.label}: context {name!r} not found (contexts: {known})"])
    context = context_entry.body()
    cluster_name = context.get("cluster")
    cluster_entry = merged.entries["clusters"].get(str(cluster_name)) if cluster_name else None
    if cluster_entry is None:
        raise ConfigError(
            [f"{merged.label}: cluster {cluster_name!r} of context {name!r} not found"]
        )
    cluster = cluster_entry.body()
    user_name = context.get("user")
    user_entry: _Entry | None = None
    user: Mapping[str, Any] = {}
    if user_name:
        user_entry = merged.entries["users"].get(str(user_name))
        if user_entry is None:
            raise ConfigError([f"{merged.label}: user {user_name!r} of context {name!r} not found"])
        user = user_entry.body()
    cluster_file = cluster_entry.file
    user_file = user_entry.file if user_entry is not None else cluster_file
    involved = dict.fromkeys([context_entry.file, cluster_file, user_file])
    source = f"kubeconfig {', '.join(involved)}, context {name}"
    with _in_file(cluster_file):
        server = cluster.get("server")
        if not isinstance(server, str) or not server:
            raise ConfigError([f"cluster {cluster_name!r}: server is not set"])
        server = server.rstrip("/")
    where = f"users[{user_name}].user"
    with _in_file(user_file):
        impersonation = _impersonation(user, where, str(user_name))
    if not in_memory and ("auth-provider" in user or os.environ.get(LOADER_ENV) == "kubernetes"):
        loaded = _through_kubernetes_package(
            [file for file, document in merged.documents if document], str(name), source
        )
        return dataclasses.replace(
            loaded,
            namespace=str(context.get("namespace") or "default"),
            source=f"{source} (cluster {cluster_name}), through the kubernetes package",
            impersonation=impersonation,
        )
    cluster_base = os.path.dirname(os.path.abspath(cluster_file))
    user_base = os.path.dirname(os.path.abspath(user_file))
    with _in_file(cluster_file):
        ca = _pem(
            cluster, "certificate-authority", cluster_base, f"clusters[{cluster_name}].cluster"
        )
    credentials: Credentials | None = None
    with _in_file(user_file):
        cert = _pem(user, "client-certificate", user_base, where)
        key = _pem(user, "client-key", user_base, where)
        if user.get("token"):
            credentials = StaticToken(str(user["token"]))
        elif user.get("tokenFile"):
            credentials = TokenFile(_resolve(user_base, str(user["tokenFile"])))
        elif user.get("exec"):
            plugin = ExecPlugin(
                user["exec"],
                where=f"{where}.exec",
                cluster=_exec_cluster_info(cluster, ca),
                cwd=user_base,
            )
            credentials = plugin
            if plugin.client_cert_pem is not None:
                cert, key = plugin.client_cert_pem, plugin.client_key_pem
        elif user.get("username") is not None and user.get("password") is not None:
            credentials = BasicAuth(str(user["username"]), str(user["password"]))
    return ClusterConfig(
        server=server,
        ca_pem=ca,
        insecure=bool(cluster.get("insecure-skip-tls-verify", False)),
        tls_server_name=str(cluster["tls-server-name"]) if cluster.get("tls-server-name") else None,
        client_cert_pem=cert,
        client_key_pem=key,
        proxy_url=_proxy_for(server, cluster.get("proxy-url")),
        credentials=credentials,
        namespace=str(context.get("namespace") or "default"),
        source=source,
        impersonation=impersonation,
    )


def _impersonation(user: Mapping[str, Any], where: str, user_name: str) -> Impersonation | None:
    """A user's ``as``, ``as-uid``, ``as-groups`` and ``as-user-extra`` (client-go's
    ``AuthInfo.Impersonate*``); None when ``as`` is not set, which client-go's
    validation requires of the others too."""
    problems: list[str] = []

    def text(key: str) -> str:
        value = user.get(key)
        if value is None or isinstance(value, str):
            return value or ""
        problems.append(f"{where}.{key}: must be a string")
        return ""

    def texts(value: Any, key: str) -> tuple[str, ...]:
        if value is None:
            return ()
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        problems.append(f"{where}.{key}: must be a list of strings")
        return ()

    as_user, uid = text("as"), text("as-uid")
    groups = texts(user.get("as-groups"), "as-groups")
    extra: list[tuple[str, tuple[str, ...]]] = []
    extra_map = user.get("as-user-extra")
    if isinstance(extra_map, Mapping):
        extra = [(str(k), texts(v, f"as-user-extra.{k}")) for k, v in extra_map.items()]
    elif extra_map is not None:
        problems.append(f"{where}.as-user-extra: must be a mapping of keys to lists of strings")
    if problems:
        raise ConfigError(problems)
    if not as_user:
        if uid or groups or extra:
            raise ConfigError(
                [
                    f"{where}: requesting uid, groups or user-extra for {user_name!r} "
                    "without impersonating a user (as is not set)"
                ]
            )
        return None
    try:
        return Impersonation(user=as_user, uid=uid, groups=groups, extra=tuple(extra))
    except ConfigError as exc:
        raise ConfigError([f"{where}.{p}" for p in exc.problems]) from None


def load_in_cluster(
    environ: Mapping[str, str] | None = None, account_dir: str = SERVICE_ACCOUNT_DIR
) -> ClusterConfig:
    """The :class:`ClusterConfig` of the pod this process runs in: the API server from
    ``KUBERNETES_SERVICE_HOST``/``_PORT``, the CA and the (re-read) token from the
    service account's mounted files.

    Raises:
        ConfigError: not in a pod, or the token or CA cannot be read.
    """
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ConfigError(
            [
                "in-cluster configuration: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
                "are not set (not running in a pod)"
            ]
        )
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(host).version == 6:
            host = f"[{host}]"
    token_path = os.path.join(account_dir, "token")
    ca_path = os.path.join(account_dir, "ca.crt")
    try:
        credentials = TokenFile(token_path)
        ca = _read_file(ca_path)
    except ConfigError as exc:
        raise ConfigError([f"in-cluster configuration: {p}" for p in exc.problems]) from None
    namespace = "default"
    with contextlib.suppress(OSError, UnicodeDecodeError):
        namespace = Path(account_dir, "namespace").read_text(encoding="utf-8").strip() or namespace
    server = f"https://{host}:{port}"
    return ClusterConfig(
        server=server,
        ca_pem=ca,
        credentials=credentials,
        proxy_url=_proxy_for(server, None),
        namespace=namespace,
        source="in-cluster configuration",
    )


def from_kubernetes_configuration(configuration: Any) -> ClusterConfig:
    """A :class:`ClusterConfig` for a ``kubernetes.client.Configuration`` (what
    :class:`~manager.client.KubeClient` accepted before; the auth-provider path): its host,
    TLS files and settings, proxy, and its API key or basic auth (refresh hook kept)."""
    cfg = configuration
    host = str(cfg.host).rstrip("/")
    ca: bytes | None = None
    if getattr(cfg, "ca_cert_data", None):
        data = cfg.ca_cert_data
        ca = data.encode() if isinstance(data, str) else bytes(data)
    elif cfg.ssl_ca_cert:
        ca = _read_file(str(cfg.ssl_ca_cert))
    cert = _read_file(str(cfg.cert_file)) if cfg.cert_file else None
    key = _read_file(str(cfg.key_file)) if cfg.key_file else None
    has_auth = bool(cfg.api_key) or bool(cfg.username and cfg.password)
    proxy = cfg.proxy if cfg.proxy and not _bypass_proxy(host, cfg.no_proxy or "") else None
    return ClusterConfig(
        server=host,
        ca_pem=ca,
        insecure=not cfg.verify_ssl,
        tls_server_name=getattr(cfg, "tls_server_name", None) or None,
        client_cert_pem=cert,
        client_key_pem=key,
        proxy_url=proxy,
        credentials=_KubernetesConfigurationAuth(cfg) if has_auth else None,
        source="kubernetes.client.Configuration",
    )


def _through_kubernetes_package(files: Sequence[str], name: str, source: str) -> ClusterConfig:
    """A legacy ``auth-provider`` user (or any, with ``OVERSEER_KUBECONFIG_LOADER``):
    loaded by the ``kubernetes`` package (imported here only), whose refresh hook then
    provides each request's token. Several files go to the package's
    ``KubeConfigMerger`` as one ``os.pathsep``-separated list, which it merges as
    client-go does (the first definition of a name wins; its current-context rule
    differs, but the context is named here). It reads no impersonation: the caller adds
    it."""
    if len(files) > 1 and any(os.pathsep in file for file in files):
        raise ConfigError(
            [
                f"kubeconfig {', '.join(files)}: the kubernetes package cannot merge a "
                f"file whose path has {os.pathsep!r} in it"
            ]
        )
    # Imported here only: the package's import costs about 20 MiB. Untyped: Any.
    k8s_client: Any = importlib.import_module("kubernetes.client")
    k8s_config: Any = importlib.import_module("kubernetes.config")

    configuration = k8s_client.Configuration()
    try:
        k8s_config.load_kube_config(
            config_file=os.pathsep.join(files),
            context=name,
            client_configuration=configuration,
            persist_config=False,
        )
    except Exception as exc:
        raise ConfigError([f"{source}: {_describe(exc)}"]) from None
    return from_kubernetes_configuration(configuration)


def _resolve(base: str, path: str) -> str:
    return os.path.normpath(os.path.join(base, os.path.expanduser(path)))


def _pem(section: Mapping[str, Any], key: str, base: str, where: str) -> bytes | None:
    """``key-data`` (base64 of PEM) or the file ``key`` names, as PEM bytes."""
    data = section.get(f"{key}-data")
    if data:
        try:
            return base64.b64decode(str(data), validate=False)
        except (binascii.Error, ValueError) as exc:
            raise ConfigError([f"{where}.{key}-data: not base64: {_describe(exc)}"]) from None
    file = section.get(key)
    if file:
        try:
            return _read_file(_resolve(base, str(file)))
        except ConfigError as exc:
            raise ConfigError([f"{where}.{key}: {p}" for p in exc.problems]) from None
    return None


def _read_file(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read: {exc.strerror or exc}"]) from None


def _exec_cluster_info(cluster: Mapping[str, Any], ca: bytes | None) -> dict[str, Any]:
    """``spec.cluster`` of the ExecCredential for ``provideClusterInfo`` (client-go's
    ``clientauthentication.Cluster``); the ``client.authentication.k8s.io/exec``
    extension's value becomes ``config``."""
    info: dict[str, Any] = {"server": cluster.get("server")}
    if ca is not None:
        info["certificate-authority-data"] = base64.b64encode(ca).decode("ascii")
    for key in ("tls-server-name", "insecure-skip-tls-verify", "proxy-url", "disable-compression"):
        if key in cluster:
            info[key] = cluster[key]
    for extension in cluster.get("extensions") or []:
        if (
            isinstance(extension, Mapping)
            and extension.get("name") == "client.authentication.k8s.io/exec"
        ):
            info["config"] = extension.get("extension")
    return info


def _proxy_for(server: str, proxy_url: Any) -> str | None:
    """The proxy a request to ``server`` goes through: the cluster's ``proxy-url``, else
    the environment's (``HTTPS_PROXY`` for https, ``HTTP_PROXY`` for http, ``ALL_PROXY``)
    unless ``NO_PROXY`` exempts the server; never for loopback or ``localhost`` (Go's
    ``httpproxy`` rule, which client-go follows)."""
    if proxy_url:
        return str(proxy_url)
    proxies = getproxies()
    scheme = urlsplit(server).scheme
    chosen = proxies.get(scheme) or proxies.get("all")
    if not chosen or _bypass_proxy(server, proxies.get("no", "")):
        return None
    return chosen


def _bypass_proxy(server: str, no_proxy: str) -> bool:
    parts = urlsplit(server)
    host = (parts.hostname or "").lower()
    if not host or host == "localhost":
        return True
    address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = None
    with contextlib.suppress(ValueError):
        address = ipaddress.ip_address(host)
    if address is not None and address.is_loopback:
        return True
    netloc = parts.netloc.lower().rpartition("@")[2]
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        if address is not None:
            with contextlib.suppress(ValueError):
                if address in ipaddress.ip_network(entry, strict=False):
                    return True
        bare = entry.lstrip(".")
        if host == bare or host.endswith("." + bare) or netloc == bare:
            return True
    return False


# -- the connection pool ------------------------------------------------------------------


def ssl_context(config: ClusterConfig) -> ssl.SSLContext | None:
    """The TLS context of ``config``'s connections (None for an http server): its CA
    only when one is given (else the system's roots), its client certificate, or no
    verification at all with ``insecure``."""
    if urlsplit(config.server).scheme != "https":
        return None
    context = create_urllib3_context(
        cert_reqs=ssl.CERT_NONE if config.insecure else ssl.CERT_REQUIRED
    )
    if config.insecure:
        context.check_hostname = False
    elif config.ca_pem is not None:
        try:
            context.load_verify_locations(cadata=config.ca_pem.decode("ascii", "replace"))
        except (ssl.SSLError, ValueError) as exc:
            raise ConfigError(
                [f"{config.source}: certificate authority: {_describe(exc)}"]
            ) from None
    else:
        context.load_default_certs()
    if config.client_cert_pem is not None and config.client_key_pem is not None:
        with tempfile.TemporaryDirectory(prefix="overseer-tls-") as directory:
            chain = os.path.join(directory, "client.pem")
            descriptor = os.open(chain, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as file:
                file.write(config.client_cert_pem.rstrip() + b"\n")
                file.write(config.client_key_pem.rstrip() + b"\n")
            try:
                context.load_cert_chain(chain)
            except ssl.SSLError as exc:
                raise ConfigError(
                    [f"{config.source}: client certificate and key: {_describe(exc)}"]
                ) from None
    return context


def pool_manager(config: ClusterConfig, maxsize: int, **extra: Any) -> urllib3.PoolManager:
    """A urllib3 pool manager for ``config``: TLS as :func:`ssl_context` sets it up, the
    proxy in effect (a SOCKS proxy needs the ``PySocks`` package), ``maxsize`` connections
    kept per host. ``extra`` goes to the manager (``pool_classes_by_scheme`` is set after)."""
    args: dict[str, Any] = {"maxsize": maxsize, **extra}
    context = ssl_context(config)
    if context is not None:
        args["ssl_context"] = context
        args["cert_reqs"] = ssl.CERT_NONE if config.insecure else ssl.CERT_REQUIRED
        if config.insecure:
            args["assert_hostname"] = False
        if config.tls_server_name:
            args["server_hostname"] = config.tls_server_name
    proxy = config.proxy_url
    if proxy is None:
        return urllib3.PoolManager(**args)
    if urlsplit(proxy).scheme.lower().startswith("socks"):
        try:
            from urllib3.contrib.socks import SOCKSProxyManager
        except ImportError:
            raise ConfigError(
                [f"{config.source}: proxy {proxy}: a SOCKS proxy needs the PySocks package"]
            ) from None
        return SOCKSProxyManager(proxy, **args)
    return urllib3.ProxyManager(proxy, **args)


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return _shorten(text)


def _shorten(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
