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
  served, and the browser may send no execute requests (only widget messages);
- the publisher's outputs are HTML and JavaScript that Voilà marks trusted, shown on the hub's own origin
  to classmates and the teacher (a hub admin): every response carries a Content-Security-Policy
  (:func:`content_security_policy`) that runs Voilà's own scripts and none of the publisher's (no inline
  scripts, event-handler attributes, ``javascript:`` URLs or eval; scripts only from the service's
  ``voila/`` path), and Jupyter's data folder, where Voilà finds the lab extensions it serves there, is
  read-only to the service (a kernel could otherwise plant a script for Voilà to serve);
- each page starts a kernel, so :class:`LiveKernelManager` caps them: ``PER_VIEWER`` per hub user and a
  total from the machine's memory (:func:`kernel_limit`), refusing further pages with 429 or 503 and a
  message saying why, and stopping kernels that no page connected to within ``UNCONNECTED_SECONDS``.

``SAMPAN_HUB_LIVE``: ``auto`` (default) turns the service on only when the hub runs as root and the
service user can run this Python; ``on`` asks for it (refused as root when the user cannot run this
Python; without root, or with ``SAMPAN_HUB_LIVE_USER`` empty, the kernels run as the hub's own account:
see docs/CLASSROOM.md); ``off`` keeps
the read-only snapshots only. This module is headless: Voilà and JupyterHub run in the service process.

Example:
    >>> from sampan.hub.live import live_plan
    >>> plan = live_plan("off", "nobody")
    >>> (plan.enabled, plan.user)
    (False, None)
