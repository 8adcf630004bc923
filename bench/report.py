"""Reports: ``bench/out/results.json`` (every run's figures) and ``bench/RESULTS.md``.

RESULTS.md has a header (machine, versions, notes) followed by one section per benchmark
between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->`` markers. Running some
benchmarks rewrites the header and their sections and keeps the other sections as they
were, so each benchmark's figures say when and how they were measured.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import re
import statistics
import sys
from pathlib import Path
from typing import Any

from bench.registry import Benchmark, Metrics

HEADER_END = "<!-- /bench:header -->"


def environment(command: str, target: str) -> dict[str, Any]:
    """Date, machine, versions and the command line of this session."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for package in ("kube-overseer", "kubernetes", "orjson", "urllib3"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {
            "nproc": os.cpu_count(),
            "cpu": cpu,
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "versions": versions,
        "command": command,
        "target": target,
        "executable": sys.executable,
    }


def summarize(runs: list[Metrics]) -> dict[str, dict[str, float]]:
    """median/min/max of every metric over the runs."""
    keys = [k for k in runs[0]] if runs else []
    return {
        k: {
            "median": statistics.median(r[k] for r in runs),
            "min": min(r[k] for r in runs),
            "max": max(r[k] for r in runs),
        }
        for k in keys
    }


def _fmt(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _goal_cell(bench: Benchmark, metric: str, median: float) -> str:
    cells = []
    for goal in bench.goals:
        if goal.metric == metric:
            ok = median >= goal.value if goal.op == ">=" else median <= goal.value
            cells.append(f"{goal.op} {_fmt(goal.value)} {'✅' if ok else '❌'}")
    return ", ".join(cells)


def section(bench: Benchmark, entry: dict[str, Any], env: dict[str, Any]) -> str:
    """The Markdown section of one benchmark."""
    lines = [f"<!-- bench:{bench.name} -->", f"## {bench.name}", "", bench.describe, ""]
    lines.append(f"Measured {env['date']} on {env['target']}, {len(entry['runs'])} runs.")
    lines.append("")
    if entry.get("error"):
        lines += [f"**Failed**: `{entry['error']}`", ""]
    setup_facts = entry.get("setup")
    if setup_facts:
        facts = ", ".join(f"{k} {v}" for k, v in setup_facts.items())
        lines += [f"Setup: {facts}.", ""]
    summary = entry.get("summary") or {}
    if summary:
        lines += ["| metric | median | min | max | unit | target |", "|---|---:|---:|---:|---|---|"]
        for metric, s in summary.items():
            unit = bench.units.get(metric, "")
            goal = _goal_cell(bench, metric, s["median"])
            lines.append(
                f"| {metric} | **{_fmt(s['median'])}** | {_fmt(s['min'])} | {_fmt(s['max'])} "
                f"| {unit} | {goal} |"
            )
        lines.append("")
    ratios = [r for r in bench.ratios if r.numerator in summary and r.denominator in summary]
    if ratios:
        lines += ["| ratio (of medians) | value | target |", "|---|---:|---|"]
        for r in ratios:
            den = summary[r.denominator]["median"]
            value = summary[r.numerator]["median"] / den if den else float("nan")
            verdict = ""
            if r.target:
                op, bound = r.target.split()
                ok = value >= float(bound) if op == ">=" else value <= float(bound)
                verdict = f"{r.target} {'✅' if ok else '❌'}"
            lines.append(f"| {r.label} | **{value:.2f}** | {verdict} |")
        lines.append("")
    lines += _requests_table(entry.get("requests") or {})
    lines.append(f"<!-- /bench:{bench.name} -->")
    return "\n".join(lines)


def _requests_table(requests: dict[str, dict[str, list[float]]]) -> list[str]:
    """API requests per handled object by verb and resource: one column per subject,
    the median over the runs (``-``: none)."""
    if not requests:
        return []
    subjects = list(requests)
    rows = sorted({what for table in requests.values() for what in table})
    lines = [
        "API requests per handled object (median of the runs), by verb and resource:",
        "",
        "| request | " + " | ".join(subjects) + " |",
        "|---|" + "---:|" * len(subjects),
    ]
    for what in rows:
        cells = []
        for subject in subjects:
            values = requests[subject].get(what)
            cells.append(f"{statistics.median(values):.2f}" if values else "-")
        lines.append(f"| {what} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def header(env: dict[str, Any], notes: list[str]) -> str:
    m = env["machine"]
    v = env["versions"]
    lines = [
        "# Benchmark results",
        "",
        "Generated by `python -m bench` (see `bench/__init__.py`); do not edit by hand:",
        "sections are rewritten when their benchmark runs. Figures are medians of the runs",
        "with min and max; compare ratios rather than absolute times.",
        "",
        f"- Last run: {env['date']}: `{env['command']}`",
        f"- Machine: {m['nproc']} CPUs ({m['cpu']}), Python {m['python']}, {m['platform']}",
        "- Packages: " + ", ".join(f"{k} {val}" for k, val in v.items()),
        f"- Target: {env['target']}",
    ]
    lines += [f"- {n}" for n in notes]
    lines += ["", HEADER_END]
    return "\n".join(lines)


def write_markdown(path: Path, head: str, sections: dict[str, str], order: list[str]) -> None:
    """Rewrite the header and the given sections of ``path``; keep the others; sections
    in ``order`` (registry order) first."""
    old = path.read_text() if path.exists() else ""
    kept: dict[str, str] = {}
    for match in re.finditer(r"<!-- bench:([\w-]+) -->.*?<!-- /bench:\1 -->", old, re.S):
        kept[match.group(1)] = match.group(0)
    kept.update(sections)
    names = [n for n in order if n in kept] + [n for n in kept if n not in order]
    body = "\n\n".join(kept[name] for name in names)
    path.write_text(head + "\n\n" + body + "\n")
