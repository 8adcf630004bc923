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

__all__ = ["go_json", "go_v", "quote"]


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


def _go_float_v(f: float) -> str:
    """``%v`` of a ``float64``: ``%g`` with the shortest digits, an exponent (two digits
    at least) from 1e+06 or below 1e-4."""
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if math.isnan(f):
        return "NaN"
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    sign, raw_digits, exponent = Decimal(repr(f)).as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, raw_digits))
    point = len(digits) + exponent  # where the decimal point falls in `digits`
    digits = digits.rstrip("0")
    neg = "-" if sign else ""
    x = point - 1
    if x < -4 or x >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{neg}{mantissa}e{'-' if x < 0 else '+'}{abs(x):02d}"
    if point <= 0:
        return f"{neg}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{neg}{digits}{'0' * (point - len(digits))}"
    return f"{neg}{digits[:point]}.{digits[point:]}"


def go_v(value: Any) -> str:
    """Go's ``%v`` (and ``%+v``) of a value decoded from JSON into ``interface{}``:
    ``map[a:1 b:[x y]]``, numbers as ``float64``, ``<nil>`` for null."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _go_float_v(float(value))
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return "map[" + " ".join(f"{k}:{go_v(value[k])}" for k in sorted(value, key=str)) + "]"
    if isinstance(value, list | tuple):
        return "[" + " ".join(go_v(v) for v in value) + "]"
    return str(value)
