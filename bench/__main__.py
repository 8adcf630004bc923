"""``python -m bench <name>|all [--kubeconfig PATH] [--runs 3] [--out bench/out]``.

Without ``--kubeconfig`` the target is the local API server started in its own process
(:func:`bench.target.local_server`); with it, any cluster (benchmarks work in fresh
namespaces and delete them). Each benchmark runs ``--runs`` times; the figures go to
``<out>/results.json`` and the Markdown table to ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import orjson

from bench import report, suites
from bench.registry import BENCHMARKS, Run
from bench.target import Target, local_server, remote

RESULTS_MD = Path(__file__).parent / "RESULTS.md"
NOTES = [
    "The machine has 2 cores shared by the API server process, the subject process and "
    "the write generator: every figure includes that contention, and absolute numbers "
    "are noisy.",
]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("name", help=f"one of: all, {', '.join(BENCHMARKS)}")
    parser.add_argument("--kubeconfig", help="run against this cluster instead")
    parser.add_argument("--runs", type=int, default=3, help="runs per benchmark (default 3)")
    parser.add_argument("--out", default="bench/out", help="directory for results.json")
    parser.add_argument(
        "--no-markdown", action="store_true", help="do not rewrite bench/RESULTS.md"
    )
    parser.add_argument(
        "--rerender",
        action="store_true",
        help="run nothing: rewrite bench/RESULTS.md from <out>/results.json",
    )
    return parser


def _run_one(name: str, target: Target, runs: int, scratch: Path) -> dict[str, Any]:
    bench = BENCHMARKS[name]
    state: dict[str, Any] = {}
    entry: dict[str, Any] = {"runs": []}
    started = time.monotonic()
    try:
        if bench.setup is not None:
            print(f"[{name}] setup", flush=True)
            bench.setup(Run(target, -1, runs, scratch, state))
            if "setup" in state:
                entry["setup"] = state["setup"]
        for index in range(runs):
            metrics = bench.func(Run(target, index, runs, scratch, state))
            entry["runs"].append(metrics)
            shown = ", ".join(f"{k}={v:.4g}" for k, v in metrics.items())
            print(f"[{name}] run {index + 1}/{runs}: {shown}", flush=True)
    except Exception as exc:
        traceback.print_exc()
        entry["error"] = f"{type(exc).__name__}: {exc}"
    if "requests" in state:  # API requests per object by verb and resource, per subject
        entry["requests"] = state["requests"]
    entry["summary"] = report.summarize(entry["runs"])
    entry["seconds"] = round(time.monotonic() - started, 1)
    print(f"[{name}] done in {entry['seconds']}s", flush=True)
    return entry


def _rerender(path: Path, names: list[str]) -> int:
    results = orjson.loads(path.read_bytes())
    env = {k: v for k, v in results.items() if k != "benchmarks"}
    notes = list(NOTES)
    sections = {
        name: report.section(BENCHMARKS[name], results["benchmarks"][name], env)
        for name in names
        if name in results["benchmarks"]
    }
    report.write_markdown(RESULTS_MD, report.header(env, notes), sections, list(BENCHMARKS))
    print(f"rewrote {RESULTS_MD} from {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.name != "all" and args.name not in BENCHMARKS:
        print(f"unknown benchmark {args.name!r}; known: {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    if args.runs < 1:
        print("--runs must be at least 1", file=sys.stderr)
        return 2
    assert suites.__all__  # imported for its registrations
    names = list(BENCHMARKS) if args.name == "all" else [args.name]
    if args.rerender:
        return _rerender(Path(args.out) / "results.json", names)
    command = "python -m bench " + shlex.join(sys.argv[1:] if argv is None else argv)
    context: contextlib.AbstractContextManager[Any]
    if not any(BENCHMARKS[name].target for name in names):
        where = "no API server (the benchmark's own processes)"
        notes = list(NOTES)
        context = contextlib.nullcontext(None)
    elif args.kubeconfig:
        where = f"the cluster of {args.kubeconfig}"
        notes = list(NOTES)
        context = remote(args.kubeconfig)
    else:
        where = "the local API server in its own process"
        notes = list(NOTES)
        context = local_server()
    env = report.environment(command, where)
    results: dict[str, Any] = {**env, "benchmarks": {}}
    failed = False
    with tempfile.TemporaryDirectory(prefix="overseer-bench-run-") as tmp, context as target:
        for name in names:
            entry = _run_one(name, target, args.runs, Path(tmp))
            results["benchmarks"][name] = entry
            failed = failed or bool(entry.get("error"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_bytes(
        orjson.dumps(results, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    )
    if not args.no_markdown:
        sections = {
            name: report.section(BENCHMARKS[name], results["benchmarks"][name], env)
            for name in names
        }
        report.write_markdown(RESULTS_MD, report.header(env, notes), sections, list(BENCHMARKS))
    print(f"wrote {out / 'results.json'}" + ("" if args.no_markdown else f" and {RESULTS_MD}"))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
