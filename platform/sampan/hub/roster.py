"""The class roster: a CSV of ``username,role`` rows (role ``teacher``, ``assistant`` or ``student``).

Students on the roster are approved in advance: when they sign up on the hub they
can log in at once (NativeAuthenticator's pre-authorized users); assistants and anyone
else who signs up wait for a teacher's approval at ``/hub/authorize``. Teachers are hub
admins (their accounts are made by ``sampan hub``); assistants read progress but not learners' files.

Example:
    >>> from sampan.hub.roster import read_roster
    >>> import io
    >>> read_roster(io.StringIO("username,role\\nkim,teacher\\nlee,student\\n"))
    {'kim': 'teacher', 'lee': 'student'}
"""
from __future__ import annotations

import csv
import io
import os
import re
from pathlib import Path
from typing import TextIO

from sampan.errors import bad_argument

ROLES = ("teacher", "assistant", "student")
_USERNAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def check_username(name: str, *, where: str = "username") -> str:
    """A hub username: lower-case letters, digits, ``.``, ``_``, ``-`` (at most 64)."""
    if not isinstance(name, str) or not _USERNAME.match(name):
        raise ValueError(bad_argument(where, name, "lower-case letters, digits, '.', '_' or '-' (at most 64)",
                                      "write user names like 'lee' or 'kim.l'"))
    return name


def read_roster(source: str | os.PathLike | TextIO) -> dict[str, str]:
    """``{username: role}`` from a CSV with a header row ``username,role`` (role defaults to ``student``).

    A file is read as UTF-8, with or without the byte-order mark Excel's "CSV UTF-8" writes; header names are
    case-insensitive; a username may appear once (user names are lower-cased, so ``Kim`` and ``kim`` are one).
    """
    if isinstance(source, (str, os.PathLike)):
        where = str(source)
        try:
            text = Path(source).read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ValueError(bad_argument("roster", where, f"a UTF-8 text file (byte {exc.start} is not UTF-8)",
                                          "in your spreadsheet, save it as CSV UTF-8 (File > Save As)")) from None
    else:
        text, where = source.read().lstrip("\ufeff"), "roster"
    rows = csv.DictReader(io.StringIO(text))
    if rows.fieldnames is None or "username" not in [f.strip().lower() for f in rows.fieldnames]:
        raise ValueError(bad_argument("roster", where, "a CSV whose header row is 'username,role'",
                                      "put 'username,role' on the first line"))
    roster: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for line, row in enumerate(rows, start=2):
        row = {k.strip().lower(): (v or "").strip() for k, v in row.items() if k}
        name = check_username(row["username"].lower(), where=f"{where} line {line} username")
        role = (row.get("role") or "student").lower()
        if role not in ROLES:
            raise ValueError(bad_argument(f"{where} line {line} role", role, f"one of {', '.join(ROLES)}",
                                          "leave it empty for a student"))
        if name in first_line:
            raise ValueError(bad_argument(f"{where} line {line} username", row["username"],
                                          f"a name not already on line {first_line[name]} (names are not "
                                          "case-sensitive)", f"keep one of lines {first_line[name]} and {line}"))
        roster[name], first_line[name] = role, line
    return roster


def by_role(roster: dict[str, str], role: str) -> set[str]:
    """The usernames with ``role``."""
    return {name for name, r in roster.items() if r == role}