"""
from __future__ import annotations

import base64
import contextvars
import functools
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sampan.errors import bad_argument

LIVE_SERVICE = "live"
MODES = ("auto", "on", "off")
DIR_ENV = "SAMPAN_LIVE_DIR"
SYNC_SECONDS = 3
PER_VIEWER = 3  # live kernels per hub user: a few dashboards side by side, not a loop of GETs
KERNEL_GIB = 0.5  # what a Sampan kernel holds once torch is imported (docs/CLASSROOM.md: ~16-20 GiB for 30)
MEMORY_SHARE = 0.25  # of the machine's memory for live kernels: the learners' own servers need the rest
UNCONNECTED_SECONDS = 60  # a page connects within seconds of its last cell; a plain GET never does
CELL_SECONDS = 180  # the longest a live page's cell may run before the page stops with a message (a loop for ever)
CELL_TIMEOUT_MESSAGE = (f"This dashboard's code ran longer than {CELL_SECONDS} s, the most a cell of a live dashboard "
                        "may run, so the page stops here. Tell its publisher; the gallery's snapshot still opens.")
CULL_SECONDS = 15
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")  # gallery._NAME: what `sampan publish` accepts
# Runs Voilà with the arguments :func:`voila_arguments` prepared, as `python -m voila` would (with
# sampan.utils.notebooks.run_voila's mend for a cell's lost reply); no torch in the server (its kernels import it).
LIVE_BOOT = ("from sampan.hub.live import prepare_process; from sampan.utils.notebooks import run_voila; "
             "run_voila(prepare_process())")


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


def reachable_by(path: str | os.PathLike, user: str, last: int = stat.S_IROTH) -> bool:
    """True when the Unix ``user`` can reach and read ``path``: every folder above it searchable, it readable
    (``last=stat.S_IXOTH``: a folder it can pass through).

    Checks the permission bits (owner, group, others) as the kernel would for that user's uid and groups.

    Example:
        >>> from sampan.hub.live import reachable_by
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
        need = stat.S_IXOTH if i < len(chain) - 1 else last
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

    ``dashboards/`` (the copies), ``data/`` and ``config/`` (Jupyter's data and config folders, empty) belong
    to the hub and are read-only to the service; ``home/`` (HOME, Jupyter runtime, IPython) belongs to the
    service user, mode 0700. The previous run's folder is removed.
    """
    pointer = hub_dir / "live_dir.txt"
    old = Path(pointer.read_text().strip()) if pointer.is_file() else None
    if old is not None and old.name.startswith("sampan-live-") and old.is_dir():
        shutil.rmtree(old, ignore_errors=True)
    root = Path(tempfile.mkdtemp(prefix="sampan-live-"))
    root.chmod(0o755)
    # the published copies: the service's account reads them (its group), no other local account does
    (root / "dashboards").mkdir(mode=0o700)
    (root / "data").mkdir(mode=0o755)
    (root / "config").mkdir(mode=0o755)
    home = root / "home"
    home.mkdir(mode=0o700)
    if user is not None:
        import pwd

        entry = pwd.getpwnam(user)
        os.chown(home, entry.pw_uid, entry.pw_gid)
        os.chown(root / "dashboards", -1, entry.pw_gid)
        (root / "dashboards").chmod(0o2750)  # setgid: the learners' folders and copies inside take the group
    pointer.write_text(str(root) + "\n")
    return root


def prepare_process() -> list[str]:
    """Inside the service (as its user): HOME and Jupyter folders under ``<live dir>/home``; Voilà's arguments."""
    root = Path(os.environ[DIR_ENV])
    home = root / "home"
    # Jupyter's data and config folders are the hub's (read-only to the service): Voilà serves lab extensions
    # from the one and runs voila.py (and reads page_config) from the other at every start, and the kernels, which
    # run the publishers' code as the service's account, could otherwise plant a config that drops the
    # Content-Security-Policy and have the hub restart Voilà with it
    for name in ("JUPYTER_CONFIG_PATH", "JUPYTER_PATH"):
        os.environ.pop(name, None)
    os.environ.update(HOME=str(home), JUPYTER_RUNTIME_DIR=str(home / "runtime"),
                      JUPYTER_DATA_DIR=str(root / "data"), JUPYTER_CONFIG_DIR=str(root / "config"),
                      PYTHONNOUSERSITE="1",
                      IPYTHONDIR=str(home / "ipython"), MPLCONFIGDIR=str(home / "matplotlib"))
    os.umask(0o077)
    os.chdir(root / "dashboards")
    return voila_arguments(root / "dashboards", os.environ["JUPYTERHUB_SERVICE_URL"],
                           os.environ.get("JUPYTERHUB_SERVICE_PREFIX", f"/services/{LIVE_SERVICE}/"))


def voila_arguments(dashboards: Path, service_url: str, prefix: str) -> list[str]:
    """Voilà on the copies, with ``sampan dashboard``'s security settings and JupyterHub's login.

    Example:
        >>> from pathlib import Path
        >>> from sampan.hub.live import voila_arguments
        >>> voila_arguments(Path("d"), "http://127.0.0.1:9000", "/services/live/")[:3]
        ['d', '--Voila.ip=127.0.0.1', '--Voila.port=9000']
    """
    from urllib.parse import urlparse

    from sampan.utils.notebooks import encryption_args

    url = urlparse(service_url)
    return [
        str(dashboards), f"--Voila.ip={url.hostname}", f"--Voila.port={url.port}", f"--Voila.base_url={prefix}",
        "--Voila.open_browser=False", "--Voila.auto_token=True", "--Voila.config_file_paths=[]",
        "--Voila.identity_provider_class=sampan.hub.live.LiveViewers",
        "--Voila.authorizer_class=jupyterhub.singleuser.extension.JupyterHubAuthorizer",
        "--VoilaConfiguration.strip_sources=True", "--VoilaConfiguration.show_tracebacks=False",
        "--VoilaConfiguration.file_allowlist=[]", "--theme=light",
        "--Voila.tornado_settings=" + json.dumps({"headers": {"Content-Security-Policy": content_security_policy()}}),
        # a kernel per viewer, capped; one whose page was closed without a goodbye is stopped after 10 idle
        # minutes (busy or not: a cell that loops for ever holds a kernel otherwise), one that no page connected
        # to after UNCONNECTED_SECONDS
        "--VoilaConfiguration.multi_kernel_manager_class=sampan.hub.live.LiveKernelManager",
        "--MappingKernelManager.cull_idle_timeout=600", f"--MappingKernelManager.cull_interval={CULL_SECONDS}",
        "--MappingKernelManager.cull_busy=True",
        # the viewers' kernels run as the live account on the learners' machine: their channels are encrypted,
        # and a page whose kernel could not be is refused rather than run in the clear
        *encryption_args("required"),
        # a cell that runs past CELL_SECONDS ends the page with a message for the viewer (Voilà's own names the
        # server's options) instead of "Running ..." for ever
        f"--VoilaExecutor.timeout={CELL_SECONDS}", f"--VoilaExecutor.cell_timeout_instruction={CELL_TIMEOUT_MESSAGE}",
    ]


def content_security_policy(scripts: str = "'self'") -> str:
    """The live pages' Content-Security-Policy: Voilà's own scripts run, the publisher's do not.

    ``scripts`` is where scripts may load from: ``'self'`` (the hub's whole origin) in the header every
    response carries, narrowed per page by :class:`LiveViewers` to the service's ``voila/`` path (other paths
    of the origin serve files a publisher controls, such as ``/user/<publisher>/files/``, which the teacher
    may open). Without ``'unsafe-inline'`` or ``'unsafe-eval'``: Voilà and ipywidgets need neither; the
    inline scripts its pages need are allowed by hash (:func:`voila_script_hashes`). ``object-src``,
    ``base-uri`` and ``form-action`` are closed (no plugins, no ``<base>`` pointing scripts elsewhere, no
    forms posting the viewer's cookies); styles and images stay open (outputs and widgets use inline ones).

    Example:
        >>> from sampan.hub.live import content_security_policy
        >>> content_security_policy().startswith("script-src 'self' 'sha256-")
        True
    """
    hashes = " ".join(f"'{h}'" for h in voila_script_hashes())
    return (f"script-src {scripts} {hashes}; object-src 'none'; base-uri 'none'; form-action 'none'; "
            "frame-ancestors 'self'")


_HEARTBEAT = "window.voila_heartbeat()"  # voila.handler: the inline script it sends during long renders


@functools.lru_cache(maxsize=None)
def voila_script_hashes() -> tuple[str, ...]:
    """CSP hash sources of the inline scripts Voilà's pages need, read from the installed ``lab`` template.

    They are the console logger and the helper functions (macros of the ``base`` template, rendered here as
    Voilà renders them), ``window.voila_finish()`` (it shows the rendered cells) and the heartbeat. Left
    blocked: ``voila_process(i, n)`` before each cell (only the "Executing i of n" text) and nbconvert's
    mermaid loader (it would load from a CDN). A hash lets only that exact text run, whatever a notebook
    holds; derived once per process from the installed template, so an update of Voilà within 0.5 keeps its
    pages working.
    """
    import jinja2
    from voila.paths import collect_template_paths

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(collect_template_paths(["voila", "nbconvert"], "lab",
                                                                                   prune=True)),
                             extensions=["jinja2.ext.i18n"], autoescape=True)
    env.install_null_translations(newstyle=False)
    macros = env.from_string(
        "{% import 'log.macro.html.j2' as log %}"
        "{% from 'voila_setup.macro.html.j2' import voila_setup_helper_functions with context %}"
        "{{ log.js() }}{{ voila_setup_helper_functions() }}").render(progressive_rendering=False)
    page = env.loader.get_source(env, "index.html.j2")[0]
    scripts = [*re.findall(r"<script>(.*?)</script>", macros, re.S),
               *[body for body in re.findall(r"<script[^>]*>(.*?)</script>", page, re.S) if "{" not in body],
               _HEARTBEAT]
    if not any("voila_finish()" in body for body in scripts):  # the page would stay on its spinner
        raise RuntimeError("Voilà's lab template has no `window.voila_finish()` script: update "
                           "sampan.hub.live.voila_script_hashes for this Voilà")
    return tuple(f"sha256-{base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()}" for body in scripts)


