"""``sampan hub``: JupyterHub for a class on one machine (``deploy/`` scales it out).

Starts JupyterHub with configurable-http-proxy on 127.0.0.1 (``--ip`` for a LAN
address: then give ``--ssl-cert``/``--ssl-key``, see docs/CLASSROOM.md). Learners
sign up at ``/hub/signup`` and wait for a teacher's approval (students on
``--roster`` are approved in advance); each gets their own JupyterLab with the
Sampan kernel and their own copy of the course, built in the class's language
(``--lang zh``: the lessons, their code's comments and printed words, the
exercises' feedback and JupyterLab's menus in Chinese; default from the locale).
A teacher's account is created
at the first start with that teacher (``--teacher`` or the roster) from
``$SAMPAN_HUB_TEACHER_PASSWORD`` or a prompt (never a command-line argument).
The teacher dashboard is at ``/services/progress/``. Every learner's server
runs as the hub's own account: as root, name the account they run as in
``$SAMPAN_HUB_LEARNER_USER`` (``root`` to accept that every learner is root),
or the hub refuses to start.

Examples:
    sampan hub
    sampan hub --roster class.csv --teacher kim --port 8000
    sampan hub --lang zh --roster class.csv
    sampan hub --ip 192.168.1.10 --ssl-cert hub.crt --ssl-key hub.key
    SAMPAN_HUB_LEARNER_USER=sampan-learner sampan hub --dir /srv/sampan-hub   # as root
"""
from __future__ import annotations

import argparse
import getpass
import json
import os
import shlex
import sys
from pathlib import Path

