"""``sampan lab``: JupyterLab on 127.0.0.1 with a token, opened on the course index (``notebooks/index.ipynb``).

``--lang en|zh`` (default from the locale) picks the language: the course is built in that language into
``$SAMPAN_DATA/courses/<lang>`` (``sampan.path.lang.build_course``) and served from there.

This is what ``make lab`` runs. The token is random unless ``$SAMPAN_LAB_TOKEN`` gives one;
the URL to open is printed. The token reaches JupyterLab through its environment
(``JUPYTER_TOKEN``), never on a command line, which every local user can read.
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from sampan.cli._args import add_lang_argument, chosen_language, port as port_type
from sampan.utils.imports import python_command

INDEX = "index.ipynb"
# JupyterLab's defaults as Sampan's learners get them: no "notified about official Jupyter news?" question
# (it covers the lesson on first start) and no update check. A learner's own settings still win.
LAB_SETTINGS = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}


def install_lab_settings(prefix: str | os.PathLike = sys.prefix) -> Path:
    """Writes :data:`LAB_SETTINGS` as ``<prefix>/share/jupyter/lab/settings/overrides.d/sampan.json``, the
    place where JupyterLab reads the setting defaults that packages of its environment bring (beside the
    user's own ``overrides.json``, left alone); ``sampan lab`` calls it before starting JupyterLab.

    Example:
        >>> from sampan.cli.lab import install_lab_settings
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as prefix:
        ...     print(install_lab_settings(prefix).relative_to(prefix))
        share/jupyter/lab/settings/overrides.d/sampan.json
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
    parser.add_argument("--port", type=port_type, default=8888,
                        help="port (another free port when taken; default 8888)")
    parser.add_argument("--token", default=None, help=argparse.SUPPRESS)  # refused: see _servers.refuse_token_argument
    parser.add_argument("--no-browser", action="store_true", help="do not open a web browser")
    parser.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    add_lang_argument(parser)


# JupyterLab's own setting for its UI language (the language pack jupyterlab-language-pack-zh-CN brings zh_CN)
TRANSLATION_PLUGIN = "@jupyterlab/translation-extension:plugin"


def lang_settings_dir(lang: str) -> Path:
    """The JupyterLab user-settings folder of a ``sampan lab --lang`` launch other than English:
    ``<data home>/lab/<lang>/user-settings``, seeded with the UI locale (the learner's later changes stay).

    Example:
        >>> from sampan.cli.lab import lang_settings_dir
        >>> lang_settings_dir("zh").parts[-3:]
        ('lab', 'zh', 'user-settings')
    """
    from sampan.utils.io import data_home

    return data_home() / "lab" / lang / "user-settings"


def install_lang_settings(lang: str) -> Path:
    """Writes the UI locale into :func:`lang_settings_dir` unless the learner already has a language setting there."""
    import json

    from sampan.hub.course import LAB_LOCALES  # the hub seeds the same setting in a learner's home
    from sampan.utils.io import atomic_write_text

    package, plugin = TRANSLATION_PLUGIN.split(":")
    path = lang_settings_dir(lang) / package / f"{plugin}.jupyterlab-settings"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({"locale": LAB_LOCALES[lang]}, indent=2) + "\n")
    return path


def command(*, port: int, open_browser: bool, lang: str = "en") -> list[str]:
    """The ``jupyter lab`` command line ``sampan lab`` runs (the token goes in the environment: ``server_env``).

    It serves the course built in ``lang`` (:func:`sampan.path.lang.built_course_dir`: one language per
    notebook, the learner's copies outside the repository), with JupyterLab's UI in that language.
    """
    from sampan.path.lang import built_course_dir
    from sampan.utils.notebooks import encryption_args

    root = built_course_dir(lang)
    localized = [] if lang == "en" else [f"--LabApp.user_settings_dir={lang_settings_dir(lang)}"]
    return [
        *python_command("-m", "jupyterlab"),  # nothing imported from the folder it is started in
        f"--ServerApp.root_dir={root}",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        f"--ServerApp.open_browser={open_browser}",
        f"--LabApp.default_url=/lab/tree/{INDEX}",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        *encryption_args(),  # the kernels' channels: unreadable to the machine's other processes
        *localized,
        *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),  # containers run as root
    ]


def run(args) -> int:
    from sampan.cli._servers import ensure_kernel, new_token, refuse_token_argument, server_env
    from sampan.utils.net import server_port

    if args.token is not None:
        return refuse_token_argument("lab", "SAMPAN_LAB_TOKEN")
    token = new_token("SAMPAN_LAB_TOKEN")
    port = server_port(args.port, program="sampan lab")
    lang = chosen_language(args)
    try:
        cmd = command(port=port, open_browser=not args.no_browser, lang=lang)
    except FileNotFoundError as exc:
        print(f"sampan lab: {exc}", file=sys.stderr)
        return 2
    if args.dry_run:
        print(shlex.join(cmd))  # a line to paste into a shell
        return 0
    ensure_kernel()
    install_lab_settings()
    from sampan.cli._servers import notebooks_dir
    from sampan.path.lang import build_course, built_course_dir

    build_course(lang, built_course_dir(lang), notebooks_dir())
    if lang != "en":
        install_lang_settings(lang)
    print(f"Sampan lab: http://127.0.0.1:{port}/lab/tree/{INDEX}?token={token}", flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    # JupyterLab replaces this process (Ctrl-C and signals reach it directly); the token is in its environment
    # the kernels inherit the language: sampan.path.lang.default_language() follows SAMPAN_LANG
    os.execve(sys.executable, cmd, {**server_env(token), "SAMPAN_LANG": lang})
    return 0  # pragma: no cover