def kernel_limit(memory_bytes: int | None = None) -> int:
    """The most live kernels at once: ``MEMORY_SHARE`` of the machine's memory at ``KERNEL_GIB`` each, at least 2.

    Example:
        >>> from sampan.hub.live import kernel_limit
        >>> kernel_limit(64 * 2**30)  # a 64 GiB machine: 16 GiB for live kernels
        32
    """
    if memory_bytes is None:
        memory_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(2, int(memory_bytes * MEMORY_SHARE / (KERNEL_GIB * 2**30)))


_VIEWER: contextvars.ContextVar[str] = contextvars.ContextVar("sampan_live_viewer", default="")


class _Page:
    """One request of the live Voilà: when its response ended (None: still rendering). Voilà runs a page's
    cells before the browser connects, however long they take."""

    def __init__(self):
        self.finished: float | None = None


_PAGE: contextvars.ContextVar[_Page | None] = contextvars.ContextVar("sampan_live_page", default=None)
_HOST = re.compile(r"^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$")


def note_viewer(handler, user) -> None:
    """Inside the live Voilà, as each request is authenticated: who asks (for :class:`LiveKernelManager`),
    and the page's script source narrowed to ``<host><prefix>voila/``.

    The kernel manager is not given the request: the viewer's name travels in a context variable, set here
    in the request's ``prepare`` and read in the same task when the page starts its kernel. An odd Host
    header keeps the policy every response has (``'self'``).
    """
    _VIEWER.set(getattr(user, "username", "") or "")
    _drop_token(handler.request)
    page, on_finish = _Page(), handler.on_finish
    _PAGE.set(page)

    def finished():
        page.finished = time.monotonic()
        on_finish()

    handler.on_finish = finished
    host = handler.request.host
    if _HOST.match(host):
        scripts = f"{host}{handler.base_url.rstrip('/')}/voila/"
        handler.set_header("Content-Security-Policy", content_security_policy(scripts))