from sampan.cli._args import add_lang_argument, chosen_language, port as port_type
from sampan.utils.imports import python_command


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("hub", help="JupyterHub for a class on one machine (127.0.0.1 by default)",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=port_type, default=8000, help="public port (default 8000)")
    parser.add_argument("--ip", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--dir", default=None, help="hub folder: database, learners' homes (default <data dir>/hub)")
    parser.add_argument("--roster", default=None, help="CSV 'username,role': students approved in advance")
    parser.add_argument("--teacher", default="teacher", help="teacher (admin) user names, comma-separated")
    parser.add_argument("--ssl-cert", default=None, help="TLS certificate (required with a non-local --ip)")
    parser.add_argument("--ssl-key", default=None, help="TLS private key")
    parser.add_argument("--cull-timeout", type=int, default=None,
                        help="stop servers idle this many seconds (default $SAMPAN_HUB_CULL_TIMEOUT or 3600)")
    parser.add_argument("--dry-run", action="store_true", help="print the command and settings instead")
    add_lang_argument(parser)  # the class's language: the course each learner gets, their kernels and JupyterLab


def config_file() -> Path:
    """``deploy/jupyterhub_config.py`` of the checkout, else a copy written into the data dir."""
    from sampan.utils.io import atomic_write_text, data_home, repo_root

    root = repo_root()
    if root is not None and (root / "deploy" / "jupyterhub_config.py").is_file():
        return root / "deploy" / "jupyterhub_config.py"
    path = data_home() / "hub" / "jupyterhub_config.py"
    atomic_write_text(path, "from sampan.hub.config import configure\n\nconfigure(get_config())\n", private=True)
    return path


def environment(args) -> dict[str, str]:
    """The ``SAMPAN_HUB_*`` variables :class:`sampan.hub.config.HubSettings` reads; checks the arguments."""
    from sampan.cli._servers import free_port
    from sampan.errors import bad_argument, check_int
    from sampan.hub.roster import check_username
    from sampan.utils.io import data_home

    _check_tls_files(args.ssl_cert, args.ssl_key)
    if args.ip not in ("127.0.0.1", "localhost", "::1") and not (args.ssl_cert and args.ssl_key):
        raise ValueError(bad_argument("--ip", args.ip, "127.0.0.1, or --ssl-cert and --ssl-key with a LAN address",
                                      "passwords must not cross a network in clear text; see docs/CLASSROOM.md"))
    for name in args.teacher.split(","):
        check_username(name, where="--teacher")
    env = {"SAMPAN_HUB_DIR": str(Path(args.dir).resolve() if args.dir else data_home() / "hub"),
           "SAMPAN_HUB_IP": args.ip, "SAMPAN_HUB_PORT": str(args.port or free_port()),
           "SAMPAN_HUB_TEACHER": args.teacher, "SAMPAN_HUB_LANG": chosen_language(args)}
    if args.cull_timeout is not None:
        env["SAMPAN_HUB_CULL_TIMEOUT"] = str(check_int("--cull-timeout", args.cull_timeout))
    if args.roster:
        _check_roster(args.roster)
        env["SAMPAN_HUB_ROSTER"] = str(Path(args.roster).expanduser().resolve())
    if args.ssl_cert:
        env.update(SAMPAN_HUB_SSL_CERT=str(Path(args.ssl_cert).resolve()),
                   SAMPAN_HUB_SSL_KEY=str(Path(args.ssl_key).resolve()))
    return env


def _check_roster(roster: str) -> None:
    """Reads the ``--roster`` CSV now, so that a missing file or a bad line fails here rather than inside the hub."""
    from sampan.errors import bad_argument
    from sampan.hub.roster import read_roster

    expected = "an existing CSV file with the header row 'username,role'"
    path = Path(roster).expanduser()
    if not path.exists():
        raise ValueError(bad_argument("--roster", roster, expected,
                                      f"check the path (a relative one is read from {Path.cwd()}), or leave "
                                      "--roster out: learners then sign up and a teacher approves them at "
                                      "/hub/authorize"))
    if path.is_dir():
        raise ValueError(bad_argument("--roster", roster, f"{expected} (it is a folder)",
                                      "name the CSV file inside it"))
    try:
        read_roster(str(path))
    except OSError as exc:
        raise ValueError(bad_argument("--roster", roster, expected,
                                      f"make it readable by this user (the system said: {exc})")) from None


def _check_tls_files(cert: str | None, key: str | None) -> None:
    """``--ssl-cert`` and ``--ssl-key`` come together, each an existing file."""
    from sampan.errors import bad_argument

    for flag, value, other, other_value in (("--ssl-key", key, "--ssl-cert", cert),
                                            ("--ssl-cert", cert, "--ssl-key", key)):
        if other_value and not value:
            raise ValueError(bad_argument(flag, value, f"the file that goes with {other} {other_value}",
                                          "give both --ssl-cert CERT and --ssl-key KEY (PEM files)"))
    for flag, value in (("--ssl-cert", cert), ("--ssl-key", key)):
        if value and not Path(value).is_file():
            raise ValueError(bad_argument(flag, value, "an existing PEM file",
                                          "check the path (certificate and key from your institution or "
                                          "Let's Encrypt, see docs/CLASSROOM.md)"))


def _teacher_passwords(settings) -> dict[str, str]:
    """``{teacher: password}`` for the hub to set: every teacher's from ``$SAMPAN_HUB_TEACHER_PASSWORD``, else
    one asked for each teacher with no account in the hub's database yet (none on a plain restart)."""
    from sampan.errors import bad_argument
    from sampan.hub.auth import check_teacher_password, teachers_without_account
    from sampan.hub.config import PASSWORD_ENV

    if os.environ.get(PASSWORD_ENV):
        return {name: check_teacher_password(name, os.environ[PASSWORD_ENV]) for name in sorted(settings.teachers)}
    missing = teachers_without_account(settings.hub_db_url, settings.teachers)
    if missing and not sys.stdin.isatty():
        raise ValueError(bad_argument(PASSWORD_ENV, "(unset)", "the password of the teacher account(s) "
                                      f"{', '.join(map(repr, missing))}, which the hub's database does not hold yet",
                                      f"`read -s {PASSWORD_ENV}; export {PASSWORD_ENV}` before this start, or "
                                      "start `sampan hub` in a terminal, where it asks"))
    return {name: check_teacher_password(name, getpass.getpass(f"Password for the new teacher account {name!r}: "))
            for name in missing}


def run(args) -> int:
    from sampan.hub.config import (
        LEARNER_USER_ENV, PASSWORD_ENV, PASSWORD_FILE_ENV, HubSettings, learner_account, proxy_command, public_url,
    )
    from sampan.utils.io import atomic_write_text

    try:
        env = environment(args)
        proxy_command()
        learner_account(os.environ.get(LEARNER_USER_ENV, ""))  # as root: who the learners' servers run as
        passwords = {} if args.dry_run else _teacher_passwords(HubSettings.from_env({**os.environ, **env}))
    except (ValueError, FileNotFoundError) as exc:
        print(f"sampan hub: {exc}", file=sys.stderr)
        return 2
    cmd = [*python_command("-m", "jupyterhub"), "-f", str(config_file())]
    if args.dry_run:
        print("\n".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items())))
        print(shlex.join(cmd))  # a line to paste into a shell
        return 0
    os.environ.update(env)
    hub_dir = Path(env["SAMPAN_HUB_DIR"])
    hub_dir.mkdir(parents=True, exist_ok=True)
    hub_dir.chmod(0o700)
    # The password reaches the hub in a private file it deletes once read, not in its environment: a process's
    # initial environment stays readable in /proc/PID/environ by its account (every learner's server) for its life.
    os.environ.pop(PASSWORD_ENV, None)
    if passwords:
        # born 0600 (mkstemp) and renamed into place: never readable by another account, no link followed
        os.environ[PASSWORD_FILE_ENV] = str(atomic_write_text(hub_dir / ".teacher-password", json.dumps(passwords),
                                                              private=True))
    url = public_url(args.ip, env["SAMPAN_HUB_PORT"], tls=bool(args.ssl_cert))  # --port 0: the port picked
    print(f"Sampan hub: {url}hub/  (teacher dashboard: /services/progress/)", flush=True)
    sys.stderr.flush()
    os.chdir(env["SAMPAN_HUB_DIR"])  # JupyterHub writes its runtime files beside its database
    os.execv(sys.executable, cmd)  # JupyterHub replaces this process
    return 0  # pragma: no cover
