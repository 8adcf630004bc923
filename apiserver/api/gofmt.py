"""Values rendered the way Go's ``fmt`` package prints them.

kube-apiserver builds its error messages with Go's ``fmt`` (``field.Error`` prints a bad
value with ``%q`` or ``%#v``, ``NewInvalid`` quotes the object's name with ``%q``), and the
local API server must send the same bytes, because clients and tests compare messages.
The renderers that more than one module of :mod:`apiserver` needs live here; those
only one module uses stay beside it.

Thread-safety: pure functions; safe to share between threads.
"""

from __future__ import annotations

__all__ = ["quote"]


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
