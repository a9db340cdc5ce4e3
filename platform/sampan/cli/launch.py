"""``sampan launch [torchrun options] script.py [args]``: see :mod:`sampan.distributed.launch`."""
from __future__ import annotations

import argparse
import os


def add_parser(sub) -> None:
    p = sub.add_parser("launch", help="run a script on several processes or nodes with torchrun",
                       description="torchrun with --standalone by default and --timeout SECONDS for collectives "
                                   "(default 300; a rank that stalls is named). "
                                   "All torchrun options are accepted, e.g. --nproc_per_node 2.")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="[torchrun options] script.py [script args]")


def run(args) -> int:
    return main(list(args.rest))


def main(argv: list[str]) -> int:
    import sys

    from sampan.distributed.launch import main as launch_main

    problem = _check(argv)
    if problem:
        print(f"sampan launch: {problem}", file=sys.stderr)
        return 2
    return launch_main(argv)


_NPROC = ("--nproc_per_node", "--nproc-per-node")
_NPROC_WORDS = ("auto", "cpu", "gpu", "xpu")  # what torchrun accepts besides a count


def _check(argv: list[str]) -> str | None:
    """Why ``argv`` cannot start (a bad ``--nproc_per_node``, a script that is not a file), else None: said here in
    one line rather than by torchrun's traceback or by every rank at once."""
    from sampan.distributed.launch import split_argv
    from sampan.errors import bad_argument

    if not argv or argv[0] in ("-h", "--help"):
        return None
    options, script = split_argv(list(argv))
    for i, token in enumerate(options):
        name, eq, value = token.partition("=")
        if name not in _NPROC:
            continue
        value = value if eq else (options[i + 1] if i + 1 < len(options) else "")
        if not (value in _NPROC_WORDS or (value.isdigit() and int(value) >= 1)):
            return bad_argument(name, value, "an int >= 1 (processes on this machine), or auto, cpu, gpu",
                                f"pass {name} 2, for example")
    if script and not _module_or_program(options) and not os.path.isfile(script[0]):
        where = "is a folder" if os.path.isdir(script[0]) else "does not exist"
        return bad_argument("script", script[0], "a Python file to run on every process",
                            f"it {where}; check the path (relative to the current folder), e.g. "
                            "sampan launch --nproc_per_node 2 train.py")
    return None


def _module_or_program(options: list[str]) -> bool:
    """Whether torchrun options make the first word a module or a program (``-m``, ``--no-python``), not a file."""
    return any(t.split("=", 1)[0] in ("-m", "--module", "--no-python", "--no_python", "--run-path", "--run_path")
               for t in options)
