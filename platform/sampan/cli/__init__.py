"""The ``sampan`` command line: one module per subcommand in ``sampan/cli/``.

Each module exposes ``add_parser(subparsers)`` (which registers the command
and its options) and ``run(args) -> int`` (the exit code). Modules are
imported only when the command runs, so ``sampan --version`` stays instant.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from sampan._version import __version__

# command -> (module, one-line help)
COMMANDS = {
    "check": ("sampan.cli.check", "run the environment self-check; exit 1 when something required fails"),
    "lab": ("sampan.cli.lab", "start JupyterLab on the course index (127.0.0.1, with a token)"),
    "path": ("sampan.cli.path", "list or run the learning path"),
    "dashboard": ("sampan.cli.dashboard", "serve one Voila dashboard from notebooks/dashboards/"),
    "kernel": ("sampan.cli.kernel", "install the 'Sampan (Python 3)' Jupyter kernel spec"),
    "launch": ("sampan.cli.launch", "run a script on several processes or nodes with torchrun"),
    "export": ("sampan.cli.export", "export a checkpoint to pt2, aoti or onnx"),
    "bench": ("sampan.cli.bench", "side-by-side benchmarks (ratios measured in one run)"),
    "publish": ("sampan.cli.publish", "publish your notebook as a Voila dashboard in your gallery"),
    "hub": ("sampan.cli.hub", "JupyterHub for a class on one machine (127.0.0.1 by default)"),
    "sweep": ("sampan.cli.sweep", "an Optuna sweep over a notebook's parameters, every trial a recorded run"),
    "job": ("sampan.cli.job", "background notebook jobs that outlive the kernel: run, list, logs, cancel"),
}


def _load(command: str):
    return importlib.import_module(COMMANDS[command][0])


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sampan", description="Sampan: the PaddlePaddle workflow on PyTorch.")
    parser.add_argument("--version", action="version", version=f"sampan {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        if only in (None, name):
            _load(name).add_parser(sub)
        else:
            sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # `sampan launch` passes everything after it to torchrun untouched
    if argv[:1] == ["launch"]:
        return int(_load("launch").main(argv[1:]) or 0)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(only=command if command in COMMANDS else None)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return int(_load(args.command).run(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
