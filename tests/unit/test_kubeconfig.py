"""Unit tests of manager.client.kubeconfig: kubeconfig and in-cluster loading, credentials, TLS,
proxies — each through a real :class:`KubeClient` request to the scripted stub server of
``test_kube`` (over TLS with certificates made by ``openssl`` where TLS is the point).

The loader replaces the ``kubernetes`` package's (whose import costs a replica about 20
MiB); these tests pin the kubeconfig semantics it must keep (client-go's ``clientcmd``).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import ssl
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from manager.client import ClientOptions, KubeClient
from manager.client.kubeconfig import (
    ClusterConfig,
    ExecPlugin,
    Impersonation,
    TokenFile,
    _proxy_for,
    load_in_cluster,
    load_kubeconfig,
)
from manager.errors import ConfigError, Unauthorized, Unavailable
from tests.unit.test_kube import PODS, Reply, StubApiServer, pod, status_body

OPENSSL = shutil.which("openssl")
needs_openssl = pytest.mark.skipif(
    OPENSSL is None,
    reason="needs the openssl command (Debian package openssl) to make certificates",
)


# -- certificates -------------------------------------------------------------------------


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing here


def _openssl(*args: str, cwd: Path) -> None:
    assert OPENSSL is not None
    done = subprocess.run([OPENSSL, *args], cwd=cwd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A CA, a server certificate for the name ``apiserver.test`` only (not 127.0.0.1,
    so that ``tls-server-name`` matters), a client certificate, and an unrelated CA."""
    if OPENSSL is None:
        pytest.skip("needs the openssl command (Debian package openssl) to make certificates")
    d = tmp_path_factory.mktemp("pki")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for name in ("ca", "other-ca"):
        _openssl("req", "-x509", *ec, "-keyout", f"{name}.key", "-out", f"{name}.crt",
                 "-days", "2", "-subj", f"/CN={name}", cwd=d)  # fmt: skip
    for name, subject, ext in (
        ("server", "/CN=kube-apiserver", "subjectAltName=DNS:apiserver.test"),
        ("client", "/CN=jane/O=team-a", "extendedKeyUsage=clientAuth"),
    ):
        _openssl("req", "-new", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", subject, cwd=d)  # fmt: skip
        (d / f"{name}.ext").write_text(ext + "\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "2", "-out", f"{name}.crt",
                 "-extfile", f"{name}.ext", cwd=d)  # fmt: skip
    return Pki(
        d / "ca.crt", d / "server.crt", d / "server.key", d / "client.crt", d / "client.key",
        d / "other-ca.crt",
    )  # fmt: skip


@pytest.fixture
def tls_stub(pki: Pki) -> Iterator[StubApiServer]:
    """The stub over TLS, requiring a client certificate signed by the CA."""
    server = StubApiServer()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    context.load_verify_locations(cafile=str(pki.ca))
    context.verify_mode = ssl.CERT_REQUIRED
    server.httpd.socket = context.wrap_socket(server.httpd.socket, server_side=True)
    server.thread.start()
    try:
        yield server
    finally:
        server.stop()


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def kubeconfig(path: Path, cluster: dict[str, Any], user: dict[str, Any], **context: Any) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", **context}}],
                "current-context": "x",
            }
        )
    )
    return path


def config_file(
    path: Path,
    *,
    clusters: dict[str, Any] | None = None,
    users: dict[str, Any] | None = None,
    contexts: dict[str, Any] | None = None,
    current: str | None = None,
) -> Path:
    """A kubeconfig of the entries given (name: body), with ``current-context`` if given."""
    document: dict[str, Any] = {"apiVersion": "v1", "kind": "Config"}
    for section, key, entries in (
        ("clusters", "cluster", clusters),
        ("users", "user", users),
        ("contexts", "context", contexts),
    ):
        if entries is not None:
            document[section] = [{"name": name, key: body} for name, body in entries.items()]
    if current is not None:
        document["current-context"] = current
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


def authorization(config: ClusterConfig) -> str | None:
    return config.credentials.authorization() if config.credentials is not None else None


def get_pod(config: ClusterConfig | str, stub: StubApiServer) -> dict[str, str]:
    """GET a pod through a client of ``config`` (a ClusterConfig or a kubeconfig path);
    the headers the stub saw."""
    stub.reply("GET", "/api/v1/namespaces/default/pods/a", Reply(body=pod("a")))
    before = len(stub.requests())
    client = KubeClient.from_kubeconfig(config) if isinstance(config, str) else KubeClient(config)
    with client:
        assert client.get(PODS, "a", "default")["metadata"]["name"] == "a"
    return stub.requests()[before].headers


