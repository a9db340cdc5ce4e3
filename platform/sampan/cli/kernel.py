"""``sampan kernel install``: the "Sampan (Python 3)" Jupyter kernel spec, bound to this interpreter.

The spec lives in ``kernels/sampan/`` (``kernel.json`` and two logos). Installing
copies it with ``argv[0]`` replaced by :data:`sys.executable`, so lessons that
name the ``sampan`` kernel run in the environment Sampan is installed in.
Inside a virtualenv (or conda environment) the spec goes into that environment
(``--sys-prefix``), elsewhere into the user's folder (``--user``); never system-wide
unless ``--prefix`` says so. ``SAMPAN_DATA`` and ``OMP_NUM_THREADS`` pass through from whoever starts the
kernel (JupyterLab, papermill) unless pinned with ``--data-dir`` / ``--threads``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from sampan.errors import bad_argument

KERNEL_NAME = "sampan"
DISPLAY_NAME = "Sampan (Python 3)"


def spec_source_dir() -> Path | None:
    """``kernels/sampan`` of the source checkout, or ``None`` when Sampan runs from a wheel."""
    from sampan.utils.io import repo_root

    root = repo_root()
    path = root / "kernels" / KERNEL_NAME if root else None
    return path if path is not None and (path / "kernel.json").is_file() else None


def kernel_spec(*, threads: int | None = None, data_dir: str | None = None) -> dict[str, Any]:
    """The ``kernel.json`` content bound to :data:`sys.executable`.

    Args:
        threads: pin ``OMP_NUM_THREADS`` for the kernel; ``None`` lets it pass through.
        data_dir: pin ``SAMPAN_DATA`` for the kernel; ``None`` lets it pass through.

    Example:
        >>> from sampan.cli.kernel import kernel_spec
        >>> kernel_spec()["display_name"]
        'Sampan (Python 3)'
    """
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise ValueError(bad_argument("threads", threads, "a positive int", "pass --threads 2, or omit it"))
    source = spec_source_dir()
    if source is not None:
        spec = json.loads((source / "kernel.json").read_text(encoding="utf-8"))
    else:
        spec = {"argv": ["python", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": DISPLAY_NAME, "language": "python", "interrupt_mode": "signal",
                "env": {}, "metadata": {"debugger": True, "supported_encryption": ["curve"]}}
    spec["argv"] = [sys.executable, *spec["argv"][1:]]
    env = dict(spec.get("env") or {})
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    if data_dir is not None:
        env["SAMPAN_DATA"] = str(Path(data_dir).expanduser().resolve())
    spec["env"] = env
    return spec


def install(*, user: bool = False, prefix: str | None = None, threads: int | None = None,
            data_dir: str | None = None) -> str:
    """Installs the spec with ``jupyter_client``'s ``KernelSpecManager.install_kernel_spec``; returns its folder.

    Example:
        >>> import sys
        >>> from sampan.cli.kernel import install
        >>> install(prefix=sys.prefix)  # doctest: +SKIP
        '.../.venv/share/jupyter/kernels/sampan'
    """
    from jupyter_client.kernelspec import KernelSpecManager

    with tempfile.TemporaryDirectory(prefix="sampan-kernel-") as tmp:
        staged = Path(tmp) / KERNEL_NAME
        source = spec_source_dir()
        if source is not None:
            shutil.copytree(source, staged)
        else:
            staged.mkdir()
        spec = kernel_spec(threads=threads, data_dir=data_dir)
        (staged / "kernel.json").write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
        return KernelSpecManager().install_kernel_spec(str(staged), KERNEL_NAME, user=user, prefix=prefix)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("kernel", help="install the 'Sampan (Python 3)' Jupyter kernel spec",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="kernel_command", metavar="ACTION")
    inst = sub.add_parser("install", help="bind the kernel spec to this Python interpreter")
    where = inst.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="install for the current user (~/.local/share/jupyter)")
    where.add_argument("--sys-prefix", action="store_true", help=f"install into this environment ({sys.prefix})")
    where.add_argument("--prefix", default=None, help="install under this prefix")
    inst.add_argument("--threads", type=int, default=None, help="pin OMP_NUM_THREADS for the kernel")
    inst.add_argument("--data-dir", default=None, help="pin SAMPAN_DATA for the kernel")


def run(args) -> int:
    if getattr(args, "kernel_command", None) != "install":
        print("usage: sampan kernel install [--user | --sys-prefix | --prefix DIR]", file=sys.stderr)
        return 2
    problem = _option_problem(args)
    if problem:
        print(f"sampan kernel install: {problem}", file=sys.stderr)
        return 2
    prefix = os.path.expanduser(args.prefix) if args.prefix is not None else None
    user, prefix = install_target(user=bool(args.user), sys_prefix=bool(args.sys_prefix), prefix=prefix)
    try:
        dest = install(user=user, prefix=prefix, threads=args.threads, data_dir=args.data_dir)
    except ValueError as exc:
        print(f"sampan kernel install: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"sampan kernel install: {_where_failed(user, prefix, exc)}", file=sys.stderr)
        return 2
    print(f"Installed kernel spec '{KERNEL_NAME}' ({DISPLAY_NAME}) in {dest}")
    print(f"  python: {sys.executable}")
    return 0


def _option_problem(args) -> str | None:
    """What is wrong with ``--threads`` or ``--data-dir``, worded for the command line; None when both are fine."""
    if args.threads is not None and args.threads < 1:
        return bad_argument("--threads", args.threads, "a positive int", "pass --threads 2, or omit it")
    if args.data_dir is not None and Path(args.data_dir).expanduser().is_file():
        return bad_argument("--data-dir", args.data_dir, "a folder (it is a file)",
                            "name a folder, new or existing, for Sampan's data, or omit --data-dir")
    return None


def _where_failed(user: bool, prefix: str | None, exc: OSError) -> str:
    """An install that the file system refused: which option chose the folder, and what to do instead."""
    if prefix is not None and prefix != sys.prefix:
        return bad_argument("--prefix", prefix, "a folder this user can write (share/jupyter/kernels is made in it)",
                            f"pick another folder, or use --user (the system said: {exc})")
    option = "--user" if user else "--sys-prefix"
    return (f"Could not write the kernel spec with {option} ({exc}). HINT: use --user for your own folder, or "
            f"--prefix DIR for a folder you can write.")


def install_target(*, user: bool = False, sys_prefix: bool = False, prefix: str | None = None
                   ) -> tuple[bool, str | None]:
    """``(user, prefix)`` for ``install``: what was asked, else this environment inside a virtualenv or
    conda environment (``--sys-prefix``), else the user's folder (``--user``); never system-wide by default.

    Example:
        >>> from sampan.cli.kernel import install_target
        >>> install_target(prefix="/opt/jupyter")
        (False, '/opt/jupyter')
    """
    if user or prefix is not None:
        return user, prefix
    if sys_prefix or _in_virtualenv():
        return False, sys.prefix
    return True, None


def _in_virtualenv() -> bool:
    """Inside a venv the default is the environment itself, elsewhere the user's folder. A conda environment
    counts when it is this Python's (``CONDA_PREFIX`` is ``sys.prefix``), not merely one active in the shell."""
    if sys.prefix != getattr(sys, "base_prefix", sys.prefix):
        return True
    conda = os.environ.get("CONDA_PREFIX")
    if not conda:
        return False
    try:
        return os.path.samefile(conda, sys.prefix)
    except OSError:  # a CONDA_PREFIX that does not exist (any more)
        return False
