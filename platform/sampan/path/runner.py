"""``sampan.path.run``: execute the learning path (or part of it) headless with papermill.

Each lesson is executed by ``papermill.execute_notebook`` into a fresh run
folder (``runs/<timestamp>/`` by default, never reused; it is also the lesson's
working directory, so files a lesson writes never land in ``notebooks/``), with ``QUICK``,
``DATA_DIR`` and ``SEED`` injected into its ``parameters`` cell. What the lesson
recorded with ``sampan.record`` is read back from the executed notebook and
checked against the ranges in ``path.yaml``; a lesson that passes marks the
learner's progress. The chain per lesson: select → check artifacts → execute
→ collect records → check ranges → mark progress → write the report.

Example:
    >>> report = run(stage="beginner", quick=True)  # doctest: +SKIP
    >>> report.ok, report.html_path  # doctest: +SKIP
    (True, PosixPath('runs/20260101-120000/report.html'))
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import math
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator, Literal

from sampan.errors import bad_argument
from sampan.path._interrupt import kernels_stopped_on_interrupt
from sampan.path.artifacts import artifact_path, missing_message
from sampan.path.manifest import LearningPath, Lesson, load_path
from sampan.path.progress import DONE_RECORD, RUNNER_ENV, update_progress
from sampan.utils.io import usable_data_home
from sampan.utils.notebooks import check_kernels

Status = Literal["passed", "failed", "skipped", "not_run"]
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


_DEAD_KERNEL_HINT = (". HINT: the kernel process ended during that cell: it ran out of memory, crashed in native "
                     "code or was killed; run the lesson in JupyterLab and watch the memory (sampan.monitor)")


class RunInterrupted(KeyboardInterrupt):
    """The run was interrupted (Ctrl-C); its report, already written, says which lesson was running.

    Attributes:
        report: the :class:`RunReport` (``report.interrupted`` is True, ``report.finished`` set).
    """

    def __init__(self, report: "RunReport"):
        super().__init__(f"interrupted; report: {report.html_path}")
        self.report = report


@dataclass
class LessonResult:
    """One lesson's outcome. ``error`` holds papermill's error cell for a failure."""

    lesson: str
    stage: str
    title: str
    notebook: str
    status: Status = "not_run"
    output: str | None = None          # executed notebook, relative to the run folder
    duration_s: float = 0.0
    metrics: list[dict[str, Any]] = field(default_factory=list)
    records: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    reason: str = ""
    stage_title: str = ""              # the stage's title in the run's language ("" in reports made before it)


@dataclass
class RunReport:
    """The whole run; written as ``report.json`` and ``report.html`` in ``run_dir``."""

    run_dir: Path
    mode: Literal["quick", "full"]
    started: str
    finished: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    manifest: str = ""
    lessons: list[LessonResult] = field(default_factory=list)
    language: str = "en"               # of the lessons run and of report.html (sampan.path.lang)
    interrupted: bool = False          # stopped by Ctrl-C before every selected lesson ran

    @property
    def ok(self) -> bool:
        return bool(self.lessons) and all(r.status == "passed" for r in self.lessons)

    @property
    def failed(self) -> list[LessonResult]:
        return [r for r in self.lessons if r.status == "failed"]

    @property
    def json_path(self) -> Path:
        return self.run_dir / "report.json"

    @property
    def html_path(self) -> Path:
        return self.run_dir / "report.html"

    def result(self, lesson_id: str) -> LessonResult:
        return next(r for r in self.lessons if r.lesson == lesson_id)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["run_dir"] = str(self.run_dir)
        data["ok"] = self.ok
        data["summary"] = {s: sum(r.status == s for r in self.lessons) for s in ("passed", "failed", "skipped", "not_run")}
        return data


def select_lessons(path: LearningPath, *, stage: str | None = None, lesson: str | list[str] | None = None) -> list[Lesson]:
    """The lessons to run, in path order: all, one stage's, or the named ones."""
    lessons = path.lessons
    if stage is not None:
        wanted = {x.id for x in path.stage(stage).lessons}
        lessons = [x for x in lessons if x.id in wanted]
    if lesson is not None:
        names = [lesson] if isinstance(lesson, str) else list(lesson)
        for name in names:
            path.lesson(name)  # raises naming the known lessons
        lessons = [x for x in lessons if x.id in names]
        if not lessons:
            raise ValueError(f"Lessons {names} are not in stage {stage!r}. HINT: drop --stage or pick another lesson.")
    if not lessons:
        raise ValueError(f"Stage {stage!r} has no lessons yet. HINT: run `sampan path list` to see the path.")
    return lessons


