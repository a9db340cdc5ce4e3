"""``sampan lab``: JupyterLab on 127.0.0.1 with a token, opened on the course index (``notebooks/index.ipynb``).

This is what ``make lab`` runs. The token is random unless ``$SAMPAN_LAB_TOKEN`` gives one;
the URL to open is printed. The token reaches JupyterLab through its environment
(``JUPYTER_TOKEN``), never on a command line, which every local user can read.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from sampan.cli._args import port as port_type

INDEX = "index.ipynb"
# JupyterLab's defaults as Sampan's learners get them: no "notified about official Jupyter news?" question
# (it covers the lesson on first start) and no update check. A learner's own settings still win.
LAB_SETTINGS = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}


def install_lab_settings(prefix: str | os.PathLike = sys.prefix) -> Path:
    """Writes :data:`LAB_SETTINGS` as ``<prefix>/share/jupyter/lab/settings/overrides.d/sampan.json``, the
    place where JupyterLab reads the setting defaults that packages of its environment bring (beside the
    user's own ``overrides.json``, left alone); ``sampan lab`` calls it before starting JupyterLab.

    Example:
        >>> install_lab_settings(tmp_prefix).name  # doctest: +SKIP
        'sampan.json'
    """
    import json

    from sampan.utils.io import atomic_write_text

    path = Path(prefix, "share", "jupyter", "lab", "settings", "overrides.d", "sampan.json")
    text = json.dumps(LAB_SETTINGS, indent=2) + "\n"
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
    return path


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("lab", help="start JupyterLab on the course index (127.0.0.1, with a token)",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=port_type, default=8888, help="port (the next free one when taken; default 8888)")
    parser.add_argument("--token", default=None, help=argparse.SUPPRESS)  # refused: see _servers.refuse_token_argument
    parser.add_argument("--no-browser", action="store_true", help="do not open a web browser")
    parser.add_argument("--dry-run", action="store_true", help="print the command instead of running it")


def command(*, port: int, open_browser: bool) -> list[str]:
    """The ``jupyter lab`` command line ``sampan lab`` runs (the token goes in the environment: ``server_env``)."""
    from sampan.cli._servers import notebooks_dir

    root = notebooks_dir()
    return [
        sys.executable, "-m", "jupyterlab",
        f"--ServerApp.root_dir={root}",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        f"--ServerApp.open_browser={open_browser}",
        f"--LabApp.default_url=/lab/tree/{INDEX}",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),  # containers run as root
    ]


def run(args) -> int:
    from sampan.cli._servers import ensure_kernel, free_port, new_token, refuse_token_argument, server_env

    if args.token is not None:
        return refuse_token_argument("lab", "SAMPAN_LAB_TOKEN")
    token = new_token("SAMPAN_LAB_TOKEN")
    port = free_port(args.port)
    try:
        cmd = command(port=port, open_browser=not args.no_browser)
    except FileNotFoundError as exc:
        print(f"sampan lab: {exc}", file=sys.stderr)
        return 2
    if args.dry_run:
        print(" ".join(cmd))
        return 0
    ensure_kernel()
    install_lab_settings()
    print(f"Sampan lab: http://127.0.0.1:{port}/lab/tree/{INDEX}?token={token}", flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    # JupyterLab replaces this process (Ctrl-C and signals reach it directly); the token is in its environment
    os.execve(sys.executable, cmd, server_env(token))
    return 0  # pragma: no cover
