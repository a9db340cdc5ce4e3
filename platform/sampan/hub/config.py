"""The JupyterHub configuration of ``sampan hub`` (``deploy/jupyterhub_config.py`` calls :func:`configure`).

One machine, one class: JupyterHub with configurable-http-proxy on 127.0.0.1
(``SAMPAN_HUB_IP`` for a LAN address, with TLS from ``SAMPAN_HUB_SSL_CERT`` /
``SAMPAN_HUB_SSL_KEY``), :class:`~sampan.hub.auth.SampanAuthenticator`
(NativeAuthenticator), SQLite in the hub folder (``SAMPAN_HUB_DB_URL`` for
PostgreSQL), :class:`~sampan.hub.spawner.SampanSpawner`, the teacher dashboard
service ``progress``, ``jupyterhub-idle-culler`` and the ``live`` dashboards (:mod:`sampan.hub.live`:
Voilà behind hub login, as an unprivileged user when the hub runs as root). Roles (JupyterHub RBAC):

- ``teacher``: hub admin plus ``custom:progress:read``;
- ``assistant``: ``custom:progress:read`` and the user list, no access to servers (no files);
- ``student`` (the built-in ``user`` role): their own server, their own progress page;
- ``assistant`` and ``student`` also open the class's live dashboards (``access:services!service=live``).

Every setting comes from ``SAMPAN_HUB_*`` environment variables, which ``sampan hub`` sets.

Example:
    # jupyterhub_config.py
    from sampan.hub.config import configure
    configure(c)
"""
from __future__ import annotations

import os
import shutil
import stat
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from sampan.errors import bad_argument
from sampan.hub.live import LIVE_SERVICE, LIVE_BOOT, LivePlan, live_plan, make_live_dir, reachable_by
from sampan.hub.roster import by_role, read_roster
from sampan.utils.io import atomic_write_text
from sampan.utils.net import free_port
from sampan.utils.notebooks import encryption_args

SERVICE = "progress"
# The progress service needs only the standard library, tornado and JupyterHub (`import sampan` loads no torch), and
# JupyterHub gives a managed service about ten seconds to answer.
SERVICE_BOOT = "from sampan.hub.service import main; main()"
CULLER = "idle-culler"
BUSY_EXTENSION = "sampan.hub.busy"  # in each learner's server: busy kernels and running jobs reported as activity
CUSTOM_SCOPES = {
    "custom:progress:read": {"description": "Read every learner's progress on the teacher dashboard."},
    "custom:progress:write": {"description": "Post one's own progress events to the teacher dashboard."},
}
LEARNER_USER_ENV = "SAMPAN_HUB_LEARNER_USER"  # as root: the account the learners' servers run as
STAFF_USER_ENV = "SAMPAN_HUB_STAFF_USER"  # with a learner account: the one teachers' and assistants' servers run as
PASSWORD_ENV = "SAMPAN_HUB_TEACHER_PASSWORD"  # the teacher's password, for `sampan hub` (never a command line)
PASSWORD_FILE_ENV = "SAMPAN_HUB_TEACHER_PASSWORD_FILE"  # how `sampan hub` hands it to the hub: a private file
MIN_PASSWORD_LENGTH = 8  # every account's, the teachers' too (NativeAuthenticator also refuses common passwords)


