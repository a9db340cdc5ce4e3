"""``sampan dashboard NAME``: serve one Voilà dashboard from ``notebooks/dashboards/`` on 127.0.0.1.

Voilà's security defaults are passed explicitly: sources are stripped from the
page, tracebacks are not sent to the browser, and the browser may not send
execution requests (Voilà only forwards widget messages to the kernel).

Examples:
    sampan dashboard digit_playground
    sampan dashboard training_monitor --port 8870
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def dashboards() -> dict[str, Path]:
    """``{name: notebook}`` for every ``notebooks/dashboards/*.ipynb``."""
    from sampan.cli._servers import notebooks_dir

    folder = notebooks_dir() / "dashboards"
    return {p.stem: p for p in sorted(folder.glob("*.ipynb"))}


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("dashboard", help="serve one Voila dashboard from notebooks/dashboards/",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", nargs="?", default=None, help="dashboard name (omit to list them)")
    parser.add_argument("--port", type=int, default=8866, help="port (the next free one when taken; default 8866)")
    parser.add_argument("--open", action="store_true", help="open a web browser")
    parser.add_argument("--dry-run", action="store_true", help="print the command instead of running it")


def command(notebook: Path, *, port: int, open_browser: bool = False) -> list[str]:
    """The ``voila`` command line for one dashboard, with the security settings spelled out."""
    return [
        sys.executable, "-m", "voila", str(notebook),
        "--Voila.ip=127.0.0.1",
        f"--port={port}",
        f"--Voila.open_browser={open_browser}",
        "--VoilaConfiguration.strip_sources=True",
        "--VoilaConfiguration.show_tracebacks=False",
        "--VoilaConfiguration.file_allowlist=[]",
        "--theme=light",
    ]


def run(args) -> int:
    from sampan.cli._servers import ensure_kernel, free_port

    try:
        found = dashboards()
    except FileNotFoundError as exc:
        print(f"sampan dashboard: {exc}", file=sys.stderr)
        return 2
    if args.name is None:
        print("Dashboards:", ", ".join(found) or "(none)")
        return 0
    if args.name not in found:
        from sampan.errors import bad_argument

        msg = bad_argument("name", args.name, f"one of {', '.join(found)}", "run `sampan dashboard` to list them")
        print(f"sampan dashboard: {msg}", file=sys.stderr)
        return 2
    port = free_port(args.port)
    cmd = command(found[args.name], port=port, open_browser=args.open)
    if args.dry_run:
        print(" ".join(cmd))
        return 0
    ensure_kernel()
    print(f"Sampan dashboard {args.name}: http://127.0.0.1:{port}/", flush=True)
    sys.stderr.flush()
    os.execv(sys.executable, cmd)  # Voilà replaces this process
    return 0  # pragma: no cover