def tls_url(stub: StubApiServer) -> str:
    return f"https://127.0.0.1:{stub.port}"


# -- TLS ----------------------------------------------------------------------------------


@needs_openssl
def test_inline_ca_and_client_certificate_with_tls_server_name(
    tls_stub: StubApiServer, pki: Pki, tmp_path: Path
) -> None:
    path = kubeconfig(
        tmp_path / "config",
        {
            "server": tls_url(tls_stub),
            "certificate-authority-data": b64(pki.ca),
            "tls-server-name": "apiserver.test",
        },
        {"client-certificate-data": b64(pki.client_cert), "client-key-data": b64(pki.client_key)},
    )
    headers = get_pod(str(path), tls_stub)
    assert "authorization" not in headers  # the certificate is the identity


@needs_openssl
def test_certificate_files_are_relative_to_the_kubeconfig(
    tls_stub: StubApiServer, pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "kube"
    home.mkdir()
    for source, name in (
        (pki.ca, "ca.crt"),
        (pki.client_cert, "me.crt"),
        (pki.client_key, "me.key"),
    ):
        shutil.copy(source, home / name)
    path = kubeconfig(
        home / "config",
        {"server": tls_url(tls_stub), "certificate-authority": "ca.crt",
         "tls-server-name": "apiserver.test"},
        {"client-certificate": "me.crt", "client-key": "me.key", "token": "t0"},
    )  # fmt: skip
    monkeypatch.chdir(tmp_path)  # not the kubeconfig's directory
    assert get_pod(str(path), tls_stub)["authorization"] == "Bearer t0"


@needs_openssl
def test_the_server_certificate_is_checked_against_the_given_ca_and_name(
    tls_stub: StubApiServer, pki: Pki, tmp_path: Path
) -> None:
    client_auth = {
        "client-certificate-data": b64(pki.client_cert),
        "client-key-data": b64(pki.client_key),
    }
    # Another CA: the system roots are not added to the one given.
    wrong_ca = kubeconfig(
        tmp_path / "a",
        {"server": tls_url(tls_stub), "certificate-authority-data": b64(pki.other_ca),
         "tls-server-name": "apiserver.test"},
        client_auth,
    )  # fmt: skip
    # The right CA, but the certificate names apiserver.test, not 127.0.0.1.
    wrong_name = kubeconfig(
        tmp_path / "b",
        {"server": tls_url(tls_stub), "certificate-authority-data": b64(pki.ca)},
        client_auth,
    )
    for path in (wrong_ca, wrong_name):
        with KubeClient.from_kubeconfig(str(path), options=ClientOptions(max_retries=0)) as client:
            with pytest.raises(Unavailable, match=r"cannot reach https://127\.0\.0\.1") as info:
                client.get(PODS, "a", "default")
            assert "CERTIFICATE_VERIFY_FAILED" in str(info.value)
    # insecure-skip-tls-verify: neither is checked.
    insecure = kubeconfig(
        tmp_path / "c", {"server": tls_url(tls_stub), "insecure-skip-tls-verify": True}, client_auth
    )
    get_pod(str(insecure), tls_stub)


@needs_openssl
def test_a_missing_certificate_file_is_a_config_error_naming_it(tmp_path: Path, pki: Pki) -> None:
    path = kubeconfig(
        tmp_path / "config",
        {"server": "https://127.0.0.1:1", "certificate-authority": "nope/ca.crt"},
        {"token": "t"},
    )
    with pytest.raises(ConfigError) as info:
        load_kubeconfig(str(path))
    assert str(path) in str(info.value)
    assert str(tmp_path / "nope" / "ca.crt") in str(info.value)
    assert "certificate-authority" in str(info.value)
    key_only = kubeconfig(
        tmp_path / "other",
        {"server": "https://127.0.0.1:1"},
        {"client-key-data": b64(pki.client_key)},
    )
    with pytest.raises(ConfigError, match="client certificate needs its key"):
        load_kubeconfig(str(key_only))


# -- contexts -----------------------------------------------------------------------------


def test_context_cluster_and_user_must_exist_and_are_named(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [
                    {"name": "good", "context": {"cluster": "c", "user": "u", "namespace": "ns"}},
                    {"name": "no-cluster", "context": {"cluster": "gone", "user": "u"}},
                    {"name": "no-user", "context": {"cluster": "c", "user": "gone"}},
                    {"name": "anonymous", "context": {"cluster": "c"}},
                ],
                "current-context": "good",
            }
        )
    )
    config = load_kubeconfig(str(path))
    assert (config.server, config.namespace) == ("http://127.0.0.1:1", "ns")
    assert config.credentials is not None
    assert config.credentials.authorization() == "Bearer t"
    assert load_kubeconfig(str(path), "anonymous").credentials is None
    for context, problem in (
        ("no-cluster", "cluster 'gone' of context 'no-cluster' not found"),
        ("no-user", "user 'gone' of context 'no-user' not found"),
        ("missing", "context 'missing' not found (contexts: good, no-cluster, no-user, anonymous)"),
    ):
        with pytest.raises(ConfigError) as info:
            load_kubeconfig(str(path), context)
        assert str(info.value) == f"kubeconfig {path}: {problem}"


