"""``SampanAuthenticator``: NativeAuthenticator (sign-up, teacher approval, bcrypt passwords in the hub DB).

Two changes to NativeAuthenticator's defaults close its classic hole, where the
first person to sign up with an admin's name became admin: a teacher's account is
never created by the sign-up form; ``sampan hub`` creates it when that teacher has
no account yet, from ``SAMPAN_HUB_TEACHER_PASSWORD`` (an environment variable or a prompt, never a
command-line argument), which it hands to the hub in a private file (0600) the hub deletes once read,
never in the hub's environment (``/proc/PID/environ`` stays readable by the hub's account).
Students on the roster are approved in advance; assistants and everyone else wait for a teacher
at ``/hub/authorize``. This module imports JupyterHub: only the hub process and ``sampan hub`` (to read the
hub's database before it starts the hub) load it.

Example:
    c.JupyterHub.authenticator_class = "sampan.hub.auth.SampanAuthenticator"
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import bcrypt
from nativeauthenticator import NativeAuthenticator
from nativeauthenticator.orm import UserInfo

from sampan.errors import bad_argument
from sampan.hub.config import MIN_PASSWORD_LENGTH, PASSWORD_ENV, PASSWORD_FILE_ENV


def check_teacher_password(name: str, password: str, rules: NativeAuthenticator | None = None) -> str:
    """``password`` when a learner could sign up with it too (NativeAuthenticator's ``is_password_strong``:
    long enough, not a common password); else a ValueError naming the teacher (not echoing the password)."""
    rules = rules or NativeAuthenticator(add_new_table=False, minimum_password_length=MIN_PASSWORD_LENGTH,
                                         check_common_password=True)
    if not rules.is_password_strong(password):
        raise ValueError(bad_argument(
            f"the password of the teacher {name!r}", f"({len(password)} characters, not shown)",
            f"at least {rules.minimum_password_length} characters and not a common password, like a learner's",
            f"choose a longer one (four unrelated words make a good one) and set {PASSWORD_ENV} again"))
    return password


def teachers_without_account(db_url: str, teachers: Iterable[str]) -> list[str]:
    """The ``teachers`` with no account in the hub's database ``db_url`` (SQLite or PostgreSQL, read with
    SQLAlchemy as the hub reads it); all of them while that database does not exist yet."""
    from sqlalchemy import create_engine, inspect, select
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError

    url, names = make_url(db_url), sorted(set(teachers))
    if url.get_backend_name() == "sqlite" and not (url.database and Path(url.database).is_file()):
        return names  # a first start: nothing to read (and no empty file made before the hub makes it 0600)
    try:
        engine = create_engine(url)  # PostgreSQL: an ImportError without its driver
        try:
            with engine.connect() as db:
                if not inspect(db).has_table(UserInfo.__tablename__):
                    return names
                query = select(UserInfo.username).where(UserInfo.username.in_(names))
                have = {row[0] for row in db.execute(query)}
        finally:
            engine.dispose()
    except (SQLAlchemyError, ImportError) as exc:
        raise ValueError(bad_argument("the hub's database", url.render_as_string(hide_password=True),
                                      "a database `sampan hub` can read to see which teachers have an account",
                                      f"{type(exc).__name__}: {str(exc).splitlines()[0]}; check SAMPAN_HUB_DB_URL, "
                                      "that its driver is installed and that the database server runs")) from None
    return [name for name in names if name not in have]


class SampanAuthenticator(NativeAuthenticator):
    """NativeAuthenticator whose teacher (admin) accounts come from ``sampan hub``, not from sign-up."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        passwords: dict[str, str] = {}
        password = os.environ.pop(PASSWORD_ENV, None)  # a hub started by hand (`jupyterhub -f ...`): every teacher
        if password:
            passwords = dict.fromkeys(self.admin_users, password)
        file = os.environ.pop(PASSWORD_FILE_ENV, None)  # `sampan hub`: {teacher: password}, a private file
        if file:
            try:
                passwords.update(json.loads(Path(file).read_text(encoding="utf-8")))
            finally:
                Path(file).unlink(missing_ok=True)
        for name in sorted(self.admin_users):
            if name in passwords:
                self.ensure_teacher(name, passwords[name])
            elif self.get_user(name) is None:
                self.log.error("The teacher %r has no account and no password was given, so nobody can log in "
                               "as %r. HINT: stop the hub and start `sampan hub` again in a terminal (it asks for "
                               "the password) or with %s set", name, name, PASSWORD_ENV)

    def ensure_teacher(self, username: str, password: str) -> None:
        """Creates (approved) or re-keys the teacher account ``username``; a weak password is a ValueError."""
        check_teacher_password(username, password)  # Sampan's rule, whatever the configuration says
        check_teacher_password(username, password, rules=self)  # and the hub's, where it is stricter
        info = self.get_user(username)
        hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt())
        if info is None:
            self.db.add(UserInfo(username=username, password=hashed, is_authorized=True))
        else:
            info.password, info.is_authorized = hashed, True
        self.db.commit()

    def create_user(self, username, password, **kwargs):
        if self.normalize_username(username) in self.admin_users:
            self.log.warning("refused a sign-up with the teacher name %r", username)
            return None
        return super().create_user(username, password, **kwargs)
