"""The teacher dashboard's store: progress events from learners' servers in one SQLite file.

An event is one lesson status (``started``, ``passed``, ``failed``) or one
exercise result. Summaries are computed from the events, so restarting the hub
or the service loses nothing.

Example:
    >>> from sampan.hub.progress_store import ProgressStore
    >>> store = ProgressStore(":memory:")
    >>> _ = store.add("lee", {"lesson": "first_model", "status": "passed"})
    >>> store.lesson_status("lee")["first_model"]["status"]
    'done'
"""
from __future__ import annotations

import csv
import datetime as _dt
import io
import re
import sqlite3
import threading
import unicodedata
from collections import Counter
from typing import Any

from sampan.errors import bad_argument

STATUSES = ("started", "passed", "failed")
# One learner's server may not flood the store that the whole class's pages summarise: a course has tens of
# lessons, each a few dozen exercise checks; these bounds are far above that.
MAX_LESSONS_PER_USER = 300
MAX_EVENTS_PER_USER = 20_000
# A lesson or stage id, here and in the course manifest (sampan.path.manifest): letters of any script, digits, '_',
# '.', '-', starting with a letter, digit or '_' (never '.' or '..'), at most 128 characters.
IDENTIFIER = re.compile(r"\w[\w.-]{0,127}")
ID_RULE = "letters, digits, '_', '.' or '-', starting with a letter, digit or '_' (at most 128)"
NAME_LENGTH = 128
_BIDI_CONTROLS = {"LRE", "RLE", "PDF", "LRO", "RLO", "LRI", "RLI", "FSI", "PDI"}
_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user TEXT NOT NULL, lesson TEXT NOT NULL, exercise TEXT, status TEXT NOT NULL, at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_user ON events (user, lesson);
"""


def is_identifier(value: Any) -> bool:
    """True for a lesson or stage id (:data:`IDENTIFIER`), e.g. ``first_model`` or ``第一课``."""
    return isinstance(value, str) and IDENTIFIER.fullmatch(value) is not None


def is_exercise_name(value: Any) -> bool:
    """True for an exercise's name: any text of 1 to 128 characters, not blank, without control characters
    (newlines, tabs, bidirectional overrides)."""
    return (isinstance(value, str) and 0 < len(value) <= NAME_LENGTH and not value.isspace()
            and not any(unicodedata.category(ch) == "Cc" or unicodedata.bidirectional(ch) in _BIDI_CONTROLS
                        for ch in value))


def parse_event(payload: Any) -> dict[str, Any]:
    """Checks a posted event: ``{"lesson": id, "status": started|passed|failed, "exercise": name?}``."""
    if not isinstance(payload, dict):
        raise ValueError(bad_argument("event", payload, "a JSON object", '{"lesson": "first_model", "status": "passed"}'))
    lesson, status, exercise = payload.get("lesson"), payload.get("status"), payload.get("exercise")
    if not is_identifier(lesson):
        raise ValueError(bad_argument("lesson", lesson, f"a lesson id: {ID_RULE}",
                                      "use the lesson's id from the course's path.yaml"))
    if status not in STATUSES:
        raise ValueError(bad_argument("status", status, f"one of {', '.join(STATUSES)}"))
    if exercise is not None and not is_exercise_name(exercise):
        raise ValueError(bad_argument("exercise", exercise, f"an exercise name (1 to {NAME_LENGTH} characters "
                                      "without control characters) or null", "name the exercise on one line"))
    if exercise is not None and status == "started":
        raise ValueError(bad_argument("status", status, "passed or failed for an exercise"))
    return {"lesson": lesson, "status": status, "exercise": exercise}


class StoreFullError(ValueError):
    """A learner has recorded more events or lessons than any course gives (the service answers 429)."""


class ProgressStore:
    """Progress events in SQLite (``path`` may be ``":memory:"``); safe to share between threads."""

    def __init__(self, path: str):
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.executescript(_SCHEMA)
        self._lock = threading.Lock()

    def add(self, user: str, payload: Any) -> dict[str, Any]:
        """Records one event for ``user`` (checked with :func:`parse_event`); returns it."""
        event = parse_event(payload)
        event["at"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        with self._lock:
            events, lessons, known = self._db.execute(
                "SELECT COUNT(*), COUNT(DISTINCT lesson), SUM(lesson = ?) FROM events WHERE user = ?",
                (event["lesson"], user)).fetchone()
            if events >= MAX_EVENTS_PER_USER or (not known and lessons >= MAX_LESSONS_PER_USER):
                raise StoreFullError(
                    f"{user!r} has recorded {events} events on {lessons} lessons, the most one learner may "
                    f"({MAX_EVENTS_PER_USER} events, {MAX_LESSONS_PER_USER} lessons); this event was not stored. "
                    "HINT: a course reports far fewer; ask the teacher to look at this learner's server")
            self._db.execute("INSERT INTO events (user, lesson, exercise, status, at) VALUES (?, ?, ?, ?, ?)",
                             (user, event["lesson"], event["exercise"], event["status"], event["at"]))
        return event

    def _rows(self, user: str | None = None) -> list[tuple]:
        sql = "SELECT user, lesson, exercise, status, at FROM events"
        with self._lock:
            if user is None:
                return self._db.execute(sql + " ORDER BY id").fetchall()
            return self._db.execute(sql + " WHERE user = ? ORDER BY id", (user,)).fetchall()

    def lesson_status(self, user: str) -> dict[str, dict[str, Any]]:
        """``{lesson: {"status": "in progress"|"done", "exercises_passed": n, "last": time}}`` for one learner."""
        return _summaries(self._rows(user)).get(user, {})

    def last_activity(self) -> dict[str, str]:
        """``{user: time of their latest event}``."""
        last: dict[str, str] = {}
        for user, *_, at in self._rows():
            last[user] = at
        return last

    def class_summary(self, users: list[str], lessons: list[str] | None = None) -> dict[str, Any]:
        """Per learner and lesson, per lesson (completion, most-failed exercises), for the teacher's page.

        ``lessons``: the course's lesson ids, in its order (:func:`sampan.hub.service.course`): the
        columns are those, and events on other ids are left out (a learner could post up to
        :data:`MAX_LESSONS_PER_USER` made-up ones); None: every lesson posted, sorted."""
        rows = self._rows()
        table = _summaries(rows)
        if lessons is None:
            lessons = sorted({lesson for per_user in table.values() for lesson in per_user})
        else:
            course = set(lessons)
            table = {user: {k: v for k, v in per.items() if k in course} for user, per in table.items()}
        failed: dict[str, Counter] = {}
        for _, lesson, ex, status, _ in rows:
            if ex and status == "failed":
                failed.setdefault(lesson, Counter())[ex] += 1
        per_lesson = {
            lesson: {
                "done": sum(1 for u in users if table.get(u, {}).get(lesson, {}).get("status") == "done"),
                "learners": len(users),
                "most_failed": [ex for ex, _ in failed.get(lesson, Counter()).most_common(3)],
            }
            for lesson in lessons
        }
        return {"learners": {u: table.get(u, {}) for u in users}, "lessons": per_lesson}

    def csv_export(self, users: list[str], lessons: list[str] | None = None) -> str:
        """One row per learner and lesson: ``user,lesson,status,exercises_passed,last_activity`` (``lessons`` as in
        :meth:`class_summary`)."""
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["user", "lesson", "status", "exercises_passed", "last_activity"])
        summary = self.class_summary(users, lessons)
        for user in users:
            for lesson in summary["lessons"]:
                entry = summary["learners"][user].get(lesson)
                writer.writerow([user, lesson, entry["status"] if entry else "not started",
                                 entry["exercises_passed"] if entry else 0, entry["last"] if entry else ""])
        return out.getvalue()


def _summaries(rows: list[tuple]) -> dict[str, dict[str, dict[str, Any]]]:
    table: dict[str, dict[str, dict[str, Any]]] = {}
    passed: dict[tuple[str, str], set[str]] = {}
    for user, lesson, exercise, status, at in rows:
        entry = table.setdefault(user, {}).setdefault(lesson, {"status": "in progress", "exercises_passed": 0})
        entry["last"] = at
        if exercise is not None:
            done = passed.setdefault((user, lesson), set())
            (done.add if status == "passed" else done.discard)(exercise)
            entry["exercises_passed"] = len(done)
        elif status == "passed":
            entry["status"] = "done"
    return table