def test_basic_auth_and_static_token_headers(stub: StubApiServer, tmp_path: Path) -> None:
    basic = kubeconfig(tmp_path / "a", {"server": stub.url}, {"username": "jane", "password": "pw"})
    expected = "Basic " + base64.b64encode(b"jane:pw").decode()
    assert get_pod(str(basic), stub)["authorization"] == expected
    # A token wins over username/password, as in client-go.
    both = kubeconfig(
        tmp_path / "b", {"server": stub.url}, {"token": "tok", "username": "jane", "password": "pw"}
    )
    assert get_pod(str(both), stub)["authorization"] == "Bearer tok"


def test_a_token_file_is_reread_after_a_minute(stub: StubApiServer, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    path = kubeconfig(tmp_path / "config", {"server": stub.url}, {"tokenFile": "token"})
    assert get_pod(str(path), stub)["authorization"] == "Bearer first"

    now = [100.0]
    source = TokenFile(str(token), clock=lambda: now[0])
    token.write_text("second\n")
    assert source.authorization() == "Bearer first"  # read less than a minute ago
    now[0] += 60
    assert source.authorization() == "Bearer second"
    token.unlink()  # a rotation in progress: the last token is kept, not an error
    now[0] += 60
    assert source.authorization() == "Bearer second"
    with pytest.raises(ConfigError, match=f"token file {token}: cannot read"):
        TokenFile(str(token))


# -- exec credential plugins --------------------------------------------------------------


def plugin(tmp_path: Path, body: str) -> Path:
    """A credential plugin: a Python script (``runs`` counts its runs in a file)."""
    script = tmp_path / "plugin.py"
    script.write_text(
        "import json, os, sys\n"
        "runs = os.path.join(os.path.dirname(__file__), 'runs')\n"
        "n = int(open(runs).read()) + 1 if os.path.exists(runs) else 1\n"
        "open(runs, 'w').write(str(n))\n"
        "info = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n" + textwrap.dedent(body)
    )
    return script


def exec_user(script: Path, **extra: Any) -> dict[str, Any]:
    spec = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": sys.executable,
        "args": [str(script)],
        "interactiveMode": "Never",
        "env": [{"name": "PLUGIN_GREETING", "value": "hello"}],
        **extra,
    }
    return {"exec": spec}


def runs(tmp_path: Path) -> int:
    return int((tmp_path / "runs").read_text())


def test_an_exec_plugin_token_is_cached_until_it_expires(
    stub: StubApiServer, tmp_path: Path
) -> None:
    script = plugin(
        tmp_path,
        """
        assert info["spec"]["interactive"] is False
        assert os.environ["PLUGIN_GREETING"] == "hello"
        print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential",
            "status": {"token": f"tok-{n}", "expirationTimestamp": os.environ["EXPIRES"]}}))
        """,
    )
    os.environ["EXPIRES"] = "2999-01-01T00:00:00Z"
    try:
        path = kubeconfig(tmp_path / "config", {"server": stub.url}, exec_user(script))
        config = load_kubeconfig(str(path))
        assert get_pod(config, stub)["authorization"] == "Bearer tok-1"
        assert get_pod(config, stub)["authorization"] == "Bearer tok-1"
        assert runs(tmp_path) == 1  # cached: not expired
        # An expiring credential is fetched again once it is within the margin of expiry.
        expires = int(time.time()) + 3600
        os.environ["EXPIRES"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires))
        now = [float(expires - 600)]
        expiring = ExecPlugin(
            exec_user(script)["exec"], where="exec", cluster=None, cwd=None, clock=lambda: now[0]
        )
        assert expiring.authorization() == "Bearer tok-2"
        assert runs(tmp_path) == 2  # fetched when loaded, still good
        now[0] = expires - 5.0
        assert expiring.authorization() == "Bearer tok-3"
        assert expiring.authorization() == "Bearer tok-4"  # the plugin gave the same expiry
        assert runs(tmp_path) == 4
    finally:
        del os.environ["EXPIRES"]


