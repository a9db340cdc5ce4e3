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

import os
from pathlib import Path

from jupyterhub.spawner import SimpleLocalProcessSpawner
from traitlets import Unicode

from sampan.hub.course import sync_course
from sampan.utils.net import free_port


class SampanSpawner(SimpleLocalProcessSpawner):
    """``SimpleLocalProcessSpawner`` plus the course copy, the shared datasets and Sampan's environment."""

    course_dir = Unicode("", config=True, help="the course to copy into each learner's ~/course")
    datasets_dir = Unicode("", config=True, help="shared datasets, linked as ~/datasets")
    learner_user = Unicode("", config=True, help="the Unix account the servers run as (empty: the hub's own)")

    async def start(self):
        home = Path(self.home_dir)
        home.mkdir(parents=True, exist_ok=True)
        if self.course_dir and Path(self.course_dir).is_dir():
            report = sync_course(Path(self.course_dir), home / "course")
            self.log.info("course for %s: %d copied, %d updated, %d kept (edited by the learner)",
                          self.user.name, len(report.copied), len(report.updated), len(report.kept))
        news = home / ".jupyter/lab/user-settings/@jupyterlab/apputils-extension/notification.jupyterlab-settings"
        if not news.exists():  # offline first: no learner's JupyterLab asks to fetch news from the internet
            news.parent.mkdir(parents=True, exist_ok=True)
            news.write_text('{"fetchNews": "false", "checkForUpdates": false}\n', encoding="utf-8")
        link = home / "datasets"
        if self.datasets_dir and not link.exists() and not link.is_symlink():
            link.symlink_to(Path(self.datasets_dir), target_is_directory=True)
        if not self.port:  # JupyterHub's own pick is an ephemeral port, which any outgoing connection may take first
            self.port = free_port()
        if self.learner_user:
            _give_home(home, self.learner_user)
        return await super().start()

    def make_preexec_fn(self, name):
        if not self.learner_user:
            return super().make_preexec_fn(name)
        from jupyterhub.spawner import set_user_setuid

        switch, home = set_user_setuid(self.learner_user, chdir=False), self.home_dir

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


def _give_home(home: Path, user: str) -> None:
    """Hands the learner's home (0700) and what the hub wrote in it (the course copy, settings) to ``user``;
    never follows a link the learner made."""
    import pwd

    entry = pwd.getpwnam(user)
    owner = (entry.pw_uid, entry.pw_gid)
    home.chmod(0o700)
    for folder, dirs, files in os.walk(home):
        for path in [Path(folder)] + [Path(folder) / n for n in (*dirs, *files)]:
            info = path.lstat()
            if (info.st_uid, info.st_gid) != owner:
                os.lchown(path, *owner)
