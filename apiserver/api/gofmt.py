"""Values rendered the way Go's ``fmt`` package prints them.

kube-apiserver builds its error messages with Go's ``fmt`` and ``encoding/json``
(``field.Error`` prints a bad string with ``%q`` and, since 1.34, any other composite
value as ``json.Marshal`` writes it; ``NewInvalid`` quotes the object's name with ``%q``), and the
local API server must send the same bytes, because clients and tests compare messages.
The renderers that more than one module of :mod:`apiserver` needs live here; those
only one module uses stay beside it.

Thread-safety: pure functions; safe to share between threads.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

__all__ = ["go_json", "quote"]


def quote(s: str) -> str:
    """Go's ``%q`` (``strconv.Quote``) of a string."""
    out = ['"']
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


_JSON_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\b": "\\b",
    "\f": "\\f",
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def _json_string(s: str) -> str:
    """A string as ``encoding/json`` writes it (HTML-safe: ``<``, ``>``, ``&`` escaped)."""
    out = ['"']
    for ch in s:
        escaped = _JSON_ESCAPES.get(ch)
        if escaped is not None:
            out.append(escaped)
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _json_float(f: float) -> str:
    """A ``float64`` as ``encoding/json`` writes it: shortest digits, an exponent only
    below 1e-6 or from 1e21 (``1e-7``, not ``1e-07``)."""
    if math.isinf(f) or math.isnan(f):
        raise ValueError(f"json: unsupported value: {f}")
    magnitude = abs(f)
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        mantissa, _, exponent = repr(f).partition("e")
        sign, digits = exponent[0], exponent[1:].lstrip("0") or "0"
        return f"{mantissa}e{sign}{digits}"
    if f.is_integer():
        return str(int(f))
    return format(Decimal(repr(f)), "f")


def go_json(value: Any) -> str:
    """``json.Marshal`` of a value decoded from JSON (``map[string]interface{}``,
    ``[]interface{}``, ...): compact, map keys sorted, HTML-safe strings."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _json_float(value)
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, Mapping):
        inner = ",".join(
            f"{_json_string(str(k))}:{go_json(value[k])}" for k in sorted(value, key=str)
        )
        return "{" + inner + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    return _json_string(str(value))