@dataclass
class HubSettings:
    """What ``sampan hub`` decides; :meth:`from_env` reads it back inside the hub process."""

    hub_dir: Path
    ip: str = "127.0.0.1"
    port: int = 8000
    teachers: set[str] = field(default_factory=lambda: {"teacher"})
    roster: dict[str, str] = field(default_factory=dict)
    course_dir: str = ""
    datasets_dir: str = ""
    cull_timeout: int = 3600
    cull_every: int = 300
    activity_interval: int = 60
    db_url: str = ""
    ssl_cert: str = ""
    ssl_key: str = ""
    live: str = "auto"
    live_user: str = "nobody"
    learner_user: str = ""
    staff_user: str = ""
    lang: str = "en"  # the class's language: the course built in it, the kernels' and JupyterLab's language

    @classmethod
    def from_env(cls, env=os.environ) -> "HubSettings":
        from sampan.path.lang import default_language, normalize_language
        from sampan.utils.io import data_home, repo_root

        roster = read_roster(env["SAMPAN_HUB_ROSTER"]) if env.get("SAMPAN_HUB_ROSTER") else {}
        root = repo_root()
        teachers = {t for t in env.get("SAMPAN_HUB_TEACHER", "teacher").split(",") if t} | by_role(roster, "teacher")
        return cls(
            hub_dir=Path(env.get("SAMPAN_HUB_DIR") or data_home() / "hub"),
            ip=env.get("SAMPAN_HUB_IP", "127.0.0.1"), port=int(env.get("SAMPAN_HUB_PORT", "8000")),
            teachers=teachers, roster=roster,
            course_dir=env.get("SAMPAN_HUB_COURSE", str(root / "notebooks") if root else ""),
            datasets_dir=env.get("SAMPAN_HUB_DATASETS", str(root / "datasets") if root else ""),
            cull_timeout=int(env.get("SAMPAN_HUB_CULL_TIMEOUT", "3600")),
            cull_every=int(env.get("SAMPAN_HUB_CULL_EVERY", "300")),
            activity_interval=int(env.get("SAMPAN_HUB_ACTIVITY_INTERVAL", "60")),
            db_url=env.get("SAMPAN_HUB_DB_URL", ""),
            ssl_cert=env.get("SAMPAN_HUB_SSL_CERT", ""), ssl_key=env.get("SAMPAN_HUB_SSL_KEY", ""),
            live=env.get("SAMPAN_HUB_LIVE", "auto"), live_user=env.get("SAMPAN_HUB_LIVE_USER", "nobody"),
            learner_user=env.get(LEARNER_USER_ENV, ""), staff_user=env.get(STAFF_USER_ENV, ""),
            lang=normalize_language(env.get("SAMPAN_HUB_LANG") or default_language(env), "SAMPAN_HUB_LANG"),
        )

    @property
    def hub_db_url(self) -> str:
        """The hub's database (users, approvals, passwords): ``db_url``, else ``jupyterhub.sqlite`` in the folder."""
        return self.db_url or f"sqlite:///{self.hub_dir / 'jupyterhub.sqlite'}"

    @property
    def public_url(self) -> str:
        return public_url(self.ip, self.port, tls=bool(self.ssl_cert))


def public_url(ip: str, port: int | str, *, tls: bool = False) -> str:
    """The hub's address, an IPv6 address in brackets: ``public_url("::1", 8000)`` is ``http://[::1]:8000/``."""
    host = f"[{ip}]" if ":" in ip and not ip.startswith("[") else ip
    return f"{'https' if tls else 'http'}://{host}:{port}/"


def learner_account(user: str, live_user: str | None = None) -> str | None:
    """The Unix account the learners' servers run as when the hub runs as root (``SAMPAN_HUB_LEARNER_USER``).

    ``None``: the hub's own account (without root, as documented; as root only when asked for with ``root``).
    A hub that runs as root gives every learner a root shell unless their servers run as another account, so as
    root the choice must be made: an unprivileged account that can run this Python, or ``root``.

    Raises:
        ValueError: as root with no choice, or an account that does not exist, is root by another name, cannot
            run this Python, or is the live dashboards' account.

    Example:
        >>> import os
        >>> from sampan.hub.config import learner_account
        >>> learner_account("sampan-learner") if os.geteuid() != 0 else None  # without root: the hub's account
    """
    if not (hasattr(os, "geteuid") and os.geteuid() == 0):
        return None
    fix = ("create an account for the learners' servers (useradd --system --shell /usr/sbin/nologin "
           f"sampan-learner) and set {LEARNER_USER_ENV}=sampan-learner; or set {LEARNER_USER_ENV}=root to accept "
           "that every learner is root (a container or virtual machine given to the class)")
    if not user:
        raise ValueError(bad_argument(LEARNER_USER_ENV, "(unset)", "the account the learners' servers run as, "
                                      "since the hub runs as root and would otherwise make every learner root", fix))
    if user == "root":
        return None
    from sampan.hub.live import _user_problem

    problem = _user_problem(user)
    if problem is None and user == live_user:
        problem = f"{user!r} runs the live dashboards, whose kernels the learners could then read and disturb"
    if problem is not None:
        raise ValueError(bad_argument(LEARNER_USER_ENV, user, "an existing unprivileged account that can run "
                                      f"{sys.executable}", f"{problem}; {fix}"))
    return user


