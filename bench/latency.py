"""Latency percentiles: nearest-rank, on the raw samples (no interpolation, no binning).

Thread-safe: pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0 < q <= 100) by nearest rank; NaN for no samples."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def summary_ms(samples: Sequence[float], prefix: str) -> dict[str, float]:
    """``{prefix}_p50_ms``, ``_p95_ms``, ``_p99_ms`` of ``samples`` given in seconds."""
    return {f"{prefix}_p{q}_ms": 1000 * percentile(samples, q) for q in (50, 95, 99)}