def test_a_401_makes_the_exec_plugin_run_again(stub: StubApiServer, tmp_path: Path) -> None:
    """A token the server rejects before its expiry (revoked) is not sent again."""
    script = plugin(
        tmp_path,
        """
        print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential",
            "status": {"token": f"tok-{n}", "expirationTimestamp": "2999-01-01T00:00:00Z"}}))
        """,
    )
    path = kubeconfig(tmp_path / "config", {"server": stub.url}, exec_user(script))
    path_ = "/api/v1/namespaces/default/pods/a"
    stub.reply("GET", path_, Reply(401, status_body(401, "Unauthorized", "Unauthorized")))
    stub.reply("GET", path_, Reply(body=pod("a")))
    with KubeClient.from_kubeconfig(str(path), options=ClientOptions(max_retries=0)) as client:
        with pytest.raises(Unauthorized):
            client.get(PODS, "a", "default")
        client.get(PODS, "a", "default")
    assert [s.headers["authorization"] for s in stub.requests()] == ["Bearer tok-1", "Bearer tok-2"]


def test_a_relative_exec_command_is_relative_to_the_kubeconfig(
    stub: StubApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = plugin(
        tmp_path,
        """
        print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential",
            "status": {"token": "from-bin"}}))
        """,
    )
    (tmp_path / "bin").mkdir()
    wrapper = tmp_path / "bin" / "plugin"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {script}\n")
    wrapper.chmod(0o755)
    user = exec_user(script, command="./bin/plugin", args=[])
    path = kubeconfig(tmp_path / "config", {"server": stub.url}, user)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert get_pod(str(path), stub)["authorization"] == "Bearer from-bin"


def test_an_exec_plugin_gets_the_cluster_when_asked(stub: StubApiServer, tmp_path: Path) -> None:
    script = plugin(
        tmp_path,
        """
        cluster = info["spec"]["cluster"]
        token = cluster["server"] + "|" + json.dumps(cluster["config"], sort_keys=True)
        print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential",
            "status": {"token": token}}))
        """,
    )
    cluster = {
        "server": stub.url,
        "extensions": [
            {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "overseer"}}
        ],
    }
    path = kubeconfig(tmp_path / "config", cluster, exec_user(script, provideClusterInfo=True))
    headers = get_pod(str(path), stub)
    assert headers["authorization"] == f'Bearer {stub.url}|{{"audience": "overseer"}}'


@needs_openssl
def test_an_exec_plugin_may_give_a_client_certificate(
    tls_stub: StubApiServer, pki: Pki, tmp_path: Path
) -> None:
    cert, key = pki.client_cert.read_text(), pki.client_key.read_text()
    script = plugin(
        tmp_path,
        f"""
        print(json.dumps({{"apiVersion": info["apiVersion"], "kind": "ExecCredential",
            "status": {{"clientCertificateData": {cert!r}, "clientKeyData": {key!r}}}}}))
        """,
    )
    cluster = {
        "server": tls_url(tls_stub),
        "certificate-authority-data": b64(pki.ca),
        "tls-server-name": "apiserver.test",
    }
    path = kubeconfig(tmp_path / "config", cluster, exec_user(script))
    assert "authorization" not in get_pod(str(path), tls_stub)


