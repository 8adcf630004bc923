"""Overseer's benchmarks (DESIGN.md §6): ``python -m bench <name>|all``.

Performance is measured here, never asserted in tests. Each benchmark is a function
registered with :func:`bench.registry.benchmark`; it gets a :class:`bench.target.Target`
(the local API server in its own process, or a cluster from a kubeconfig) and returns a
dict of metrics for one run. The harness runs it several times and writes
``bench/out/results.json`` and ``bench/RESULTS.md``.
"""
