"""``sampan bench [SUITE] [--quick]``."""
from __future__ import annotations

import importlib
import json
import sys


def add_parser(sub) -> None:
    from sampan.bench import SUITES

    p = sub.add_parser("bench", help="side-by-side benchmarks (ratios measured in one run)",
                       description="Suites: " + "; ".join(f"{k}: {v}" for k, v in SUITES.items()))
    p.add_argument("suite", nargs="?", choices=sorted(SUITES), help="one suite (default: all)")
    p.add_argument("--quick", action="store_true", help="fewer repeats, for a smoke run")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")


def run(args) -> int:
    from sampan.bench import SUITES

    suites = [args.suite] if args.suite else list(SUITES)
    results = {}
    for suite in suites:
        try:
            mod = importlib.import_module(f"sampan.bench.{suite}")
        except ModuleNotFoundError as exc:
            if exc.name == f"sampan.bench.{suite}":
                print(f"sampan bench {suite}: not available in this version.", file=sys.stderr)
                continue
            raise
        results[suite] = mod.run(quick=args.quick)
    if args.json:
        from sampan.utils.io import atomic_write_json

        atomic_write_json(args.json, results)
    return 0
