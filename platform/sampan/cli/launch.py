"""``sampan launch [torchrun options] script.py [args]``: see :mod:`sampan.distributed.launch`."""
from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    p = sub.add_parser("launch", help="run a script on several processes or nodes with torchrun",
                       description="torchrun with --standalone by default and --timeout SECONDS for collectives "
                                   "(default 300; a rank that stalls is named). "
                                   "All torchrun options are accepted, e.g. --nproc_per_node 2.")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="[torchrun options] script.py [script args]")


def run(args) -> int:
    return main(list(args.rest))


def main(argv: list[str]) -> int:
    from sampan.distributed.launch import main as launch_main

    return launch_main(argv)