def staff_account(user: str, learner: str, live_user: str | None = None) -> str:
    """The account teachers' and assistants' servers run as when the learners' run as ``learner``
    (``SAMPAN_HUB_STAFF_USER``; unset: their servers are not started, see :func:`sampan.hub.spawner.server_account`).

    Raises:
        ValueError: an account that does not exist, is privileged, cannot run this Python, or is the learners' or
            the live dashboards' account.
    """
    if not user:
        return ""
    from sampan.hub.live import _user_problem

    problem = _user_problem(user) if user != "root" else "it is root: a teacher's server would be a root shell"
    if problem is None and user in (learner, live_user):
        problem = f"{user!r} also runs the {'learners' if user == learner else 'live dashboards'}' servers"
    if problem is not None:
        raise ValueError(bad_argument(STAFF_USER_ENV, user, "an existing unprivileged account, not the learners', "
                                      f"that can run {sys.executable}", f"{problem}; create one (useradd --system "
                                      "--shell /usr/sbin/nologin sampan-staff) and set "
                                      f"{STAFF_USER_ENV}=sampan-staff"))
    return user


def proxy_command() -> str:
    """configurable-http-proxy: the one ``make`` installs under ``<venv>/share/sampan-node``, else on PATH."""
    local = Path(sys.prefix) / "share" / "sampan-node" / "node_modules" / ".bin" / "configurable-http-proxy"
    found = str(local) if local.is_file() else shutil.which("configurable-http-proxy")
    if not found:
        raise FileNotFoundError(
            "configurable-http-proxy is not installed. HINT: run `make hub-proxy` (needs Node and npm: "
            "apt-get install nodejs npm) or `npm install -g configurable-http-proxy`.")
    return found


def culler_config() -> Path:
    """``deploy/idle_culler_config.py``: the culler's hook that spares a learner's running jobs (busy kernels
    report themselves to the hub: :mod:`sampan.hub.busy`)."""
    from sampan.utils.io import repo_root

    root = repo_root()
    if root is not None and (root / "deploy" / "idle_culler_config.py").is_file():
        return root / "deploy" / "idle_culler_config.py"
    raise FileNotFoundError("deploy/idle_culler_config.py not found. HINT: run `sampan hub` from the source "
                            "checkout, or set SAMPAN_HOME to it.")


