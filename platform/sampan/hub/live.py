"""Live dashboards for the class: Voilà as a hub-authenticated JupyterHub service (``/services/live/``).

What a learner publishes (``sampan publish``) opens for every classmate as a *live* Voilà page at
``/services/live/voila/render/<learner>/<name>.ipynb``, behind hub login: the hub gives the scope
``access:services!service=live`` to the class's roles, anonymous visitors are sent to the login page
and a token without that scope gets 403. Each viewer gets a kernel of their own, running the
*publisher's* code, so:

- when the hub runs as root, the service (Voilà and every kernel it starts) runs as a separate
  unprivileged Unix user (``SAMPAN_HUB_LIVE_USER``, default ``nobody``; JupyterHub's service ``user``),
  with a HOME and Jupyter runtime folder of its own, in a folder outside the hub folder: the
  kernels cannot read the hub database, its cookie secret or the learners' homes;
- it serves *copies* of the published notebooks (``<live dir>/dashboards/<learner>/<name>.ipynb``),
  owned by the hub and read-only to the service; the progress service refreshes them
  (:func:`sync`) from the learners' galleries every few seconds;
- Voilà runs with ``sampan dashboard``'s settings: sources stripped, no tracebacks, no files
  served, and the browser may send no execute requests (only widget messages).

``SAMPAN_HUB_LIVE``: ``auto`` (default) turns the service on only when the hub runs as root and the
service user can run this Python; ``on`` asks for it (refused as root when the user cannot run this
Python; without root, or with ``SAMPAN_HUB_LIVE_USER`` empty, the kernels run as the hub's own account:
see docs/CLASSROOM.md); ``off`` keeps
the read-only snapshots only. This module is headless: Voilà and JupyterHub run in the service process.

Example:
    >>> plan = live_plan("off", "nobody")
    >>> (plan.enabled, plan.user)
    (False, None)
"""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sampan.errors import bad_argument

LIVE_SERVICE = "live"
MODES = ("auto", "on", "off")
DIR_ENV = "SAMPAN_LIVE_DIR"
SYNC_SECONDS = 3
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")  # gallery._NAME: what `sampan publish` accepts
# As for the progress service (config.SERVICE_BOOT): skip sampan/__init__ (torch), then run Voilà with the
# arguments :func:`voila_arguments` prepared, as `python -m voila` would.
LIVE_BOOT = ("import importlib.util, runpy, sys, types; pkg = types.ModuleType('sampan'); "
             "pkg.__path__ = list(importlib.util.find_spec('sampan').submodule_search_locations); "
             "sys.modules['sampan'] = pkg; from sampan.hub.live import prepare_process; "
             "sys.argv = ['voila', *prepare_process()]; runpy.run_module('voila', run_name='__main__')")


@dataclass(frozen=True)
class LivePlan:
    """Whether the live service runs, as whom, and why.

    Attributes:
        enabled: the hub starts the ``live`` service.
        user: the Unix user it runs as (None: the hub's own account).
        reason: one line for the hub's log and ``sampan hub --dry-run``.
    """

    enabled: bool
    user: str | None
    reason: str


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def reachable_by(path: str | os.PathLike, user: str) -> bool:
    """True when the Unix ``user`` can reach and read ``path``: every folder above it searchable, it readable.

    Checks the permission bits (owner, group, others) as the kernel would for that user's uid and groups.

    Example:
        >>> reachable_by("/", "nobody")
        True
    """
    import pwd

    entry = pwd.getpwnam(user)
    groups = set(os.getgrouplist(user, entry.pw_gid))
    path = Path(os.path.abspath(path))
    chain = [*reversed(path.parents), path]
    for i, part in enumerate(chain):
        info = part.stat()  # follows links: what the user would open
        need = stat.S_IXOTH if i < len(chain) - 1 else stat.S_IROTH
        shift = 6 if info.st_uid == entry.pw_uid else 3 if info.st_gid in groups else 0
        if not (info.st_mode >> shift) & need:
            return False
    return True