def new_run_dir(output_dir: str | Path | None = None) -> Path:
    """A new, empty ``<output_dir>/<timestamp>`` folder (default ``./runs``); never an existing one."""
    parent = Path(output_dir) if output_dir is not None else Path.cwd() / "runs"
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        problem = "it is a file" if parent.exists() else f"it cannot be created ({exc.strerror})"
        raise ValueError(bad_argument("output_dir", str(output_dir), "a folder that receives the run folders",
                                      f"{problem}; pass --output with a folder (new or existing), e.g. --output runs"
                                      )) from None
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        candidate = parent / (stamp if n == 0 else f"{stamp}-{n}")
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
    raise RuntimeError(f"Could not create a new run folder under {parent}")  # pragma: no cover


def run(*, stage: str | None = None, lesson: str | list[str] | None = None, quick: bool = False,
        output_dir: str | Path | None = None, keep_going: bool = False, manifest: str | Path | None = None,
        data_dir: str | Path | None = None, seed: int | None = None, timeout: float | None = None,
        kernel_name: str | None = None, progress: bool = True, lang: str | None = None) -> RunReport:
    """Runs lessons of the learning path with papermill and writes ``report.json`` / ``report.html``.

    Args:
        stage: only this stage's lessons (``"beginner"``, ...).
        lesson: only this lesson (or these lessons).
        quick: ``QUICK=True`` in every lesson and the quick ranges / timeouts.
        output_dir: the folder that receives the new ``<timestamp>/`` run folder; default ``./runs``.
        keep_going: after a failure, run the remaining lessons (those whose prerequisite failed are skipped).
        manifest: the ``path.yaml``; default the repository's ``notebooks/path.yaml``.
        data_dir: ``DATA_DIR`` for the lessons and ``SAMPAN_DATA`` in their kernel; default ``data_home()``.
        seed: ``SEED`` for the lessons; default the manifest's.
        timeout: seconds per lesson, overriding the manifest.
        kernel_name: force a kernel; default the one each lesson names (``sampan``).
        progress: show a progress bar over lessons.
        lang: ``"en"`` or ``"zh"``: the language of the lessons (built from their bilingual source into the
            run folder) and of ``report.html``; default from the locale (:func:`sampan.path.lang.default_language`).

    Returns:
        The :class:`RunReport`; ``report.ok`` is True when every lesson passed.

    Raises:
        ValueError: a bad ``timeout``, ``output_dir`` or ``data_dir`` (a file, say), before anything runs.
        KernelNotFoundError: a lesson's kernel (or ``kernel_name``) is not installed.
        sampan.errors.DataDirectoryError: ``$SAMPAN_DATA`` is a file or cannot be written.
        RunInterrupted: Ctrl-C (a ``KeyboardInterrupt``); the lesson's kernel is shut down and the report,
            marking the lesson that was running as interrupted, is written first.
    """
    from sampan.utils.imports import require

    require("papermill")
    from sampan.path.lang import default_language, normalize_language

    lang = default_language() if lang is None else normalize_language(lang)
    path = load_path(manifest)
    lessons = select_lessons(path, stage=stage, lesson=lesson)
    mode = "quick" if quick else "full"
    _check_timeout(timeout)
    data_dir = _data_dir(data_dir)
    _check_kernels(lessons, kernel_name)
    params = {"QUICK": bool(quick), "DATA_DIR": str(data_dir), "SEED": int(path.seed if seed is None else seed)}
    report = RunReport(run_dir=new_run_dir(output_dir), mode=mode, started=_now(), parameters=params,
                       manifest=str(path.file), language=lang)
    report.lessons = [LessonResult(x.id, x.stage, x.text("title", lang), x.relative_notebook(path.root),
                                   stage_title=path.stage(x.stage).text("title", lang)) for x in lessons]
    lessons = [_in_language(x, lang, report.run_dir, path) for x in lessons]
    from sampan.path.report import message, write_report

    write_report(report)
    current: LessonResult | None = None  # the lesson being run, for an interruption
    try:
        with _lesson_env(data_dir, lang), _progress_bar(lessons, progress) as bar:
            failed: set[str] = set()
            for lesson_obj, result in zip(lessons, report.lessons):
                current = result
                bar.set_description(lesson_obj.id)
                blocked = _blocked_by(lesson_obj, path, failed, lang)
                if blocked:
                    result.status, result.reason = "skipped", blocked
                    failed.add(lesson_obj.id)
                elif failed and not keep_going:
                    result.reason = message("earlier_failed", lang)
                else:
                    _run_lesson(lesson_obj, result, path, report, params, timeout, kernel_name)
                    if result.status != "passed":
                        failed.add(lesson_obj.id)
                write_report(report)
                bar.update(1)
    except KeyboardInterrupt:
        _interrupted(report, current)
        raise RunInterrupted(report) from None
    report.finished = _now()
    write_report(report)
    return report


