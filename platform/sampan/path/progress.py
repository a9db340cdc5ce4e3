"""The learner's progress: ``<data dir>/progress.json``, written atomically under a file lock.

A lesson counts as done when the path runner passes it, or when the learner
runs it by hand and its final check calls :func:`mark_done`.

Example:
    >>> from sampan.path import load_progress, mark_done
    >>> mark_done("first_model")
    [sampan.record] sampan.path.done = "first_model"
    '[sampan.path] lesson first_model done'
    >>> load_progress()["first_model"]["status"]
    'passed'
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import os
from pathlib import Path
from typing import Any, Iterator

from sampan.utils.io import atomic_write_json, data_home, file_lock, read_json_dict, writing_data_home

# set by the runner in a lesson's kernel: the runner, not the lesson, decides whether it passed
RUNNER_ENV = "SAMPAN_PATH_RUNNER"
DONE_RECORD = "sampan.path.done"


def progress_file() -> Path:
    """``data_home() / "progress.json"``."""
    return data_home() / "progress.json"


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    path = progress_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path.with_suffix(".lock")):
        yield


def _is_entry(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("status", ""), str)


def load_progress() -> dict[str, dict[str, Any]]:
    """``{lesson_id: {"status", "at", "source", ...}}``; empty when nothing is done yet.

    A damaged entry (not an object, or with a ``status`` that is not a string) is left out: that lesson reads
    as not started, the other lessons keep their progress; :func:`damaged_progress` names such entries.
    """
    return {k: v for k, v in read_json_dict(progress_file(), "lessons").items() if _is_entry(v)}


def damaged_progress() -> list[str]:
    """One line per damaged entry of ``progress.json`` (see :func:`load_progress`), naming the lesson, the value
    found and the fix; empty when every entry is readable.

    Example:
        >>> from sampan.path.progress import damaged_progress
        >>> damaged_progress()
        []
    """
    from sampan.errors import bad_argument

    file = progress_file()
    return [bad_argument(f"lessons.{k}", v, "an object such as {\"status\": \"passed\", ...} in " + str(file),
                         "that lesson counts as not started; run it again to replace the entry, or delete it "
                         "from the file")
            for k, v in read_json_dict(file, "lessons").items() if not _is_entry(v)]


def update_progress(lesson_id: str, status: str, **fields: Any) -> dict[str, Any]:
    """Sets one lesson's entry (``status`` is ``"passed"`` or ``"failed"``); returns the entry.

    A failed run never erases an earlier pass: the entry keeps ``status="passed"``
    and notes ``last_failed_at``.

    Raises:
        sampan.errors.DataDirectoryError: ``$SAMPAN_DATA`` is a file or a folder that cannot be written.
    """
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    with writing_data_home("record your progress"), _locked():
        lessons = read_json_dict(progress_file(), "lessons")  # damaged entries of other lessons stay as found
        old = lessons.get(lesson_id) if _is_entry(lessons.get(lesson_id)) else {}
        if status == "failed" and old.get("status") == "passed":
            entry = {**old, "last_failed_at": now}
        else:
            entry = {"status": status, "at": now, **fields}
        lessons[lesson_id] = entry
        atomic_write_json(progress_file(), {"version": 1, "lessons": lessons})
    _tell_hub(lesson_id, status)
    return entry


def _tell_hub(lesson_id: str, status: str, exercises: dict[str, bool | str] | None = None) -> None:
    """On a Sampan hub, also sends the event to the teacher dashboard (:mod:`sampan.hub.client`)."""
    if not os.environ.get("SAMPAN_PROGRESS_URL"):
        return
    from sampan.hub.client import post_event

    for name, ok in (exercises or {}).items():
        if ok == "not_attempted":
            continue  # the dashboard shows an exercise without events as not started
        post_event(lesson_id, "passed" if ok in (True, "correct") else "failed", exercise=name)
    if status in ("started", "passed", "failed"):
        post_event(lesson_id, status)


def report_exercises(lesson_id: str, results: dict[str, bool | str]) -> None:
    """Sends a lesson's exercise results to the teacher dashboard when running on a hub (else nothing).

    A result is True/False or an outcome: ``"correct"``, ``"incorrect"`` or ``"not_attempted"``.
    """
    _tell_hub(lesson_id, "", results)


EXERCISE_EVENTS = ("correct", "incorrect", "not_attempted", "hint1", "hint2", "hint3", "solution")


def exercise_log_file() -> Path:
    """``data_home() / "exercises.json"``: every exercise check, hint and solution the learner asked for."""
    return data_home() / "exercises.json"


def load_exercise_log() -> dict[str, dict[str, dict[str, Any]]]:
    """``{lesson: {exercise: {"outcome", "at", "attempts", "hints", "solution_seen"}}}``."""
    return read_json_dict(exercise_log_file(), "lessons")


def record_exercise(lesson_id: str, exercise: str, event: str) -> dict[str, Any] | None:
    """Notes one exercise event in the learner's exercise log (an outcome, a hint or the solution shown).

    Under ``sampan path run`` nothing is written: the runner fills in the reference solutions, and the
    learner has not done the exercises. A data directory that cannot be written only prints why.

    Example:
        >>> from sampan.path.progress import record_exercise
        >>> record_exercise("tensors_and_autograd", "normalize", "incorrect")
        {'outcome': 'incorrect', 'at': '...+00:00', 'attempts': 1, 'hints': 0, 'solution_seen': False}
    """
    if event not in EXERCISE_EVENTS:
        from sampan.errors import bad_argument

        raise ValueError(bad_argument("event", event, f"one of {', '.join(EXERCISE_EVENTS)}"))
    if os.environ.get(RUNNER_ENV):
        return None
    from sampan.errors import DataDirectoryError

    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    try:
        with writing_data_home("record your exercises"), _locked():
            lessons = load_exercise_log()
            if not isinstance(lessons.get(lesson_id), dict):
                lessons[lesson_id] = {}  # a damaged lesson entry starts afresh; the other lessons keep theirs
            fresh = {"outcome": "not_attempted", "at": now, "attempts": 0, "hints": 0, "solution_seen": False}
            found = lessons[lesson_id].get(exercise)
            entry = {**fresh, **found} if isinstance(found, dict) else fresh
            if not (isinstance(entry["attempts"], int) and isinstance(entry["hints"], int)):
                entry = fresh
            lessons[lesson_id][exercise] = entry
            if event in ("correct", "incorrect", "not_attempted"):
                if event != "not_attempted":
                    entry["attempts"] += 1
                if entry["outcome"] != "correct" or event == "correct":
                    entry["outcome"] = event  # a right answer stays right in the log
                entry["at"] = now
            elif event == "solution":
                entry["solution_seen"] = True
            else:
                entry["hints"] = max(entry["hints"], int(event[-1]))
            atomic_write_json(exercise_log_file(), {"version": 1, "lessons": lessons})
    except DataDirectoryError as exc:
        print(f"(exercise not logged: {exc})")
        return None
    return entry


def reset_progress(lesson_id: str | None = None) -> None:
    """Forgets one lesson's progress, or all of it."""
    with _locked():
        lessons = {} if lesson_id is None else {k: v for k, v in load_progress().items() if k != lesson_id}
        atomic_write_json(progress_file(), {"version": 1, "lessons": lessons})


