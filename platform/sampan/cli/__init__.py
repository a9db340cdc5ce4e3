"""The ``sampan`` command line: one module per subcommand in ``sampan/cli/``.

Each module exposes ``add_parser(subparsers)`` (which registers the command
and its options) and ``run(args) -> int`` (the exit code). A module is
imported only when its command runs or shows its own ``--help``: ``sampan --help``
lists the commands from :data:`COMMANDS` and ``sampan --version`` reads the
version file, with no subcommand imported. Neither imports torch (``import sampan``
imports it on first use, and no command's module imports it before its ``run``),
so the servers ``sampan lab``, ``sampan dashboard`` and ``sampan hub`` start without
it. Ctrl-C ends any command with ``sampan <cmd>: interrupted`` and exit code 130,
never a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

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


def version() -> str:
    """Sampan's version, read from ``sampan/_version.py`` by path (the checkout's own, even in an editable install
    whose recorded metadata is older), else from the installed distribution's metadata; nothing else imported.

    Example:
        >>> from sampan.cli import version
        >>> version().count(".") >= 1
        True
    """
    import re

    try:
        text = (Path(__file__).resolve().parent.parent / "_version.py").read_text(encoding="utf-8")
        found = re.search(r"""^__version__\s*=\s*["']([^"']+)["']""", text, re.MULTILINE)
        if found:
            return found.group(1)
    except OSError:
        pass
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed_version

    try:
        return installed_version("sampan")
    except PackageNotFoundError:
        return "unknown"


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``sampan`` parser. ``only``: the one command whose module registers its options (the others get a
    placeholder with their one-line help); ``""``: none, enough for ``sampan --help``; ``None``: all of them."""
    parser = argparse.ArgumentParser(prog="sampan", description="Sampan: the PaddlePaddle workflow on PyTorch.")
    parser.add_argument("--version", action="version", version=f"sampan {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        if only in (None, name):
            _load(name).add_parser(sub)
        else:
            sub.add_parser(name, help=help_text, add_help=False)
    return parser


def _innermost(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.ArgumentParser:
    """The parser of the deepest command named in ``argv`` (``sampan path run`` -> the ``run`` parser)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = next((a for a in argv if a in action.choices), None)
            if chosen is not None:
                return _innermost(action.choices[chosen], argv[argv.index(chosen) + 1:])
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    try:
        return _main(argv, command)
    except KeyboardInterrupt:  # Ctrl-C: the command stops, with no traceback (`path` reports its run itself)
        name = f"sampan {command}" if command in COMMANDS else "sampan"
        print(f"{name}: interrupted", file=sys.stderr, flush=True)
        return 130


def _main(argv: list[str], command: str | None) -> int:
    # `sampan launch` passes everything after it to torchrun untouched
    if argv[:1] == ["launch"]:
        return int(_load("launch").main(argv[1:]) or 0)
    parser = build_parser(only=command if command in COMMANDS else "")
    args, extras = parser.parse_known_args(argv)
    if extras:  # said by the (sub)command that was given them, with its usage, not by `sampan` itself
        given = _innermost(parser, argv)
        given.error(f"unrecognized arguments: {' '.join(extras)}; see `{given.prog} --help`")
    if args.command is None:
        parser.print_help()
        return 0
    return int(_load(args.command).run(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