def _interrupted(report: RunReport, current: LessonResult | None) -> None:
    """Marks the lesson that was running (and those not reached) in the report, and writes it."""
    from sampan.path.report import message, write_report

    for result in report.lessons:
        if result.status == "not_run" and not result.reason:
            result.reason = message("interrupted" if result is current else "interrupted_before", report.language)
    report.interrupted, report.finished = True, _now()
    write_report(report)


def _in_language(lesson: Lesson, lang: str, run_dir: Path, path: LearningPath) -> Lesson:
    """The lesson with its notebook built in ``lang`` (``<run>/sources/<stage>/<id>.ipynb``) when it is bilingual."""
    import dataclasses
    import json

    from sampan.path.lang import build_notebook, is_bilingual
    from sampan.path.navigation import nav_line
    from sampan.utils.io import atomic_write_text

    nb = json.loads(lesson.notebook.read_text(encoding="utf-8"))
    if not is_bilingual(nb):
        return lesson
    built = run_dir / "sources" / lesson.stage / f"{lesson.id}.ipynb"
    built.parent.mkdir(parents=True, exist_ok=True)
    nav = nav_line(path, lesson.id, lang)
    atomic_write_text(built, json.dumps(build_notebook(nb, lang, nav), indent=1, ensure_ascii=False) + "\n")
    return dataclasses.replace(lesson, notebook=built)


def _check_timeout(timeout: Any) -> None:
    number = isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
    if timeout is not None and not (number and math.isfinite(timeout) and timeout > 0):
        raise ValueError(bad_argument("timeout", timeout, "a number of seconds greater than 0, or None",
                                      "pass timeout=600, or None to use each lesson's timeout from path.yaml"))


def _data_dir(data_dir: str | Path | None) -> Path:
    """The lessons' data folder: ``data_dir`` or the data home, refused when it is a file."""
    if data_dir is None:
        return usable_data_home("run the learning path").resolve()
    folder = Path(data_dir).expanduser().resolve()
    if folder.exists() and not folder.is_dir():
        raise ValueError(bad_argument("data_dir", str(data_dir), "a folder (the lessons' DATA_DIR and SAMPAN_DATA)",
                                      "it is a file; pass --data-dir with a folder, or leave it out to use "
                                      "$SAMPAN_DATA"))
    return folder