def _python_files() -> list[Path]:
    """What the service user must read: the interpreter, its standard library, Voilà, JupyterHub and this module."""
    import importlib.util

    found = [Path(os.path.realpath(sys.executable)), Path(os.__file__).resolve(), Path(__file__).resolve()]
    for package in ("voila", "jupyterhub"):
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin:
            found.append(Path(spec.origin).resolve())
    return found


def live_plan(mode: Literal["auto", "on", "off"], user: str) -> LivePlan:
    """Decides the live service from ``SAMPAN_HUB_LIVE`` and ``SAMPAN_HUB_LIVE_USER``.

    Raises:
        ValueError: an unknown mode; ``on`` as root with a user who does not exist or cannot run this Python.
    """
    if mode not in MODES:
        raise ValueError(bad_argument("SAMPAN_HUB_LIVE", mode, "one of auto, on, off",
                                      "unset it (auto) or set SAMPAN_HUB_LIVE=off"))
    if mode == "off":
        return LivePlan(False, None, "live dashboards off (SAMPAN_HUB_LIVE=off): the gallery shows snapshots")
    if not _is_root():
        if mode == "auto":
            return LivePlan(False, None, "live dashboards off: the hub does not run as root, so their kernels "
                                         "would run as the hub's account (SAMPAN_HUB_LIVE=on to accept that)")
        return LivePlan(True, None, "live dashboards on, as the hub's own account (SAMPAN_HUB_LIVE=on, no root)")
    if not user:  # asked for explicitly: a class that trusts each other, or a test
        return (LivePlan(True, None, "live dashboards on, as the hub's own account (SAMPAN_HUB_LIVE_USER empty): "
                                     "their kernels can read the hub's files") if mode == "on" else
                LivePlan(False, None, "live dashboards off: SAMPAN_HUB_LIVE_USER is empty (SAMPAN_HUB_LIVE=on to "
                                      "run them as the hub's account)"))
    problem = _user_problem(user)
    if problem is None:
        return LivePlan(True, user, f"live dashboards on, as the Unix user {user}")
    if mode == "auto":
        return LivePlan(False, None, f"live dashboards off: {problem}")
    raise ValueError(bad_argument("SAMPAN_HUB_LIVE_USER", user, "an existing unprivileged Unix user who can run "
                                  f"{sys.executable}", f"{problem}; create one (useradd --system sampan-live, "
                                  "then SAMPAN_HUB_LIVE_USER=sampan-live) and install Python where it can read it "
                                  "(e.g. under /opt)"))


def _user_problem(user: str) -> str | None:
    import pwd

    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return f"the Unix user {user!r} does not exist"
    if entry.pw_uid == 0:
        return f"{user!r} is root: the dashboards' kernels would read the hub's secrets"
    blocked = [str(p) for p in _python_files() if not reachable_by(p, user)]
    return f"{user!r} cannot read {blocked[0]} (a folder above it is private)" if blocked else None


def make_live_dir(hub_dir: Path, user: str | None) -> Path:
    """A fresh live folder (``<tmp>/sampan-live-*``, outside the hub folder) for one hub run.

    ``dashboards/`` (the copies) belongs to the hub and is read-only to the service; ``home/`` (HOME,
    Jupyter runtime, IPython) belongs to the service user, mode 0700. The previous run's folder is removed.
    """
    pointer = hub_dir / "live_dir.txt"
    old = Path(pointer.read_text().strip()) if pointer.is_file() else None
    if old is not None and old.name.startswith("sampan-live-") and old.is_dir():
        shutil.rmtree(old, ignore_errors=True)
    root = Path(tempfile.mkdtemp(prefix="sampan-live-"))
    root.chmod(0o755)
    (root / "dashboards").mkdir(mode=0o755)
    home = root / "home"
    home.mkdir(mode=0o700)
    if user is not None:
        import pwd

        entry = pwd.getpwnam(user)
        os.chown(home, entry.pw_uid, entry.pw_gid)
    pointer.write_text(str(root) + "\n")
    return root


