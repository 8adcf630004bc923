"""Every module that registers benchmarks; importing this fills the registry in order."""

from __future__ import annotations

from bench import apiserver, informers

__all__ = ["apiserver", "informers"]
