"""Overseer: a Kubernetes controller manager in Python.

This module is the public API: controllers (built-in and third-party) import from
``manager`` only. Internal modules may change without notice.
"""

from __future__ import annotations

from manager.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    TerminalError,
    TooManyRequests,
    Unavailable,
)
from manager.resources import Resource

__all__ = [
    "AlreadyExists",
    "ApiError",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "NotFound",
    "Resource",
    "ServerError",
    "TerminalError",
    "TooManyRequests",
    "Unavailable",
]

__version__ = "0.1.0"
