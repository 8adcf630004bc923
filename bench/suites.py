"""Every module that registers benchmarks; importing this fills the registry in order."""

from __future__ import annotations

from bench import (
    apiserver,
    exposer,
    exposure,
    failover,
    fleet,
    informers,
    podport,
    portburst,
    sharding,
    steady,
    webhooks,
)

__all__ = [
    "apiserver",
    "exposer",
    "exposure",
    "failover",
    "fleet",
    "informers",
    "podport",
    "portburst",
    "sharding",
    "steady",
    "webhooks",
]
