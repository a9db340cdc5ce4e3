"""The spawner of ``sampan hub``: each learner's own JupyterLab, home folder, course copy and data.

On one machine without a Unix account per learner, JupyterHub's
``SimpleLocalProcessSpawner`` starts every server as the hub's own user in
``<hub dir>/users/<name>``; a hub run as root starts them as ``SAMPAN_HUB_LEARNER_USER``
(:func:`sampan.hub.config.learner_account`), so that no learner is root and none reads the hub's
files. Before a server starts, :class:`SampanSpawner` syncs the course into ``~/course`` (new files
copied, the learner's edits never overwritten: :func:`sampan.hub.course.sync_course`) and links
``~/datasets`` to the shared datasets. Learners are separated by convention, not by the operating system: for a
class whose learners must not reach each other's files, use one Unix account per
learner (``LocalProcessSpawner``) or Kubernetes (``deploy/``), where the course data
is a read-only volume. This module imports JupyterHub: only the hub process loads it.

Example:
    c.JupyterHub.spawner_class = "sampan.hub.spawner.SampanSpawner"
"""
from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

from jupyterhub.spawner import SimpleLocalProcessSpawner
from traitlets import Unicode

from sampan.hub.course import SyncReport, prepare_home
from sampan.hub.config import STAFF_USER_ENV
from sampan.utils.net import free_port


PYTHON = sys.executable  # the learners' servers run it too (config.learner_account checks they can)
PREPARE_SECONDS = 120
# prepare_home in a fresh interpreter (as the learner: sampan imports no torch, so it starts in a fraction of a
# second); its report as JSON on the last line.
_PREPARE = ("import json, sys\n"
            "from pathlib import Path\n"
            "from sampan.hub.course import prepare_home\n"
            "r = prepare_home(Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4])\n"
            "print(json.dumps([r.copied, r.updated, r.kept]))\n")


