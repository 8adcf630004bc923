"""The benchmark registry: ``@benchmark("name")`` functions returning a dict of metrics.

A benchmark function takes a :class:`Run` (the target, the run index, a scratch
directory) and returns ``{metric: number}`` for one run. The harness calls it ``runs``
times and reports median/min/max per metric. ``describe`` is the Markdown paragraph
that opens the benchmark's section in RESULTS.md; ``ratios`` lists (label, numerator
metric, denominator metric, better) rows computed from medians, to compare Overseer with
a peer; ``goals`` lists (metric, op, value) targets shown next to the figures.

Add a benchmark by writing a module in ``bench/`` that uses the decorator and importing
it in :mod:`bench.suites`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.target import Target

Metrics = dict[str, float]


@dataclass
class Run:
    """What one run of a benchmark gets."""

    target: Target  # (None for a benchmark registered with target=False)
    index: int  # 0-based run number
    runs: int  # total runs of this benchmark
    scratch: Path  # a directory for this run's files
    state: dict[str, Any]  # survives between the runs of one benchmark (shared fixtures)


@dataclass(frozen=True)
class Ratio:
    """A row ``label = median(numerator) / median(denominator)``."""

    label: str
    numerator: str
    denominator: str
    target: str = ""  # e.g. ">= 5" or "<= 0.35", shown as written


@dataclass(frozen=True)
class Goal:
    """A goal for one metric: ``metric op value`` (op is ">=" or "<=")."""

    metric: str
    op: str
    value: float


@dataclass
class Benchmark:
    name: str
    func: Callable[[Run], Metrics]
    describe: str
    units: dict[str, str] = field(default_factory=dict)
    ratios: list[Ratio] = field(default_factory=list)
    goals: list[Goal] = field(default_factory=list)
    setup: Callable[[Run], None] | None = None  # once, before the first run
    target: bool = True  # needs an API server (False: the harness starts none for it)


BENCHMARKS: dict[str, Benchmark] = {}


def benchmark(
    name: str,
    *,
    describe: str,
    units: dict[str, str] | None = None,
    ratios: list[Ratio] | None = None,
    goals: list[Goal] | None = None,
    target: bool = True,
) -> Callable[[Callable[[Run], Metrics]], Callable[[Run], Metrics]]:
    """Register ``func`` as benchmark ``name`` (names are unique); ``target=False``: it
    talks to no API server (the harness starts none for it alone)."""

    def register(func: Callable[[Run], Metrics]) -> Callable[[Run], Metrics]:
        if name in BENCHMARKS:
            raise ValueError(f"benchmark {name!r} registered twice")
        BENCHMARKS[name] = Benchmark(
            name,
            func,
            describe.strip(),
            dict(units or {}),
            list(ratios or []),
            list(goals or []),
            target=target,
        )
        return func

    return register


def setup(name: str) -> Callable[[Callable[[Run], None]], Callable[[Run], None]]:
    """Register a once-per-session fixture for benchmark ``name`` (after it is declared)."""

    def register(func: Callable[[Run], None]) -> Callable[[Run], None]:
        BENCHMARKS[name].setup = func
        return func

    return register
