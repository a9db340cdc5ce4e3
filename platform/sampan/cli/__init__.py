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
}


def _load(command: str):
    module, _ = COMMANDS[command]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return None
        raise


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sampan", description="Sampan: the PaddlePaddle workflow on PyTorch.")
    parser.add_argument("--version", action="version", version=f"sampan {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        mod = _load(name) if only in (None, name) else None
        if mod is not None:
            mod.add_parser(sub)
        else:
            sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # `sampan launch` passes everything after it to torchrun untouched
    if argv[:1] == ["launch"] and _load("launch") is not None:
        return int(_load("launch").main(argv[1:]) or 0)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(only=command if command in COMMANDS else None)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    mod = _load(args.command)
    if mod is None:
        print(f"sampan {args.command}: not available in this version.", file=sys.stderr)
        return 2
    return int(mod.run(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