class SampanSpawner(SimpleLocalProcessSpawner):
    """``SimpleLocalProcessSpawner`` plus the course copy, the shared datasets and Sampan's environment."""

    course_dir = Unicode("", config=True, help="the course to copy into each learner's ~/course")
    datasets_dir = Unicode("", config=True, help="shared datasets, linked as ~/datasets")
    learner_user = Unicode("", config=True, help="the Unix account the servers run as (empty: the hub's own)")
    staff_user = Unicode("", config=True, help="with learner_user: the account teachers' and assistants' servers run as")
    lang = Unicode("en", config=True, help="the class's language: JupyterLab's UI language in a new home")

    async def start(self):
        home = Path(self.home_dir)
        home.mkdir(parents=True, exist_ok=True)
        account = server_account(self)
        if account:
            _hand_over(home, account)
            report = await asyncio.to_thread(self._prepare_as_learner, home)
        else:
            report = prepare_home(home, self.course_dir, self.datasets_dir, self.lang)
        if report is not None:
            self.log.info("course for %s: %d copied, %d updated, %d kept (edited by the learner)",
                          self.user.name, len(report.copied), len(report.updated), len(report.kept))
        if not self.port:  # JupyterHub's own pick is an ephemeral port, which any outgoing connection may take first
            self.port = free_port()
        return await super().start()

    def _prepare_as_learner(self, home: Path) -> SyncReport | None:
        """:func:`~sampan.hub.course.prepare_home` in a process of the learner account (the course must be
        readable by it); its failure is logged and the server starts anyway."""
        import json
        import subprocess

        from jupyterhub.spawner import set_user_setuid

        account = server_account(self)
        env = {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
        # -s -P: neither the learner's user site nor the working folder on sys.path; output read up to 64 KiB and
        # the process group killed after PREPARE_SECONDS (the learner's files could make it print or hang)
        proc = subprocess.Popen([PYTHON, "-s", "-P", "-c", _PREPARE, str(home), self.course_dir, self.datasets_dir,
                                 self.lang],
                                env=env, cwd="/", preexec_fn=set_user_setuid(account, chdir=False),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        output = _read_bounded(proc, deadline=time.monotonic() + PREPARE_SECONDS, limit=1 << 16)
        try:
            code = proc.wait(timeout=1)  # it printed its report and exited, or is stuck on a full pipe / a hang
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
        if code != 0:
            self.log.error("preparing the home of %s as %s failed: %s", self.user.name, account,
                           output.strip()[-2000:] if code is not None else "it took too long")
            return None
        try:
            return SyncReport(*json.loads(output.strip().splitlines()[-1]))
        except (ValueError, IndexError, TypeError):
            self.log.error("preparing the home of %s: unexpected output %r", self.user.name, output[-200:])
            return None

    def make_preexec_fn(self, name):
        account = server_account(self)
        if not account:
            return super().make_preexec_fn(name)
        from jupyterhub.spawner import set_user_setuid

        switch, home = set_user_setuid(account, chdir=False), self.home_dir

        def preexec():
            switch()
            os.chdir(home)

        return preexec

    def user_env(self, env):
        env = super().user_env(env)
        env["SAMPAN_DATA"] = str(Path(self.home_dir) / ".sampan")
        env["SAMPAN_LEARNER_HOME"] = self.home_dir
        return env

    def get_args(self):
        args = super().get_args()
        if hasattr(os, "geteuid") and os.geteuid() == 0 and not self.learner_user:  # SAMPAN_HUB_LEARNER_USER=root
            args.append("--allow-root")
        return args


STAFF_ROLES = {"teacher", "assistant"}


def server_account(spawner) -> str:
    """The Unix account a server runs as: ``""`` for the hub's own; with ``learner_user``, that account, except for a
    teacher or assistant, whose server runs as ``staff_user``. Never the learners' account for them: every learner's
    processes run as it and could write into the teacher's home (IPython startup files, Jupyter config, JupyterLab
    extensions) what then runs in the teacher's kernels and browser, where the teacher is a hub admin.

    Raises:
        RuntimeError: a teacher's or assistant's server with ``learner_user`` and no ``staff_user``; the hub shows
            the message on the spawn page.
    """
    if not spawner.learner_user:
        return ""
    user = getattr(spawner, "user", None)
    roles = {getattr(r, "name", r) for r in getattr(user, "roles", None) or ()}
    if user is None or not (getattr(user, "admin", False) or roles & STAFF_ROLES):
        return spawner.learner_user
    if not getattr(spawner, "staff_user", ""):
        raise RuntimeError(
            f"{user.name!r} teaches or assists, and the learners' servers run as the account "
            f"{spawner.learner_user!r}: run as it, this server could be changed by any learner (their processes "
            f"write into its home), so it is not started. HINT: create an account for the staff's servers "
            f"(useradd --system --shell /usr/sbin/nologin sampan-staff), set {STAFF_USER_ENV}=sampan-staff and "
            "restart the hub; the teacher dashboard and the admin page need no server.")
    return spawner.staff_user


def _read_bounded(proc, *, deadline: float, limit: int) -> str:
    """What ``proc`` prints until it closes its output, ``limit`` bytes have come or ``deadline`` passes."""
    import selectors

    chunks, size = [], 0
    with selectors.DefaultSelector() as selector, proc.stdout:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while size < limit:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                break
            data = os.read(proc.stdout.fileno(), min(8192, limit - size))
            if not data:
                break
            chunks.append(data)
            size += len(data)
    return b"".join(chunks).decode("utf-8", "replace")


def _hand_over(home: Path, user: str) -> None:
    """Gives the learner account its new, empty home (0700). A home that already holds files (made before the
    hub ran learners as this account) is refused: walking and chowning it as root could be raced by a learner
    process swapping a folder for a link, and root would hand them a folder outside the home."""
    import pwd

    entry = pwd.getpwnam(user)
    info = home.lstat()
    if (info.st_uid, info.st_gid) == (entry.pw_uid, entry.pw_gid):
        return
    if any(home.iterdir()):
        raise RuntimeError(
            f"The home {home} holds files made before the hub ran the learners' servers as {user!r}. HINT: stop "
            f"every process of {user!r}, then `chown -R {user}: {home}` (or move the folder aside for a fresh one).")
    os.chown(home, entry.pw_uid, entry.pw_gid)
    home.chmod(0o700)
