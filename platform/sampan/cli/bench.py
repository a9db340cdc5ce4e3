"""``sampan bench [SUITE] [--quick]``."""
from __future__ import annotations

import importlib
import sys


def add_parser(sub) -> None:
    from sampan.bench import SUITES

    p = sub.add_parser("bench", help="side-by-side benchmarks (ratios measured in one run)",
                       description="Suites: " + "; ".join(f"{k}: {v}" for k, v in SUITES.items()))
    p.add_argument("suite", nargs="?", choices=sorted(SUITES), help="one suite (default: all)")
    p.add_argument("--quick", action="store_true", help="fewer repeats, for a smoke run")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")


def _suite(name: str):
    from sampan.bench import SUITE_MODULES

    module = SUITE_MODULES[name]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module.split(".")[0]:  # the suite's package itself is missing, not one of its imports
            raise
        raise SystemExit(f"sampan bench {name} needs the `{exc.name}` package, which is not installed here. "
                         f"HINT: install Sampan with its widgets (pip install -e .), or run another suite.") from exc


def _json_problem(file: str | None) -> str | None:
    from pathlib import Path

    from sampan.errors import bad_argument

    if file is None:
        return None
    path = Path(file).expanduser()
    why = ("it is a folder" if path.is_dir() else
           f"its folder {str(path.parent)!r} does not exist" if not path.parent.is_dir() else None)
    return why and bad_argument("--json", file, "a file to write the figures to", f"{why}; pass e.g. --json bench.json")


def run(args) -> int:
    from sampan.bench import SUITES

    problem = _json_problem(args.json)
    if problem:  # said before the suites run for minutes, not after
        print(f"sampan bench: {problem}", file=sys.stderr)
        return 2
    suites = [args.suite] if args.suite else list(SUITES)
    results = {}
    for suite in suites:
        results[suite] = _suite(suite).run(quick=args.quick)
    if args.json:
        from sampan.utils.io import atomic_write_json

        atomic_write_json(args.json, results)
    return 0