@pytest.mark.parametrize(
    ("body", "spec", "problem"),
    [
        ("sys.stderr.write('no login\\n'); sys.exit(3)", {}, "exited with status 3: no login"),
        ("print('not json')", {}, "is not JSON"),
        (
            "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1beta1',"
            " 'kind': 'ExecCredential', 'status': {'token': 't'}}))",
            {},
            "has apiVersion 'client.authentication.k8s.io/v1beta1', not "
            "client.authentication.k8s.io/v1",
        ),
        (
            "print(json.dumps({'apiVersion': info['apiVersion'], 'kind': 'ExecCredential',"
            " 'status': {}}))",
            {},
            "neither a token nor a client certificate",
        ),
        ("", {"interactiveMode": None}, "interactiveMode: required"),
        ("", {"interactiveMode": "Always"}, "Always needs a terminal"),
        ("", {"apiVersion": "client.authentication.k8s.io/v1alpha1"}, "is not one of"),
        (
            "",
            {"command": "overseer-no-such-plugin", "installHint": "install it from example.com"},
            "'overseer-no-such-plugin' not found (install it from example.com)",
        ),
    ],
)
def test_an_unusable_exec_plugin_is_a_config_error_saying_why(
    tmp_path: Path, body: str, spec: dict[str, Any], problem: str
) -> None:
    user = exec_user(plugin(tmp_path, body + "\n"))
    user["exec"].update(spec)
    user["exec"] = {k: v for k, v in user["exec"].items() if v is not None}
    path = kubeconfig(tmp_path / "config", {"server": "http://127.0.0.1:1"}, user)
    with pytest.raises(ConfigError) as info:
        load_kubeconfig(str(path))
    assert str(path) in str(info.value)
    assert "users[u].user.exec" in str(info.value)
    assert problem in str(info.value)


# -- proxies ------------------------------------------------------------------------------


def test_a_proxy_url_carries_the_requests(stub: StubApiServer, tmp_path: Path) -> None:
    """An http proxy gets the request with the absolute URL (the stub plays the proxy)."""
    path = kubeconfig(
        tmp_path / "config",
        {"server": "http://apiserver.invalid:6443", "proxy-url": stub.url},
        {"token": "t"},
    )
    stub.reply("GET", "/api/v1/namespaces/default/pods/a", Reply(body=pod("a")))
    with KubeClient.from_kubeconfig(str(path)) as client:
        assert client.get(PODS, "a", "default")["metadata"]["name"] == "a"
    (seen,) = stub.requests()
    assert seen.headers["host"] == "apiserver.invalid:6443"
    assert seen.headers["authorization"] == "Bearer t"


