"""A bare urllib3 client for the API server: raw JSON bytes, keep-alive, no retries.

The benchmarks drive and observe the server with it, so that what is measured is the
server (or the informer under test), not a client library. Authentication and TLS come
from the kubeconfig through ``kubernetes.client.Configuration`` (the local server needs
neither).

Thread-safe: the urllib3 pool is.
"""

from __future__ import annotations

from typing import Any

import orjson
import urllib3


class RawClient:
    """HTTP to one API server with the kubeconfig's credentials."""

    def __init__(self, kubeconfig: str, *, pool_size: int = 8) -> None:
        from kubernetes import client, config

        cfg = client.Configuration()
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
        self.host = str(cfg.host).rstrip("/")
        self.headers: dict[str, str] = {"Accept": "application/json"}
        token = cfg.get_api_key_with_prefix("authorization")
        if token:
            self.headers["Authorization"] = token
        kwargs: dict[str, Any] = {"maxsize": pool_size, "retries": False}
        if self.host.startswith("https"):
            kwargs["cert_reqs"] = "CERT_REQUIRED" if cfg.verify_ssl else "CERT_NONE"
            if cfg.ssl_ca_cert:
                kwargs["ca_certs"] = cfg.ssl_ca_cert
            if cfg.cert_file:
                kwargs["cert_file"] = cfg.cert_file
            if cfg.key_file:
                kwargs["key_file"] = cfg.key_file
        self.pool = urllib3.PoolManager(**kwargs)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        timeout: float = 60.0,
        ok: tuple[int, ...] = (200, 201, 202),
    ) -> bytes:
        """One request; returns the body bytes, raises RuntimeError on another status."""
        headers = dict(self.headers)
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else orjson.dumps(body)
            headers["Content-Type"] = content_type
        resp = self.pool.request(
            method, self.host + path, body=data, headers=headers, timeout=timeout, retries=False
        )
        if resp.status not in ok:
            raise RuntimeError(f"{method} {path}: HTTP {resp.status}: {resp.data[:300]!r}")
        return resp.data

    def json(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        return orjson.loads(self.request(method, path, body, **kwargs))

    def stream(self, path: str, *, read_timeout: float = 30.0) -> urllib3.BaseHTTPResponse:
        """Open a streaming GET (a watch); the caller reads and releases it."""
        resp = self.pool.request(
            "GET",
            self.host + path,
            headers=self.headers,
            preload_content=False,
            timeout=urllib3.Timeout(connect=10.0, read=read_timeout),
            retries=False,
        )
        if resp.status != 200:
            data = resp.read()
            resp.release_conn()
            raise RuntimeError(f"GET {path}: HTTP {resp.status}: {data[:300]!r}")
        return resp

    def close(self) -> None:
        self.pool.clear()
