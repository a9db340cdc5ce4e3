"""``SampanAuthenticator``: NativeAuthenticator (sign-up, teacher approval, bcrypt passwords in the hub DB).

Two changes to NativeAuthenticator's defaults close its classic hole, where the
first person to sign up with an admin's name became admin: a teacher's account is
never created by the sign-up form; ``sampan hub`` creates it at start from
``SAMPAN_HUB_TEACHER_PASSWORD`` (an environment variable or a prompt, never a
command-line argument), which it hands to the hub in a private file (0600) the hub deletes once read,
never in the hub's environment (``/proc/PID/environ`` stays readable by the hub's account).
People on the roster are approved in advance; everyone else waits for a teacher
at ``/hub/authorize``. This module imports JupyterHub: only the hub process loads it.

Example:
    c.JupyterHub.authenticator_class = "sampan.hub.auth.SampanAuthenticator"
"""
from __future__ import annotations

import os
from pathlib import Path

import bcrypt
from nativeauthenticator import NativeAuthenticator
from nativeauthenticator.orm import UserInfo

from sampan.hub.config import PASSWORD_ENV, PASSWORD_FILE_ENV



class SampanAuthenticator(NativeAuthenticator):
    """NativeAuthenticator whose teacher (admin) accounts come from ``sampan hub``, not from sign-up."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        password = os.environ.pop(PASSWORD_ENV, None)  # a hub started by hand (`jupyterhub -f ...`)
        file = os.environ.pop(PASSWORD_FILE_ENV, None)  # `sampan hub`: a private file, deleted once read
        if file:
            try:
                password = Path(file).read_text(encoding="utf-8")
            finally:
                Path(file).unlink(missing_ok=True)
        if password:
            for name in sorted(self.admin_users):
                self.ensure_teacher(name, password)

    def ensure_teacher(self, username: str, password: str) -> None:
        """Creates (approved) or re-keys the teacher account ``username``."""
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