def test_environment_proxies_apply_except_to_loopback_and_no_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("https_proxy", "http_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    monkeypatch.setenv("NO_PROXY", ".internal,10.1.0.0/16,direct.example:443")
    assert _proxy_for("https://api.example:6443", None) == "http://proxy.corp:3128"
    assert _proxy_for("http://api.example:6443", None) is None  # no HTTP_PROXY
    for server in (
        "https://127.0.0.1:6443",
        "https://[::1]:6443",
        "https://localhost:6443",
        "https://kube.internal:6443",
        "https://10.1.2.3:443",
        "https://direct.example:443",
    ):
        assert _proxy_for(server, None) is None, server
    assert _proxy_for("https://127.0.0.1:6443", "socks5://p:1080") == "socks5://p:1080"


# -- in-cluster ---------------------------------------------------------------------------


def test_in_cluster_reads_the_service_account(tmp_path: Path, pki: Pki) -> None:
    (tmp_path / "token").write_text("sa-token")
    shutil.copy(pki.ca, tmp_path / "ca.crt")
    (tmp_path / "namespace").write_text("team-a")
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    config = load_in_cluster(env, str(tmp_path))
    assert config.server == "https://[fd00::1]:443"
    assert config.namespace == "team-a"
    assert config.ca_pem == pki.ca.read_bytes()
    assert config.credentials is not None
    assert config.credentials.authorization() == "Bearer sa-token"
    (tmp_path / "token").unlink()
    with pytest.raises(ConfigError, match=r"in-cluster configuration: token file .*cannot read"):
        load_in_cluster(env, str(tmp_path))
    with pytest.raises(ConfigError, match="not running in a pod"):
        load_in_cluster({}, str(tmp_path))


# -- several files ($KUBECONFIG) ----------------------------------------------------------


def test_several_files_merge_with_the_first_definition_of_each_name_winning(
    tmp_path: Path,
) -> None:
    """client-go's ``ClientConfigLoadingRules.Load`` of a precedence list: of clusters,
    users and contexts, the first file defining a name gives the whole entry; the
    current-context is the first one set."""
    a = config_file(
        tmp_path / "a",
        clusters={"shared": {"server": "http://127.0.0.1:1"}},
        users={"shared": {"token": "from-a"}},
        contexts={"ctx": {"cluster": "shared", "user": "shared", "namespace": "from-a"}},
        current="",  # empty: not set
    )
    b = config_file(
        tmp_path / "b",
        clusters={
            "shared": {"server": "http://127.0.0.1:2", "tls-server-name": "from-b"},
            "only-b": {"server": "http://127.0.0.1:3"},
        },
        users={"shared": {"token": "from-b"}},
        contexts={
            "ctx": {"cluster": "only-b", "user": "shared"},
            "other": {"cluster": "only-b", "user": "shared", "namespace": "from-b"},
        },
        current="ctx",
    )
    c = config_file(tmp_path / "c", current="other")
    files = [str(a), str(b), str(c)]
    config = load_kubeconfig(files)
    # b's current-context; a's context, cluster and user, with nothing of b's mixed in
    assert (config.server, config.namespace) == ("http://127.0.0.1:1", "from-a")
    assert config.tls_server_name is None
    assert authorization(config) == "Bearer from-a"
    assert config.source == f"kubeconfig {a}, context ctx"  # the file it all came from
    # A context of b: its cluster from b, its user from a, which came first.
    other = load_kubeconfig(files, "other")
    assert (other.server, other.namespace) == ("http://127.0.0.1:3", "from-b")
    assert authorization(other) == "Bearer from-a"
    assert other.source == f"kubeconfig {b}, {a}, context other"
    # In the other order: c's current-context, b's user.
    reverse = load_kubeconfig(files[::-1])
    assert (reverse.server, reverse.namespace) == ("http://127.0.0.1:3", "from-b")
    assert authorization(reverse) == "Bearer from-b"


@needs_openssl
def test_relative_paths_are_relative_to_the_file_that_defined_the_entry(
    tls_stub: StubApiServer, pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As client-go's ResolveLocalPaths: the CA file of the cluster next to the file of
    the cluster, the certificate, key, token file and exec command of the user next to
    the file of the user."""
    clusters, users = tmp_path / "clusters", tmp_path / "users"
    users.mkdir()
    shutil.copy(pki.other_ca, users / "ca.crt")  # the wrong CA, beside the wrong file
    shutil.copy(pki.client_cert, users / "me.crt")
    shutil.copy(pki.client_key, users / "me.key")
    (users / "token").write_text("from-users\n")
    script = plugin(
        users,
        """
        print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential",
            "status": {"token": "from-users-bin"}}))
        """,
    )
    (users / "bin").mkdir()
    (users / "bin" / "plugin").write_text(f"#!/bin/sh\nexec {sys.executable} {script}\n")
    (users / "bin" / "plugin").chmod(0o755)
    certificate = {"client-certificate": "me.crt", "client-key": "me.key"}
    first = config_file(
        clusters / "config",
        clusters={
            "c": {"server": tls_url(tls_stub), "certificate-authority": "ca.crt",
                  "tls-server-name": "apiserver.test"},
        },
        contexts={"file": {"cluster": "c", "user": "file"},
                  "exec": {"cluster": "c", "user": "exec"}},
        current="file",
    )  # fmt: skip
    shutil.copy(pki.ca, clusters / "ca.crt")
    second = config_file(
        users / "config",
        users={
            "file": {**certificate, "tokenFile": "token"},
            "exec": {**certificate, **exec_user(script, command="./bin/plugin", args=[])},
        },
    )
    monkeypatch.chdir(tmp_path)  # neither file's directory
    files = [str(first), str(second)]
    assert get_pod(load_kubeconfig(files), tls_stub)["authorization"] == "Bearer from-users"
    exec_config = load_kubeconfig(files, "exec")
    assert get_pod(exec_config, tls_stub)["authorization"] == "Bearer from-users-bin"


def test_missing_files_of_a_list_are_skipped_but_one_must_exist(tmp_path: Path) -> None:
    present = kubeconfig(tmp_path / "present", {"server": "http://127.0.0.1:1"}, {"token": "t"})
    gone, also_gone = tmp_path / "gone", tmp_path / "no-such-dir" / "config"
    config = load_kubeconfig([str(gone), str(present), str(also_gone)])
    assert config.server == "http://127.0.0.1:1"
    assert config.source == f"kubeconfig {present}, context x"
    with pytest.raises(ConfigError) as info:
        load_kubeconfig([str(gone), str(also_gone)])
    assert str(gone) in str(info.value)
    assert str(also_gone) in str(info.value)
    # An explicit kubeconfig (a path, not a list) is one file, which must exist.
    with pytest.raises(ConfigError) as info:
        load_kubeconfig(str(gone))
    assert str(info.value) == f"kubeconfig {gone}: no such file"


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("clusters: [\n", "not valid YAML"),
        ("just a string\n", "expected a YAML mapping"),
        ("users: {u: {token: t}}\n", "users: not a list"),
        (None, "cannot read"),  # a directory
    ],
)
def test_a_file_of_a_list_that_cannot_be_read_is_an_error_naming_it(
    tmp_path: Path, content: str | None, problem: str
) -> None:
    """Even after a file that says everything needed: client-go's Load fails too."""
    good = kubeconfig(tmp_path / "good", {"server": "http://127.0.0.1:1"}, {"token": "t"})
    bad = tmp_path / "bad"
    if content is None:
        bad.mkdir()
    else:
        bad.write_text(content)
    with pytest.raises(ConfigError) as info:
        load_kubeconfig([str(good), str(bad)])
    assert str(info.value).startswith(f"kubeconfig {bad}: ")
    assert problem in str(info.value)