def _drop_token(request) -> None:
    """Removes a ``token`` query argument once the viewer is authenticated: Voilà hands the request's URL and
    query string to the kernel it starts (``VOILA_REQUEST_URL``, ``QUERY_STRING``), and that kernel runs the
    publisher's code, which could then act with the viewer's token."""
    from urllib.parse import parse_qsl, urlencode

    if "token" not in request.query_arguments:
        return
    kept = [(k, v) for k, v in parse_qsl(request.query, keep_blank_values=True) if k != "token"]
    request.query = urlencode(kept)
    request.uri = request.path + (f"?{request.query}" if request.query else "")
    request.query_arguments.pop("token", None)
    request.arguments.pop("token", None)


def __getattr__(name: str):
    """``LiveViewers`` and ``LiveKernelManager``, built on first use (inside the live Voilà, which names them
    on its command line): the hub imports this module too and needs neither Jupyter Server nor JupyterHub's
    single-user extension."""
    if name == "LiveViewers":
        globals()[name] = _live_viewers()
    elif name == "LiveKernelManager":
        globals()[name] = _live_kernel_manager()
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return globals()[name]


def _live_viewers():
    from sampan.hub.live_auth import LiveIdentityProvider

    class LiveViewers(LiveIdentityProvider):
        """The hub login of the live service (:mod:`sampan.hub.live_auth`), noting each viewer (:func:`note_viewer`)."""

        async def get_user(self, handler):
            user = await super().get_user(handler)
            note_viewer(handler, user)
            return user

    return LiveViewers


