"""Helpers shared by ``sampan lab`` and ``sampan dashboard``: where the courses are, ports, the kernel."""
from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

from sampan.utils.net import free_port  # noqa: F401  (re-exported: sampan lab, dashboard, publish, hub)


def notebooks_dir() -> Path:
    """``notebooks/`` of the source checkout; a clear error when Sampan runs without one."""
    from sampan.utils.io import repo_root

    root = repo_root()
    if root is None or not (root / "notebooks").is_dir():
        raise FileNotFoundError("Cannot find the notebooks/ folder: Sampan is not running from a source checkout. "
                                "HINT: clone the repository, or set SAMPAN_HOME to it.")
    return root / "notebooks"


def new_token(env_var: str) -> str:
    """The server's access token: ``$env_var`` when set, else a random one (never read from a command line)."""
    return os.environ.get(env_var) or secrets.token_hex(24)


def server_env(token: str) -> dict[str, str]:
    """This environment plus ``JUPYTER_TOKEN``: how the token reaches the server.

    ``/proc/PID/cmdline`` is readable by every local user while ``/proc/PID/environ`` is readable
    only by the process owner, so the token travels in the environment, never as an argument.
    """
    env = {k: v for k, v in os.environ.items() if k != "JUPYTER_TOKEN_FILE"}
    env["JUPYTER_TOKEN"] = token
    return env


def refuse_token_argument(command: str, env_var: str) -> int:
    """``--token VALUE`` would put the secret on the command line, visible to every user: say what to do."""
    print(f"sampan {command}: --token is not accepted: a token on the command line is readable by every user of "
          f"this machine (/proc/PID/cmdline). HINT: set it in the environment instead: "
          f"{env_var}=... sampan {command} (or let Sampan make a random one).", file=sys.stderr)
    return 2


def ensure_kernel() -> None:
    """Installs the ``sampan`` kernel spec into this environment when it is missing (lessons name it)."""
    from jupyter_client.kernelspec import find_kernel_specs

    if "sampan" not in find_kernel_specs():
        from sampan.cli.kernel import install

        dest = install(prefix=sys.prefix)
        print(f"Installed the 'Sampan (Python 3)' kernel spec in {dest}", file=sys.stderr)