def test_an_unusable_entry_is_an_error_naming_the_file_that_defined_it(tmp_path: Path) -> None:
    first = config_file(
        tmp_path / "first",
        clusters={"c": {"server": "http://127.0.0.1:1"}},
        contexts={"x": {"cluster": "c", "user": "u"}, "no-server": {"cluster": "d"}},
        current="x",
    )
    second = config_file(
        tmp_path / "second" / "config",
        users={"u": {"client-certificate": "me.crt", "client-key-data": "a2V5"}},
        clusters={"d": {"insecure-skip-tls-verify": True}},
    )
    files = [str(first), str(second)]
    with pytest.raises(ConfigError) as info:
        load_kubeconfig(files)
    missing = tmp_path / "second" / "me.crt"
    assert str(info.value).startswith(
        f"kubeconfig {second}: users[u].user.client-certificate: {missing}: cannot read"
    )
    with pytest.raises(ConfigError) as info:
        load_kubeconfig(files, "no-server")
    assert str(info.value) == f"kubeconfig {second}: cluster 'd': server is not set"
    # What no file has: every file read is named.
    with pytest.raises(ConfigError) as info:
        load_kubeconfig([*files, str(tmp_path / "missing")], "nope")
    assert str(info.value) == (
        f"kubeconfig {first}, {second}: context 'nope' not found (contexts: x, no-server)"
    )


# -- impersonation ------------------------------------------------------------------------


def test_impersonation_is_read_from_the_user(tmp_path: Path) -> None:
    user = {
        "token": "s3cret",
        "as": "jane",
        "as-uid": "1234",
        "as-groups": ["dev", "ops"],
        "as-user-extra": {"reason": ["on call"], "scopes": ["read", "write"]},
    }
    path = kubeconfig(tmp_path / "config", {"server": "http://127.0.0.1:1"}, user)
    config = load_kubeconfig(str(path))
    assert config.impersonation == Impersonation(
        user="jane",
        uid="1234",
        groups=("dev", "ops"),
        extra=(("reason", ("on call",)), ("scopes", ("read", "write"))),  # in file order
    )
    assert "jane" in repr(config)  # whom a client acts as is no secret
    assert "s3cret" not in repr(config)
    plain = kubeconfig(tmp_path / "plain", {"server": "http://127.0.0.1:1"}, {"as": ""})
    assert load_kubeconfig(str(plain)).impersonation is None


@pytest.mark.parametrize(
    ("user", "problem"),
    [
        ({"as-groups": ["dev"]}, "requesting uid, groups or user-extra for 'u' without"),
        ({"as-uid": "1"}, "requesting uid, groups or user-extra for 'u' without"),
        ({"as-user-extra": {"k": ["v"]}}, "requesting uid, groups or user-extra for 'u' without"),
        ({"as": "", "as-groups": ["dev"]}, "without impersonating a user"),
        ({"as": "jane", "as-groups": "dev"}, "as-groups: must be a list of strings"),
        ({"as": "jane", "as-user-extra": {"k": "v"}}, "as-user-extra.k: must be a list of strings"),
        ({"as": "jane", "as-user-extra": ["k"]}, "as-user-extra: must be a mapping"),
        ({"as": 7}, "as: must be a string"),
        ({"as": "jane\r\nX-Evil: 1"}, "as: 'jane\\r\\nX-Evil: 1' has a control character"),
    ],
)
def test_unusable_impersonation_is_a_config_error_naming_the_user(
    tmp_path: Path, user: dict[str, Any], problem: str
) -> None:
    """As client-go refuses it (groups, uid or extra without ``as``), or as Go's HTTP
    client would refuse to send it (a control character in a header)."""
    path = kubeconfig(tmp_path / "config", {"server": "http://127.0.0.1:1"}, {"token": "t", **user})
    with pytest.raises(ConfigError) as info:
        load_kubeconfig(str(path))
    assert str(info.value).startswith(f"kubeconfig {path}: users[u].user")
    assert problem in str(info.value)


