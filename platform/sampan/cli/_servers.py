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
    """Installs the ``sampan`` kernel spec when it is missing (lessons name it) or runs another Python than this one
    (a spec left by an older environment), where ``sampan kernel install`` would put it: this virtualenv or conda
    environment, else the user's folder (:func:`sampan.cli.kernel.install_target`)."""
    from jupyter_client.kernelspec import KernelSpecManager

    from sampan.cli.kernel import DISPLAY_NAME, KERNEL_NAME, install, install_target

    found = KernelSpecManager().find_kernel_specs().get(KERNEL_NAME)
    if found is not None:
        problem = _spec_problem(found)
        if problem is None:
            return
        print(f"The '{KERNEL_NAME}' kernel spec in {found} {problem}: installing the current one for this Python.",
              file=sys.stderr)
    user, prefix = install_target()
    dest = install(user=user, prefix=prefix)
    print(f"Installed the '{DISPLAY_NAME}' kernel spec in {dest}", file=sys.stderr)
    now = KernelSpecManager().find_kernel_specs().get(KERNEL_NAME)
    problem = _spec_problem(now) if now else "is missing"
    if problem is not None:
        print(f"The '{KERNEL_NAME}' kernel spec in {now} still comes first on Jupyter's kernel path and {problem}. "
              f"HINT: remove that folder, or reinstall it with `sampan kernel install --prefix ...`.",
              file=sys.stderr)


def _spec_problem(resource_dir: str) -> str | None:
    """What is wrong with the kernel spec in ``resource_dir`` for this Python, or None: it must run this interpreter
    and declare CurveZMQ (``metadata.supported_encryption``), so that the servers' ``transport_encryption="auto"``
    encrypts its channels (:data:`sampan.utils.notebooks.KERNEL_ENCRYPTION`)."""
    import json

    try:
        spec = json.loads((Path(resource_dir) / "kernel.json").read_text(encoding="utf-8"))
        python = str(spec["argv"][0])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        spec, python = {}, None
    if python is None or not _same_path(python, sys.executable):
        return f"runs {python or 'an unreadable command'}, not this Python ({sys.executable})"
    metadata = spec.get("metadata")
    declared = metadata.get("supported_encryption") if isinstance(metadata, dict) else None
    if declared == "curve" or (isinstance(declared, list) and "curve" in declared):
        return None
    return "does not declare encrypted channels (metadata.supported_encryption: an older Sampan's spec)"


def _same_path(a: str, b: str) -> bool:
    """The same interpreter: the same folder (a virtualenv's python links to its base Python, but runs another
    environment) and the same file there (``python`` and ``python3`` of one environment are one interpreter)."""
    a, b = (os.path.normpath(os.path.abspath(os.path.expanduser(p))) for p in (a, b))
    return os.path.dirname(a) == os.path.dirname(b) and os.path.realpath(a) == os.path.realpath(b)