def mark_done(lesson: str, *, check: bool = True) -> str:
    """Marks a lesson done; the last line of a lesson's final check calls it.

    Under ``sampan path run`` it only records that the lesson reached its end
    (the runner marks progress after checking the metrics); run by hand in
    JupyterLab it writes the learner's progress itself.

    Args:
        lesson: the lesson's id in ``notebooks/path.yaml``, e.g. ``"first_model"``.
        check: verify the id against the manifest when one is found.

    Example:
        >>> from sampan.path import mark_done
        >>> mark_done("first_model")
        [sampan.record] sampan.path.done = "first_model"
        '[sampan.path] lesson first_model done'
    """
    if not isinstance(lesson, str) or not lesson:
        from sampan.errors import bad_argument

        raise ValueError(bad_argument("lesson", lesson, "a lesson id from notebooks/path.yaml", 'mark_done("first_model")'))
    from sampan.utils.record import record

    from sampan.path.lang import default_language
    from sampan.path.report import message

    lang = default_language()
    if os.environ.get(RUNNER_ENV):  # the runner knows its manifest and decides after the range checks
        record(DONE_RECORD, lesson)  # the machine-read marker; the line returned is for the learner
        return message("lesson_reached_end", lang, lesson=lesson, title=title_of(lesson, lang))
    if check:
        _check_known(lesson)
    record(DONE_RECORD, lesson)
    update_progress(lesson, "passed", source="notebook")
    return message("lesson_done", lang, lesson=lesson, title=title_of(lesson, lang))


def title_of(lesson: str, lang: str) -> str:
    """The title of lesson ``lesson`` in ``lang`` from ``notebooks/path.yaml``; the id when the manifest
    does not know it (or there is none).

    Example:
        >>> from sampan.path.progress import title_of
        >>> title_of("environment_check", "zh")
        '环境检查'
    """
    from sampan.path.manifest import PathManifestError, default_manifest, load_path

    try:
        return load_path(default_manifest(), check_files=False).lesson(lesson).text("title", lang) or lesson
    except (FileNotFoundError, PathManifestError, ValueError, OSError):
        return lesson


def _check_known(lesson: str) -> None:
    from sampan.path.manifest import default_manifest, load_path

    try:
        manifest = default_manifest()
    except FileNotFoundError:
        return
    if manifest.is_file():
        load_path(manifest, check_files=False).lesson(lesson)  # raises naming the known lessons