def _live_kernel_manager():
    from datetime import datetime, timezone

    from jupyter_core.utils import ensure_async
    from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager
    from tornado.web import HTTPError
    from traitlets import Float, Integer, TraitError, default

    def _refuse(status: int, why: str):
        # Voilà's error page shows the status and its reason (not the message): the reason says why
        raise HTTPError(status, why.replace("%", "%%"), reason=why)

    class LiveKernelManager(AsyncMappingKernelManager):
        """Jupyter Server's kernel manager with caps: each page of a live dashboard starts a kernel running the
        publisher's code (~0.5 GiB for a Sampan kernel), so a loop of GETs could fill the machine's memory.

        A page is refused, before its kernel starts, when its viewer has ``per_viewer`` kernels (429) or the
        service has ``max_kernels`` (503), with a message saying what to do; a kernel no page connected to
        (a plain GET, a tab closed while it rendered) is stopped ``unconnected_timeout`` idle seconds after
        its page was sent, never while the page still renders (on a busy machine Voilà may pause between
        cells longer than that). One still busy when its page was sent (a cell past ``CELL_SECONDS``, which
        ended the page) is stopped ``unconnected_timeout`` seconds after, busy or not, unless a page connects.
        """

        per_viewer = Integer(PER_VIEWER, config=True, help="Live kernels per hub user.")
        max_kernels = Integer(config=True, help="Live kernels in all (default: from the machine's memory).")
        unconnected_timeout = Float(UNCONNECTED_SECONDS, config=True,
                                    help="Idle seconds after which a kernel no page connected to is stopped.")

        @default("max_kernels")
        def _memory_limit(self):
            return kernel_limit()

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self._owners: dict[str, str] = {}  # kernel id -> viewer
            self._starting: dict[str, int] = {}  # viewer -> kernels being started (not yet in _owners)
            self._connected: set[str] = set()
            self._pages: dict[str, _Page | None] = {}  # kernel id -> the page request that started it

        def _running(self) -> list[str]:
            for kernel_id in [k for k in self._owners if k not in self]:
                del self._owners[kernel_id]
                self._connected.discard(kernel_id)
                self._pages.pop(kernel_id, None)
            return list(self._owners.values())

        async def start_kernel(self, *, kernel_id=None, path=None, **kwargs):
            viewer = _VIEWER.get()
            owners = self._running()
            mine = owners.count(viewer) + self._starting.get(viewer, 0)
            if mine >= self.per_viewer:
                _refuse(429, f"You have {mine} live dashboards open, the most one person may have: close another "
                             "live dashboard's tab (or wait a minute), then reload this page.")
            total = len(owners) + sum(self._starting.values())
            if total >= self.max_kernels:
                _refuse(503, f"The class's live dashboards are full ({total} running, the most this machine allows): "
                             "close the live dashboard tabs you no longer use, or try again in a few minutes "
                             "(the gallery's snapshots still open).")
            self._starting[viewer] = self._starting.get(viewer, 0) + 1  # counted before the first await
            try:
                kernel_id = await super().start_kernel(kernel_id=kernel_id, path=path, **kwargs)
            finally:
                self._starting[viewer] -= 1
            self._owners[kernel_id] = viewer
            self._pages[kernel_id] = _PAGE.get()
            return kernel_id

        def notify_connect(self, kernel_id):
            super().notify_connect(kernel_id)
            self._connected.add(kernel_id)

        def _unconnected_for(self, kernel_id) -> float:
            """Seconds since the kernel's page finished rendering and the kernel last spoke, with no page
            connected; 0 while its page still renders (its cells run before the browser can connect). A kernel
            busy after its page was sent runs a cell that outlived the page's timeout: its output goes nowhere,
            so only the time since the page counts."""
            kernel, page = self._kernels.get(kernel_id), self._pages.get(kernel_id)
            if kernel is None or kernel_id in self._connected or (page is not None and page.finished is None):
                return 0.0
            since_page = time.monotonic() - page.finished if page is not None else None
            if getattr(kernel, "execution_state", "") == "busy":
                return since_page or 0.0
            try:
                idle = (datetime.now(timezone.utc) - kernel.last_activity).total_seconds()
            except TraitError:  # no activity recorded yet
                return 0.0
            return idle if since_page is None else min(idle, since_page)

        async def cull_kernel_if_idle(self, kernel_id):
            if self._unconnected_for(kernel_id) > self.unconnected_timeout:
                self.log.info("Stopping kernel %s: no page connected to it", kernel_id)
                await ensure_async(self.shutdown_kernel(kernel_id))
                return
            await super().cull_kernel_if_idle(kernel_id)

    return LiveKernelManager


def live_url(user: str, name: str, prefix: str = f"/services/{LIVE_SERVICE}/") -> str:
    """The share link of a published dashboard (relative to the hub's public URL)."""
    return f"{prefix}voila/render/{user}/{name}.ipynb"


def sync(users_dir: Path, live_dir: Path) -> list[tuple[str, str]]:
    """Refreshes the service's read-only copies from the learners' galleries; returns ``[(learner, name)]``.

    A copy is made only of a published notebook reached in its learner's own folder without following a
    link (a learner's link to the hub database, or a link loop, is not copied) that parses as a notebook; copies of
    dashboards no longer published are removed. Files are 0644 and folders 0755, owned by the hub.
    """
    from sampan.hub.service import NOTEBOOK_BYTES, published, read_learner_file  # headless

    target = live_dir / "dashboards"
    kept: set[Path] = set()
    for user, entry in published(users_dir):
        name = str(entry.get("name", ""))
        if not _NAME.match(name):
            continue
        # no link followed on the way (a loop, or a link to the hub's files), a regular file of bounded size
        data = read_learner_file(users_dir / user, f".sampan/gallery/{name}.ipynb", NOTEBOOK_BYTES)
        try:
            if data is None or not isinstance(json.loads(data).get("cells"), list):
                continue
        except (ValueError, AttributeError):
            continue
        copy = target / user / f"{name}.ipynb"
        kept.add(copy)
        if copy.is_file() and copy.read_bytes() == data:
            continue
        copy.parent.mkdir(mode=0o750, exist_ok=True)
        tmp = copy.with_name(f".{copy.name}.tmp")
        tmp.write_bytes(data)
        tmp.chmod(0o640)  # the live service's group (make_live_dir), not every local account
        os.replace(tmp, copy)
    for stale in target.glob("*/*.ipynb"):
        if stale not in kept:
            stale.unlink()
    return sorted((p.parent.name, p.stem) for p in kept)
