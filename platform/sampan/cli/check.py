"""``sampan check``: the environment self-check; exit 1 when something required fails."""
from __future__ import annotations

import json


def add_parser(sub) -> None:
    p = sub.add_parser("check", help="run the environment self-check; exit 1 when something required fails")
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile smoke test")
    p.add_argument("--no-distributed", action="store_true", help="skip the two-process gloo all-reduce")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args) -> int:
    from sampan.check import run_check

    report = run_check(compile=not args.no_compile, distributed=not args.no_distributed, verbose=not args.json)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    return 0 if report.ok else 1
