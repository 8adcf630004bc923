"""Feature gates of the local API server, as kube-apiserver's ``--feature-gates`` takes
them (component-base ``featuregate``): ``Name=true,Other=false``.

Known gates and their defaults (as in kube-apiserver 1.36):

* ``ShardedListAndWatch`` (alpha, off): lists and watches honour ``shardSelector``
  (:mod:`apiserver.storage.shardselector`); off, the parameter is ignored.

Thread-safe: pure functions; a server's gates are fixed when it is made.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = [
    "DEFAULT_FEATURE_GATES",
    "SHARDED_LIST_AND_WATCH",
    "feature_gates",
    "parse_feature_gates",
]

SHARDED_LIST_AND_WATCH: Final = "ShardedListAndWatch"
DEFAULT_FEATURE_GATES: Final[Mapping[str, bool]] = {SHARDED_LIST_AND_WATCH: False}


def feature_gates(overrides: Mapping[str, bool] | None = None) -> dict[str, bool]:
    """The defaults with ``overrides`` applied.

    Raises:
        ValueError: an unknown gate, or a value that is not a bool.
    """
    gates = dict(DEFAULT_FEATURE_GATES)
    for name, value in (overrides or {}).items():
        if name not in gates:
            known = ", ".join(sorted(gates))
            raise ValueError(f"unrecognized feature gate: {name} (known: {known})")
        if not isinstance(value, bool):
            raise ValueError(f"feature gate {name}: expected true or false, got {value!r}")
        gates[name] = value
    return gates


def parse_feature_gates(text: str) -> dict[str, bool]:
    """``Name=true,Other=false`` (kube's flag syntax; blanks around items ignored) as a
    mapping; checked like :func:`feature_gates`.

    Raises:
        ValueError: a malformed item, a value other than true/false, an unknown gate.
    """
    out: dict[str, bool] = {}
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name:
            raise ValueError(f"missing bool value for {name or item!r} in --feature-gates")
        lowered = value.lower()
        if lowered not in ("true", "false", "1", "0", "t", "f"):
            raise ValueError(f"invalid value of {name}={value}, err: not a bool")
        out[name] = lowered in ("true", "1", "t")
    feature_gates(out)
    return out