def _check_kernels(lessons: list[Lesson], kernel_name: str | None) -> None:
    """Refuses, before anything runs, a kernel that is not installed (papermill would fail every lesson)."""
    check_kernels(((f"Lesson {lesson.id!r}", lesson.notebook) for lesson in lessons), kernel_name,
                  argument="kernel_name", fix="pass --kernel with one of those, or leave it out to use the kernel "
                                              "each lesson names")


def _run_lesson(lesson: Lesson, result: LessonResult, path: LearningPath, report: RunReport,
                params: dict[str, Any], timeout: float | None, kernel_name: str | None) -> None:
    missing = [a for a in lesson.needs if not artifact_path(a).exists()]
    if missing:
        result.status = "failed"
        result.reason = " ".join(missing_message(a, artifact_path(a), path.producer_of(a), lang=report.language)
                                 for a in missing)
        update_progress(lesson.id, "failed", run=str(report.run_dir))
        return
    out = report.run_dir / lesson.stage / f"{lesson.id}.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    result.output = out.relative_to(report.run_dir).as_posix()
    limit = float(timeout) if timeout is not None else lesson.timeout[report.mode]
    start = time.monotonic()
    try:
        # one lesson in the run: its kernel starts as a new interpreter, not through a fork server started for it
        result.error = _execute(lesson, out, _declared({**lesson.parameters, **params}, lesson), limit,
                                kernel_name, fork=len(report.lessons) > 1)
    finally:
        result.duration_s = round(time.monotonic() - start, 3)
    if out.is_file():
        from sampan.utils.record import collect_records

        result.records = collect_records(out)
    _judge(lesson, result, report.mode, report.language)
    entry = dict(run=str(report.run_dir), mode=report.mode, duration_s=result.duration_s, source="path run")
    update_progress(lesson.id, result.status, **entry)


def _declared(params: dict[str, Any], lesson: Lesson) -> dict[str, Any]:
    """Only the parameters the lesson's ``parameters`` cell declares (all of them when it has none)."""
    import papermill as pm

    declared = pm.inspect_notebook(str(lesson.notebook))
    return {k: v for k, v in params.items() if k in declared} if declared else params