def roles(s: HubSettings) -> list[dict]:
    """JupyterHub RBAC roles: teacher, assistant, the default user and server roles, the services'."""
    service_access = f"access:services!service={SERVICE}"
    live_access = f"access:services!service={LIVE_SERVICE}"  # open a classmate's live dashboard
    return [
        {"name": "teacher", "users": sorted(s.teachers),
         "scopes": ["admin:users", "admin:servers", "access:servers", "read:roles:users", "access:services",
                    "custom:progress:read"]},
        {"name": "assistant", "users": sorted(by_role(s.roster, "assistant")),
         "scopes": ["list:users", "read:users:activity", service_access, live_access, "custom:progress:read"]},
        {"name": "user", "scopes": ["self", service_access, live_access, "custom:progress:write"]},
        {"name": "server", "scopes": ["users:activity!user", "access:servers!server", service_access,
                                      "custom:progress:write"]},
        {"name": "progress-service", "services": [SERVICE], "scopes": ["list:users", "read:users", "read:roles:users"]},
        # no access:servers: the culler reads the hub's records only (busy servers report themselves:
        # sampan.hub.busy), and a token that opens every server must not exist outside the hub
        {"name": "idle-culler", "services": [CULLER],
         "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]},
    ]


def services(s: HubSettings) -> list[dict]:
    """The teacher dashboard and the idle culler, both started and stopped by the hub."""
    culler = [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={s.cull_timeout}",
              f"--cull-every={s.cull_every}", f"--config={culler_config()}"]
    return [
        {"name": SERVICE, "url": f"http://127.0.0.1:{free_port()}", "display": True,
         "command": [sys.executable, "-c", SERVICE_BOOT], "oauth_no_confirm": True,
         "oauth_client_allowed_scopes": sorted(CUSTOM_SCOPES),
         "environment": {"SAMPAN_PROGRESS_DB": str(s.hub_dir / "progress.sqlite"),
                         "SAMPAN_HUB_USERS": str(s.hub_dir / "users"),
                         "SAMPAN_HUB_COURSE": s.course_dir}},  # its path.yaml: the teacher page's columns
        {"name": CULLER, "command": culler, "environment": {"SAMPAN_HUB_USERS": str(s.hub_dir / "users")}},
    ]


def live_service(plan: LivePlan, live_dir: Path) -> dict:
    """The ``live`` service: Voilà on the copies in ``live_dir``, as ``plan.user`` (JupyterHub's setuid)."""
    service = {"name": LIVE_SERVICE, "url": f"http://127.0.0.1:{free_port()}", "display": True,
               "command": [sys.executable, "-s", "-c", LIVE_BOOT], "oauth_no_confirm": True,
               "cwd": str(live_dir / "dashboards"),
               "environment": {"SAMPAN_LIVE_DIR": str(live_dir),
                               "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}}
    if plan.user is not None:
        service["user"] = plan.user
    return service


def class_course(s: HubSettings) -> str:
    """The course the learners get: ``s.course_dir`` built in the class's language (one language a notebook, the
    code's comments and printed words translated: :func:`sampan.path.lang.build_course`) into
    ``<hub dir>/course/<lang>``, rebuilt where the source changed; ``""`` without a course."""
    if not s.course_dir or not Path(s.course_dir).is_dir():
        return ""
    from sampan.path.lang import build_course

    return str(build_course(s.lang, s.hub_dir / "course" / s.lang, s.course_dir))


def configure(c, settings: HubSettings | None = None) -> HubSettings:
    """Fills a JupyterHub config object ``c`` for one class on one machine; returns the settings used."""
    import nativeauthenticator

    s = settings or HubSettings.from_env()
    s.hub_dir.mkdir(parents=True, exist_ok=True)
    (s.hub_dir / "users").mkdir(exist_ok=True)
    s = replace(s, course_dir=class_course(s))
    c.JupyterHub.bind_url = s.public_url
    c.JupyterHub.hub_ip, c.JupyterHub.hub_port = "127.0.0.1", free_port()
    c.JupyterHub.db_url = s.hub_db_url
    c.JupyterHub.cookie_secret_file = str(s.hub_dir / "jupyterhub_cookie_secret")
    c.JupyterHub.pid_file = str(s.hub_dir / "jupyterhub.pid")
    if s.ssl_cert:
        c.JupyterHub.ssl_cert, c.JupyterHub.ssl_key = s.ssl_cert, s.ssl_key
    c.ConfigurableHTTPProxy.command = [proxy_command()]
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{free_port()}"
    c.ConfigurableHTTPProxy.pid_file = str(s.hub_dir / "proxy.pid")

    c.JupyterHub.authenticator_class = "sampan.hub.auth.SampanAuthenticator"
    c.JupyterHub.template_paths = [str(Path(nativeauthenticator.__file__).parent / "templates")]
    c.Authenticator.admin_users = set(s.teachers)
    # students on the roster are approved in advance at sign-up; an assistant's sign-up waits for a teacher (whoever
    # signs up first with a roster name gets it, and an assistant's name carries the class's progress)
    c.Authenticator.allowed_users = by_role(s.roster, "student") - set(s.teachers)
    c.Authenticator.allow_all = True  # NativeAuthenticator's approval is the gate
    c.NativeAuthenticator.open_signup = False
    c.NativeAuthenticator.minimum_password_length = MIN_PASSWORD_LENGTH
    c.NativeAuthenticator.check_common_password = True
    c.NativeAuthenticator.allowed_failed_logins = 5
    c.NativeAuthenticator.seconds_before_next_try = 60

    c.JupyterHub.spawner_class = "sampan.hub.spawner.SampanSpawner"
    c.SimpleLocalProcessSpawner.home_dir_template = str(s.hub_dir / "users" / "{username}")
    c.SampanSpawner.course_dir, c.SampanSpawner.datasets_dir = s.course_dir, s.datasets_dir
    c.SampanSpawner.lang = s.lang
    c.Spawner.cmd = [sys.executable, "-m", "jupyterhub.singleuser"]
    c.Spawner.default_url = "/lab/tree/course/index.ipynb" if s.course_dir else "/lab"
    c.Spawner.args = ["--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                      # a busy kernel or a running job counts as activity: the culler spares the server
                      f"--ServerApp.jpserver_extensions={BUSY_EXTENSION}=True",
                      *encryption_args()]  # a learner's kernels: their outputs unreadable to the other learners
    c.Spawner.env_keep = ["PATH", "PYTHONPATH", "LANG", "LC_ALL", "OMP_NUM_THREADS", "SAMPAN_HOME",
                          "SAMPAN_TRACKING_URI", "VIRTUAL_ENV"]
    c.Spawner.environment = {
        "SAMPAN_PROGRESS_URL": f"{s.public_url}services/{SERVICE}/api/events",
        "JUPYTERHUB_ACTIVITY_INTERVAL": str(s.activity_interval),
        "SAMPAN_LANG": s.lang,  # the exercises' feedback, the dashboards and reports speak the class's language
    }
    c.Spawner.start_timeout = c.Spawner.http_timeout = 120

    c.JupyterHub.custom_scopes = CUSTOM_SCOPES
    c.JupyterHub.load_roles = roles(s)
    c.JupyterHub.services = services(s)
    plan = live_plan(s.live, s.live_user)
    print(f"[sampan hub] {plan.reason}", file=sys.stderr)
    learner = learner_account(s.learner_user, plan.user)
    if learner and not reachable_by(s.hub_dir.parent, learner, last=stat.S_IXOTH):
        raise ValueError(bad_argument("SAMPAN_HUB_DIR", str(s.hub_dir), f"a folder {learner!r} can pass through to "
                                      "its home in users/", "a folder above it is private (such as root's home): "
                                      "start the hub with --dir /srv/sampan-hub or another folder outside it"))
    c.SampanSpawner.learner_user = learner or ""
    c.SampanSpawner.staff_user = staff_account(s.staff_user, learner, plan.user) if learner else ""
    # the database, cookie secret and learners' homes: no other local account reads them. With a learner
    # account, it may pass through to the homes (0711, no listing) but read no file of the hub's: the databases
    # are made 0600 before they are first opened (SQLite gives its journals the database's mode).
    secret = s.hub_dir / "jupyterhub_cookie_secret"
    if not secret.exists():  # JupyterHub would write it 0644 and chmod it after: a learner could open it between
        import secrets

        atomic_write_text(secret, secrets.token_hex(32) + "\n", private=True)  # born 0600, renamed into place
    s.hub_dir.chmod(0o711 if learner else 0o700)
    (s.hub_dir / "users").chmod(0o711 if learner else 0o755)
    for name in ("progress.sqlite",) if s.db_url else ("jupyterhub.sqlite", "progress.sqlite"):
        os.close(os.open(s.hub_dir / name, os.O_CREAT | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0), 0o600))
    for file in s.hub_dir.iterdir():
        if file.is_file() and not file.is_symlink():
            file.chmod(0o600)
    print(f"[sampan hub] learners' servers run as {learner or 'the hub account'}", file=sys.stderr)
    if plan.enabled:
        live_dir = make_live_dir(s.hub_dir, plan.user)
        progress = next(x for x in c.JupyterHub.services if x["name"] == SERVICE)
        progress["environment"]["SAMPAN_LIVE_DIR"] = str(live_dir)  # it keeps the copies fresh and links them
        c.JupyterHub.services.append(live_service(plan, live_dir))
    c.JupyterHub.last_activity_interval = min(300, max(5, s.activity_interval))
    return s
