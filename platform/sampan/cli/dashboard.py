"""``sampan dashboard NAME``: serve one Voilà dashboard from ``notebooks/dashboards/`` on 127.0.0.1.

Voilà's security defaults are passed explicitly: sources are stripped from the
page, tracebacks are not sent to the browser, and the browser may not send
execution requests (Voilà only forwards widget messages to the kernel). The page
needs a token (random unless ``$SAMPAN_DASHBOARD_TOKEN`` gives one), which reaches
Voilà through its environment (``JUPYTER_TOKEN``), never on a command line.
``--lang en|zh`` (default from the locale) serves the dashboard built in that language
(``$SAMPAN_DATA/courses/<lang>/dashboards/``, ``sampan.path.lang``).

Examples:
    sampan dashboard digit_playground
    sampan dashboard training_monitor --port 8870
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from sampan.cli._args import add_lang_argument, chosen_language, port as port_type
from sampan.utils.imports import python_command


def dashboards() -> dict[str, Path]:
    """``{name: notebook}`` for every ``notebooks/dashboards/*.ipynb``."""
    from sampan.cli._servers import notebooks_dir

    folder = notebooks_dir() / "dashboards"
    return {p.stem: p for p in sorted(folder.glob("*.ipynb"))}


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("dashboard", help="serve one Voila dashboard from notebooks/dashboards/",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", nargs="?", default=None, help="dashboard name (omit to list them)")
    parser.add_argument("--port", type=port_type, default=8866,
                        help="port (another free port when taken; default 8866)")
    parser.add_argument("--open", action="store_true", help="open a web browser")
    parser.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    parser.add_argument("--token", default=None, help=argparse.SUPPRESS)  # refused: see _servers.refuse_token_argument
    add_lang_argument(parser)


def command(notebook: Path, *, port: int, open_browser: bool = False) -> list[str]:
    """The ``voila`` command line for one dashboard, with the security settings spelled out.

    ``auto_token`` makes Voilà require a token, which it reads from ``JUPYTER_TOKEN`` (``server_env``). Voilà runs
    through ``sampan.utils.notebooks.VOILA_BOOT`` (``python -m voila`` with the mend for a cell's lost reply).
    """
    from sampan.utils.notebooks import VOILA_BOOT, encryption_args

    return [
        *python_command("-c", VOILA_BOOT), str(notebook),  # nothing imported from the folder it is started in
        "--Voila.ip=127.0.0.1",
        f"--port={port}",
        f"--Voila.open_browser={open_browser}",
        "--VoilaConfiguration.strip_sources=True",
        "--VoilaConfiguration.show_tracebacks=False",
        "--VoilaConfiguration.file_allowlist=[]",
        "--Voila.auto_token=True",
        *encryption_args(),  # the kernel's channels: unreadable to the machine's other processes
        "--theme=light",
    ]


def run(args) -> int:
    from sampan.cli._servers import ensure_kernel, new_token, refuse_token_argument, server_env
    from sampan.utils.net import server_port

    if args.token is not None:
        return refuse_token_argument("dashboard", "SAMPAN_DASHBOARD_TOKEN")
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
    port = server_port(args.port, program="sampan dashboard")
    from sampan.path.lang import build_file, built_course_dir

    lang = chosen_language(args)
    notebook = built_course_dir(lang) / "dashboards" / found[args.name].name  # built in that language
    cmd = command(notebook, port=port, open_browser=args.open)
    if args.dry_run:
        print(shlex.join(cmd))
        return 0
    build_file(found[args.name], notebook, lang)
    ensure_kernel()
    token = new_token("SAMPAN_DASHBOARD_TOKEN")
    print(f"Sampan dashboard {args.name}: http://127.0.0.1:{port}/?token={token}", flush=True)
    sys.stderr.flush()
    # Voilà replaces this process; the token is in its environment, the language in SAMPAN_LANG for the kernel
    os.execve(sys.executable, cmd, {**server_env(token), "SAMPAN_LANG": lang})
    return 0  # pragma: no cover
