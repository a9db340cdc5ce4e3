"""``sampan lab``: JupyterLab on 127.0.0.1 with a token, opened on the course index (``notebooks/index.ipynb``).

This is what ``make lab`` runs. The token is random unless ``--token`` or
``$SAMPAN_LAB_TOKEN`` gives one; the URL to open is printed.
"""
from __future__ import annotations

import argparse
import os
import secrets
import sys

INDEX = "index.ipynb"


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("lab", help="start JupyterLab on the course index (127.0.0.1, with a token)",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8888, help="port (the next free one when taken; default 8888)")
    parser.add_argument("--token", default=None, help="access token (default: $SAMPAN_LAB_TOKEN or a random one)")
    parser.add_argument("--no-browser", action="store_true", help="do not open a web browser")
    parser.add_argument("--dry-run", action="store_true", help="print the command instead of running it")


def command(*, port: int, token: str, open_browser: bool) -> list[str]:
    """The ``jupyter lab`` command line ``sampan lab`` runs."""
    from sampan.cli._servers import notebooks_dir

    root = notebooks_dir()
    return [
        sys.executable, "-m", "jupyterlab",
        f"--ServerApp.root_dir={root}",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.open_browser={open_browser}",
        f"--LabApp.default_url=/lab/tree/{INDEX}",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),  # containers run as root
    ]


def run(args) -> int:
    from sampan.cli._servers import ensure_kernel, free_port

    token = args.token or os.environ.get("SAMPAN_LAB_TOKEN") or secrets.token_hex(24)
    port = free_port(args.port)
    try:
        cmd = command(port=port, token=token, open_browser=not args.no_browser)
    except FileNotFoundError as exc:
        print(f"sampan lab: {exc}", file=sys.stderr)
        return 2
    if args.dry_run:
        print(" ".join(cmd))
        return 0
    ensure_kernel()
    print(f"Sampan lab: http://127.0.0.1:{port}/lab/tree/{INDEX}?token={token}", flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, cmd)  # JupyterLab replaces this process: Ctrl-C and signals reach it directly
    return 0  # pragma: no cover