# -- the kubernetes package: only for legacy auth-providers --------------------------------


def oidc_user() -> tuple[dict[str, Any], str]:
    """A legacy ``auth-provider: oidc`` user whose id token has not expired; the token."""

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    id_token = ".".join(
        [part({"alg": "none"}), part({"iss": "https://idp", "exp": 32503680000}), "sig"]
    )
    user = {
        "auth-provider": {
            "name": "oidc",
            "config": {
                "client-id": "overseer",
                "id-token": id_token,
                "idp-issuer-url": "https://idp",
            },
        }
    }
    return user, id_token


def test_an_auth_provider_user_goes_through_the_kubernetes_package(
    stub: StubApiServer, tmp_path: Path
) -> None:
    user, id_token = oidc_user()
    path = kubeconfig(tmp_path / "config", {"server": stub.url}, user)
    assert get_pod(str(path), stub)["authorization"] == f"Bearer {id_token}"


@pytest.mark.parametrize("route", ["auth-provider", "OVERSEER_KUBECONFIG_LOADER"])
def test_the_kubernetes_package_merges_a_list_the_same_way(
    stub: StubApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, route: str
) -> None:
    """Its ``KubeConfigMerger`` is given the files read: the first definition of a name
    wins there too. Impersonation, which it does not read, is added here."""
    if route == "auth-provider":
        user, token = oidc_user()
    else:
        user, token = {"token": "from-first"}, "from-first"
        monkeypatch.setenv("OVERSEER_KUBECONFIG_LOADER", "kubernetes")
    first = config_file(
        tmp_path / "first",
        users={"u": {**user, "as": "jane", "as-groups": ["dev"]}},
        contexts={"x": {"cluster": "c", "user": "u", "namespace": "ns"}},
        current="x",
    )
    second = config_file(
        tmp_path / "second",
        clusters={"c": {"server": stub.url}},
        users={"u": {"token": "from-second"}},
        contexts={"y": {"cluster": "c", "user": "u"}},
        current="y",
    )
    config = load_kubeconfig([str(first), str(tmp_path / "missing"), str(second)])
    assert config.source == (
        f"kubeconfig {first}, {second}, context x (cluster c), through the kubernetes package"
    )
    assert config.namespace == "ns"
    headers = get_pod(config, stub)
    assert headers["authorization"] == f"Bearer {token}"
    assert (headers["impersonate-user"], headers["impersonate-group"]) == ("jane", "dev")


def test_the_kubernetes_package_loader_can_be_asked_for(
    stub: StubApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OVERSEER_KUBECONFIG_LOADER=kubernetes: the escape hatch for a kubeconfig feature
    Overseer's loader does not read."""
    path = kubeconfig(tmp_path / "config", {"server": stub.url}, {"token": "t"}, namespace="ns")
    monkeypatch.setenv("OVERSEER_KUBECONFIG_LOADER", "kubernetes")
    config = load_kubeconfig(str(path))
    assert "through the kubernetes package" in config.source
    assert config.namespace == "ns"
    assert get_pod(config, stub)["authorization"] == "Bearer t"


def test_the_client_does_not_import_the_kubernetes_package() -> None:
    """What a replica imports (the CLI, the client, the controllers) leaves the
    ``kubernetes`` package out: its import alone is about 20 MiB of RSS."""
    code = (
        "import sys, manager.cli, manager.client, manager.testing, controllers.exposer, "
        "controllers.podport\n"
        "print(sorted(m for m in sys.modules if m == 'kubernetes' or m.startswith('kubernetes.')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_configuration_shown_in_a_log_shows_no_secret(tmp_path: Path) -> None:
    path = kubeconfig(
        tmp_path / "config",
        {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True},
        {"token": "s3cret-token", "client-key-data": base64.b64encode(b"KEY-BYTES").decode(),
         "client-certificate-data": base64.b64encode(b"CERT").decode()},
    )  # fmt: skip
    shown = repr(load_kubeconfig(str(path)))
    assert "https://127.0.0.1:1" in shown
    assert "s3cret-token" not in shown
    assert "KEY-BYTES" not in shown
    basic = kubeconfig(
        tmp_path / "b", {"server": "http://x:1"}, {"username": "u", "password": "pw1"}
    )
    credentials = load_kubeconfig(str(basic)).credentials
    assert "pw1" not in repr(credentials)