def _execute(lesson: Lesson, out: Path, params: dict[str, Any], limit: float,
             kernel_name: str | None, fork: bool = True) -> dict[str, Any] | None:
    """Runs one notebook; returns ``None`` or the error (papermill's error cell) as a dict."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    from papermill.exceptions import PapermillExecutionError

    from sampan.utils.notebooks import execute_notebook

    deadline = time.monotonic() + limit
    current: list = [None]

    def remaining(cell) -> int:  # nbclient asks before each cell: the lesson's time left
        current[0] = cell
        return max(1, int(deadline - time.monotonic()))

    os.environ["SAMPAN_LESSON"] = lesson.id  # the lesson's fits are recorded runs tagged with it (sampan.experiments)
    try:
        with kernels_stopped_on_interrupt():
            execute_notebook(str(lesson.notebook), str(out), parameters=params, kernel_name=kernel_name,
                             progress_bar=False, cwd=str(out.parent), timeout_func=remaining,
                             start_timeout=120, fork=fork)
    except PapermillExecutionError as exc:
        return _error_from(exc, out, lesson)
    except CellTimeoutError:
        index, cell = _cell_index(out, current[0]), current[0]
        return {"cell_index": index, "execution_count": cell.get("execution_count") if cell else None,
                "source": _src(cell), "ename": "TimeoutError",
                "evalue": f"lesson {lesson.id!r} exceeded its timeout of {limit:g} s", "traceback": ""}
    except Exception as exc:  # kernel died, unreadable notebook ...: name the cell that was running, if any
        cell = current[0]
        evalue = _strip(str(exc)) + (_DEAD_KERNEL_HINT if isinstance(exc, DeadKernelError) else "")
        return {"cell_index": _cell_index(out, cell), "execution_count": cell.get("execution_count") if cell else None,
                "source": _src(cell), "ename": type(exc).__name__, "evalue": evalue, "traceback": ""}
    return None


def _error_from(exc, out: Path, lesson: Lesson) -> dict[str, Any]:
    """papermill's error, with the cell's index counted in the lesson as written (no injected cells)."""
    index = exc.cell_index
    if out.is_file():
        import nbformat

        cells = [c for c in nbformat.read(out, as_version=4).cells if not _injected(c)]
        index = next((i for i, c in enumerate(cells) if c.get("metadata", {}).get("papermill", {}).get("exception")
                      or any(o.get("output_type") == "error" for o in c.get("outputs", []))), index)
    return {"cell_index": index, "execution_count": exc.exec_count, "source": exc.source,
            "ename": exc.ename, "evalue": _strip(str(exc.evalue)), "traceback": _strip("\n".join(exc.traceback))}


def _injected(cell) -> bool:
    tags = cell.get("metadata", {}).get("tags", [])
    return "injected-parameters" in tags or "papermill-error-cell-tag" in tags


def _cell_index(out: Path, cell) -> int | None:
    """The index of ``cell`` in the lesson as written (papermill's inserted cells not counted)."""
    if cell is None or not out.is_file():
        return None
    import nbformat

    cells = [c for c in nbformat.read(out, as_version=4).cells if not _injected(c)]
    return next((i for i, c in enumerate(cells) if c.get("id") == cell.get("id")), None)


def _src(cell) -> str:
    return "" if cell is None else str(cell.get("source", ""))


def _strip(text: str) -> str:
    return _ANSI.sub("", text)


def _judge(lesson: Lesson, result: LessonResult, mode: str, lang: str = "en") -> None:
    from sampan.path.report import message

    problems = []
    for metric in lesson.metrics:
        low, high = metric.bounds(mode)
        value = result.records.get(metric.name)
        problem = (message("not_recorded", lang) if metric.name not in result.records
                   else metric.check(value, mode, lang))
        result.metrics.append({"name": metric.name, "value": value, "low": low, "high": high, "expect": metric.expect,
                               "ok": problem is None, "problem": problem or ""})
        if problem:
            problems.append(message("metric_problem", lang, name=metric.name, problem=problem))
    if result.error is not None:
        result.status = "failed"
        cell = result.error.get("cell_index")
        where = (message("in_cell_n", lang, cell=cell) if cell is not None
                 else message("a_cell" if result.error.get("source") else "before_any_cell", lang))
        result.reason = message("error_in", lang, ename=result.error["ename"], where=where,
                                evalue=result.error["evalue"])
    elif problems:
        result.status, result.reason = "failed", message("problems_sep", lang).join(problems)
    else:
        result.status = "passed"
        if DONE_RECORD not in result.records and lesson.metrics:
            result.reason = message("no_mark_done", lang)


def _blocked_by(lesson: Lesson, path: LearningPath, failed: set[str], lang: str = "en") -> str:
    from sampan.path.report import message

    deps = list(lesson.requires) + [p.id for a in lesson.needs if (p := path.producer_of(a))]
    bad = [d for d in dict.fromkeys(deps) if d in failed]
    return message("prerequisite_failed", lang, lessons=message("list_sep", lang).join(map(repr, bad))) if bad else ""


@contextlib.contextmanager
def _lesson_env(data_dir: Path, lang: str = "en") -> Iterator[None]:
    """``SAMPAN_DATA``, ``SAMPAN_LANG`` and the runner flag for the lessons' kernels (inherited from this process)."""
    saved = {k: os.environ.get(k) for k in ("SAMPAN_DATA", RUNNER_ENV, "SAMPAN_LESSON", "SAMPAN_LANG")}
    os.environ["SAMPAN_DATA"] = str(data_dir)
    os.environ["SAMPAN_LANG"] = lang  # sampan.path.lang.default_language() in the kernel
    os.environ[RUNNER_ENV] = "1"
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def _progress_bar(lessons: list[Lesson], enabled: bool):
    from tqdm.auto import tqdm

    bar = tqdm(total=len(lessons), unit="lesson", disable=not enabled, dynamic_ncols=True)
    try:
        yield bar
    finally:
        bar.close()


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
