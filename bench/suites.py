"""Every module that registers benchmarks; importing this fills the registry in order."""

from __future__ import annotations

from bench import apiserver, exposer, informers, podport

__all__ = ["apiserver", "exposer", "informers", "podport"]