def prepare_process() -> list[str]:
    """Inside the service (as its user): HOME and Jupyter folders under ``<live dir>/home``; Voilà's arguments."""
    root = Path(os.environ[DIR_ENV])
    home = root / "home"
    os.environ.update(HOME=str(home), JUPYTER_RUNTIME_DIR=str(home / "runtime"),
                      JUPYTER_DATA_DIR=str(home / "data"), IPYTHONDIR=str(home / "ipython"),
                      MPLCONFIGDIR=str(home / "matplotlib"))
    os.umask(0o077)
    os.chdir(root / "dashboards")
    return voila_arguments(root / "dashboards", os.environ["JUPYTERHUB_SERVICE_URL"],
                           os.environ.get("JUPYTERHUB_SERVICE_PREFIX", f"/services/{LIVE_SERVICE}/"))


def voila_arguments(dashboards: Path, service_url: str, prefix: str) -> list[str]:
    """Voilà on the copies, with ``sampan dashboard``'s security settings and JupyterHub's login.

    Example:
        >>> voila_arguments(Path("d"), "http://127.0.0.1:9000", "/services/live/")[:3]
        ['d', '--Voila.ip=127.0.0.1', '--Voila.port=9000']
    """
    from urllib.parse import urlparse

    url = urlparse(service_url)
    return [
        str(dashboards), f"--Voila.ip={url.hostname}", f"--Voila.port={url.port}", f"--Voila.base_url={prefix}",
        "--Voila.open_browser=False", "--Voila.auto_token=True",
        "--Voila.identity_provider_class=sampan.hub.live_auth.LiveIdentityProvider",
        "--Voila.authorizer_class=jupyterhub.singleuser.extension.JupyterHubAuthorizer",
        "--VoilaConfiguration.strip_sources=True", "--VoilaConfiguration.show_tracebacks=False",
        "--VoilaConfiguration.file_allowlist=[]", "--theme=light",
        # a kernel per viewer: one whose page was closed without a goodbye is stopped after 10 idle minutes
        "--MappingKernelManager.cull_idle_timeout=600", "--MappingKernelManager.cull_interval=60",
    ]


def live_url(user: str, name: str, prefix: str = f"/services/{LIVE_SERVICE}/") -> str:
    """The share link of a published dashboard (relative to the hub's public URL)."""
    return f"{prefix}voila/render/{user}/{name}.ipynb"


def sync(users_dir: Path, live_dir: Path) -> list[tuple[str, str]]:
    """Refreshes the service's read-only copies from the learners' galleries; returns ``[(learner, name)]``.

    A copy is made only of a published notebook that lies, after following links, inside its learner's
    own folder and parses as a notebook (a learner's link to the hub database is not copied); copies of
    dashboards no longer published are removed. Files are 0644 and folders 0755, owned by the hub.
    """
    from sampan.hub.service import published  # headless: lists every learner's gallery.json

    target, users_root = live_dir / "dashboards", users_dir.resolve()
    kept: set[Path] = set()
    for user, entry in published(users_dir):
        name = str(entry.get("name", ""))
        source = (users_dir / user / ".sampan" / "gallery" / f"{name}.ipynb").resolve()
        if not _NAME.match(name) or not source.is_relative_to(users_root / user) or not source.is_file():
            continue
        try:
            data = source.read_bytes()
            if not isinstance(json.loads(data).get("cells"), list):
                continue
        except (OSError, ValueError, AttributeError):
            continue
        copy = target / user / f"{name}.ipynb"
        kept.add(copy)
        if copy.is_file() and copy.read_bytes() == data:
            continue
        copy.parent.mkdir(mode=0o755, exist_ok=True)
        tmp = copy.with_name(f".{copy.name}.tmp")
        tmp.write_bytes(data)
        tmp.chmod(0o644)
        os.replace(tmp, copy)
    for stale in target.glob("*/*.ipynb"):
        if stale not in kept:
            stale.unlink()
    return sorted((p.parent.name, p.stem) for p in kept)
