"""``notebooks/path.yaml``: the learning path, read into typed objects and validated.

The file lists stages in order, each with its lessons in order. A lesson names
its notebook (relative to the manifest's folder), its prerequisites, an
estimated time, the metrics it records with ``sampan.record`` and their
expected ranges in quick and full mode, and the zoo artifacts it produces or
needs. Every mistake is reported as a :class:`PathManifestError` naming the
file, the place in it (``stages[0].lessons[1].metrics.test_acc``), the value
and the fix.

Example:
    >>> from sampan.path import load_path
    >>> path = load_path()
    >>> [lesson.id for lesson in path.lessons]
    ['environment_check', 'tensors_and_autograd', 'first_model', ...]
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sampan.errors import SampanError, UnsafeFileError
from sampan.hub.progress_store import ID_RULE, is_identifier
from sampan.utils.notebooks import PARAMETER_NAME_HINT, is_parameter_name

Mode = Literal["quick", "full"]
MODES: tuple[str, ...] = ("quick", "full")

_PATH_KEYS = {"version", "title", "defaults", "stages"}
_STAGE_KEYS = {"id", "title", "description", "lessons"}
_LESSON_KEYS = {"id", "notebook", "title", "summary", "requires", "minutes", "timeout",
                "metrics", "produces", "needs", "parameters"}
_DEFAULTS = {"timeout": {"quick": 600, "full": 3600}, "seed": 0, "parameters": {}}
_DEFAULT_KEYS = set(_DEFAULTS)


class PathManifestError(SampanError, ValueError):
    """``path.yaml`` is malformed.

    Attributes:
        file: the manifest file.
        where: the place in it, e.g. ``stages[0].lessons[1].requires``.
    """

    def __init__(self, message: str, *, file: str | Path | None = None, where: str = ""):
        self.file = str(file) if file is not None else None
        self.where = where
        prefix = f"{self.file or 'path.yaml'}"
        prefix += f": {where}" if where else ""
        super().__init__(f"{prefix}: {message}")


class UnsafeManifestEntryError(PathManifestError, UnsafeFileError):
    """An entry that would make the path runner run code the manifest's author chose: a lesson's notebook outside
    the manifest's folder (absolute, ``..`` or a link leading out), or a parameter name that is not a Python
    identifier (papermill pastes names into the notebook as code).

    The path runner executes every notebook the manifest names, with its parameters; a manifest from someone else
    must not make it run a file elsewhere on the machine, or code of its own. ``entry`` is the place in the manifest.
    """

    def __init__(self, message: str, *, file: str | Path | None = None, where: str = ""):
        super().__init__(message, file=file, where=where)
        self.path, self.entry = self.file, where


@dataclass(frozen=True)
class MetricRange:
    """The expected range of one recorded metric; ``None`` is an open bound."""

    name: str
    quick: tuple[float | None, float | None] = (None, None)
    full: tuple[float | None, float | None] = (None, None)
    expect: bool | None = None          # for exercise results: the value must be exactly this

    def bounds(self, mode: Mode) -> tuple[float | None, float | None]:
        return self.quick if mode == "quick" else self.full

    def check(self, value: Any, mode: Mode, lang: str = "en") -> str | None:
        """``None`` when ``value`` is a finite number inside the range, else why not (in ``lang``, the run's)."""
        from sampan.path.lang import normalize_language
        from sampan.path.report import message

        lang = normalize_language(lang)
        if self.expect is not None:
            return None if value is self.expect else message("range_expected", lang, expect=self.expect, value=value)
        low, high = self.bounds(mode)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return message("range_number", lang, value=value)
        if not math.isfinite(value):
            return message("range_finite", lang, value=value)
        if (low is not None and value < low) or (high is not None and value > high):
            return message("range_outside", lang, value=value, low=_fmt(low), high=_fmt(high))
        return None


def _fmt(bound: float | None) -> str:
    return "-inf" if bound is None else f"{bound:g}"


@dataclass(frozen=True)
class Lesson:
    id: str
    notebook: Path                      # absolute
    stage: str
    title: str
    summary: str = ""
    requires: tuple[str, ...] = ()
    minutes: dict[str, float] = field(default_factory=dict)    # {"quick": .., "full": ..}
    timeout: dict[str, float] = field(default_factory=dict)    # seconds per mode
    metrics: tuple[MetricRange, ...] = ()
    produces: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    parameters: dict[str, Any] = field(default_factory=dict)
    texts: dict[str, Any] = field(default_factory=dict, compare=False)  # title/summary as written: str or {en, zh}

    def text(self, name: Literal["title", "summary"], lang: str = "en") -> str:
        """The lesson's ``title`` or ``summary`` in ``lang`` (English when it has no text in that language)."""
        from sampan.path.lang import localized

        return localized(self.texts.get(name, getattr(self, name)), lang)

    def relative_notebook(self, root: Path) -> str:
        try:
            return self.notebook.relative_to(root).as_posix()
        except ValueError:
            return str(self.notebook)


@dataclass(frozen=True)
class Stage:
    id: str
    title: str
    description: str
    lessons: tuple[Lesson, ...]
    texts: dict[str, Any] = field(default_factory=dict, compare=False)  # title/description: str or {en, zh}

    def text(self, name: Literal["title", "description"], lang: str = "en") -> str:
        """The stage's ``title`` or ``description`` in ``lang`` (English when it has none in that language)."""
        from sampan.path.lang import localized

        return localized(self.texts.get(name, getattr(self, name)), lang)


@dataclass(frozen=True)
class LearningPath:
    """The validated manifest; ``lessons`` are in an order that respects every prerequisite."""

    file: Path
    title: str
    stages: tuple[Stage, ...]
    seed: int = 0
    texts: dict[str, Any] = field(default_factory=dict, compare=False)  # title: str or {en, zh}

    def text(self, name: Literal["title"], lang: str = "en") -> str:
        """The path's ``title`` in ``lang`` (English when it has none in that language)."""
        from sampan.path.lang import localized

        return localized(self.texts.get(name, getattr(self, name)), lang)

    @property
    def root(self) -> Path:
        return self.file.parent

    @property
    def lessons(self) -> list[Lesson]:
        return _topological([lesson for stage in self.stages for lesson in stage.lessons])

    def lesson(self, lesson_id: str) -> Lesson:
        for lesson in self.lessons:
            if lesson.id == lesson_id:
                return lesson
        raise ValueError(_unknown("lesson", lesson_id, [x.id for x in self.lessons]))

    def stage(self, stage_id: str) -> Stage:
        for stage in self.stages:
            if stage.id == stage_id:
                return stage
        raise ValueError(_unknown("stage", stage_id, [s.id for s in self.stages]))

    def producer_of(self, artifact: str) -> Lesson | None:
        return next((lesson for lesson in self.lessons if artifact in lesson.produces), None)


def _english(value: str | dict[str, str]) -> str:
    return value["en"] if isinstance(value, dict) else value


def _unknown(kind: str, value: str, known: list[str]) -> str:
    return (f"Expected `{kind}` to be one of the path's {kind}s. Received: {kind}={value!r}. "
            f"Known {kind}s: {', '.join(known) or '(none)'}. HINT: run `sampan path list`.")


def default_manifest() -> Path:
    """``notebooks/path.yaml`` of the source checkout (``$SAMPAN_HOME`` when installed elsewhere)."""
    from sampan.utils.io import repo_root

    root = repo_root()
    if root is None:
        raise FileNotFoundError(
            "Cannot find notebooks/path.yaml: Sampan is not running from a source checkout. "
            "HINT: set SAMPAN_HOME to the repository folder, or pass the manifest path explicitly.")
    return root / "notebooks" / "path.yaml"


def load_path(manifest: str | Path | None = None, *, check_files: bool = True) -> LearningPath:
    """Reads and validates a learning-path manifest.

    Args:
        manifest: the ``path.yaml`` file; default :func:`default_manifest`.
        check_files: also require every lesson's notebook to exist.

    Raises:
        PathManifestError: with the file, the place and the fix.
    """
    from sampan.utils.imports import require

    yaml = require("yaml")
    # absolute, so that lesson paths relative to its folder, the index and the site never depend on the cwd
    file = (Path(manifest).expanduser() if manifest is not None else default_manifest()).resolve()
    if file.is_dir():  # FileNotFoundError all the same: callers report it as a manifest that is not there
        hint = " (pass the path.yaml inside it)" if (file / "path.yaml").is_file() else ""
        raise FileNotFoundError(f"The learning-path manifest {file} is a folder, not a file{hint}.")
    if not file.is_file():
        raise FileNotFoundError(f"The learning-path manifest {file} does not exist. HINT: check `--manifest` "
                                "(`manifest=` in Python): the path of a path.yaml such as notebooks/path.yaml, "
                                "or leave it out for the course's own.")
    try:
        raw = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise PathManifestError(f"not valid YAML: {exc}", file=file) from exc
    return _Parser(file, check_files).parse(raw)


class _Parser:
    def __init__(self, file: Path, check_files: bool):
        self.file, self.check_files = file, check_files

    def fail(self, where: str, message: str) -> PathManifestError:
        return PathManifestError(message, file=self.file, where=where)

    def mapping(self, value: Any, where: str, allowed: set[str]) -> dict:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected a mapping, got {type(value).__name__}: {value!r}")
        unknown = sorted(set(map(str, value)) - allowed)
        if unknown:
            raise self.fail(where, f"unknown key(s) {', '.join(unknown)}; allowed keys: {', '.join(sorted(allowed))}")
        return value

    def parse(self, raw: Any) -> LearningPath:
        raw = self.mapping(raw, "top level", _PATH_KEYS)
        defaults = {**_DEFAULTS, **self.mapping(raw.get("defaults") or {}, "defaults", _DEFAULT_KEYS)}
        self.default_params = self.parameters(defaults["parameters"], "defaults.parameters")
        default_timeout = self.per_mode(defaults["timeout"], "defaults.timeout", positive=True)
        stages_raw = raw.get("stages")
        if not isinstance(stages_raw, list) or not stages_raw:
            raise self.fail("stages", "expected a non-empty list of stages (beginner, intermediate, advanced)")
        stages, seen = [], {}
        for i, stage_raw in enumerate(stages_raw):
            stages.append(self.stage(stage_raw, f"stages[{i}]", default_timeout, seen))
        if len({s.id for s in stages}) != len(stages):
            raise self.fail("stages", f"stage ids must be unique, got {[s.id for s in stages]}")
        self.check_references([lesson for s in stages for lesson in s.lessons], seen)
        title = self.text(raw.get("title", "Learning path"), "title")
        path = LearningPath(file=self.file, title=_english(title), stages=tuple(stages),
                            seed=int(defaults.get("seed", 0)), texts={"title": title})
        _topological([lesson for s in stages for lesson in s.lessons], file=self.file)
        return path

    def stage(self, raw: Any, where: str, default_timeout: dict, seen: dict[str, str]) -> Stage:
        raw = self.mapping(raw, where, _STAGE_KEYS)
        stage_id = self.ident(raw.get("id"), f"{where}.id")
        lessons_raw = raw.get("lessons") or []
        if not isinstance(lessons_raw, list):
            raise self.fail(f"{where}.lessons", f"expected a list of lessons, got {lessons_raw!r}")
        lessons = []
        for j, lesson_raw in enumerate(lessons_raw):
            lesson = self.lesson(lesson_raw, f"{where}.lessons[{j}]", stage_id, default_timeout)
            if lesson.id in seen:
                raise self.fail(f"{where}.lessons[{j}].id",
                                f"lesson id {lesson.id!r} is used twice (also at {seen[lesson.id]}); ids must be unique")
            seen[lesson.id] = f"{where}.lessons[{j}] (lesson {lesson.id!r})"
            lessons.append(lesson)
        texts = {k: self.text(raw[k], f"{where}.{k}") for k in ("title", "description") if k in raw}
        return Stage(id=stage_id, title=_english(texts.get("title", stage_id.title())),
                     description=_english(texts.get("description", "")), lessons=tuple(lessons), texts=texts)

    def lesson(self, raw: Any, where: str, stage: str, default_timeout: dict) -> Lesson:
        raw = self.mapping(raw, where, _LESSON_KEYS)
        notebook = raw.get("notebook")
        if not isinstance(notebook, str) or not notebook.endswith(".ipynb"):
            raise self.fail(f"{where}.notebook", f"expected a relative path to an .ipynb file, got {notebook!r}")
        file = (self.file.parent / notebook).resolve()
        if Path(notebook).is_absolute() or ".." in Path(notebook).parts \
                or not file.is_relative_to(self.file.parent.resolve()):
            raise UnsafeManifestEntryError(
                f"the notebook {notebook!r} is outside the course folder {self.file.parent} (an absolute path, "
                "'..' or a link leading out); the path runner executes the notebooks it names, so it runs only "
                "notebooks inside that folder. HINT: give a path relative to the manifest's folder, without '..'",
                file=self.file, where=f"{where}.notebook")
        if ":" in notebook:
            raise UnsafeManifestEntryError(
                f"the notebook path {notebook!r} contains ':'; in the course index, the reports and the site it "
                "becomes a link, and a link starting 'javascript:' runs script in the reader's browser. "
                "HINT: rename the folder or notebook without ':'", file=self.file, where=f"{where}.notebook")
        lesson_id = self.ident(raw.get("id", Path(notebook).stem), f"{where}.id")
        where = f"{where} (lesson {lesson_id!r})"
        if self.check_files and not file.is_file():
            raise self.fail(f"{where}.notebook",
                            f"the notebook {notebook!r} does not exist (looked for {file}). "
                            "HINT: fix the path or remove the lesson from the manifest")
        texts = {k: self.text(raw[k], f"{where}.{k}") for k in ("title", "summary") if k in raw}
        return Lesson(
            id=lesson_id, notebook=file, stage=stage, texts=texts,
            title=_english(texts.get("title", lesson_id.replace("_", " ").capitalize())),
            summary=_english(texts.get("summary", "")), requires=self.names(raw.get("requires"), f"{where}.requires"),
            minutes=self.per_mode(raw.get("minutes", 0), f"{where}.minutes"),
            timeout=self.per_mode(raw.get("timeout", default_timeout), f"{where}.timeout", positive=True),
            metrics=self.metrics(raw.get("metrics") or {}, f"{where}.metrics"),
            produces=self.names(raw.get("produces"), f"{where}.produces"),
            needs=self.names(raw.get("needs"), f"{where}.needs"),
            parameters={**self.default_params, **self.parameters(raw.get("parameters"), f"{where}.parameters")},
        )

    def text(self, value: Any, where: str) -> str | dict[str, str]:
        """A title, summary or description: a string, or ``{en: ..., zh: ...}`` (English required)."""
        from sampan.path.lang import LANGUAGES

        if not isinstance(value, dict):
            return str(value)
        if "en" not in value or not set(value) <= set(LANGUAGES) or not all(isinstance(v, str) for v in value.values()):
            raise self.fail(where, f"expected a string or {{en: ..., zh: ...}} with the keys {', '.join(LANGUAGES)} "
                                   f"(en required), got {value!r}")
        return dict(value)

    def parameters(self, value: Any, where: str) -> dict[str, Any]:
        """A ``parameters`` mapping (a lesson's or the defaults'); papermill writes each name into the notebook as
        ``NAME = value``, so a name that is not a Python identifier is refused."""
        value = value or {}
        value = self.mapping(value, where, set(map(str, value)) if isinstance(value, dict) else set())
        for name in value:
            if not is_parameter_name(name):
                raise UnsafeManifestEntryError(
                    f"the parameter name {name!r} is not a Python identifier; the path runner writes "
                    "`NAME = value` into the lesson's notebook, so this name would run as code in your kernel. "
                    f"HINT: {PARAMETER_NAME_HINT}", file=self.file, where=where)
        return dict(value)

    def ident(self, value: Any, where: str) -> str:
        if not is_identifier(value):  # the teacher dashboard's rule too: it stores lesson ids
            raise self.fail(where, f"expected an identifier of {ID_RULE}, got {value!r}")
        return value

    def names(self, value: Any, where: str) -> tuple[str, ...]:
        if value is None:
            return ()
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(where, f"expected a list of names, got {value!r}")
        return tuple(value)

    def per_mode(self, value: Any, where: str, positive: bool = False) -> dict[str, float]:
        if isinstance(value, dict):
            self.mapping(value, where, set(MODES))
            out = {mode: value.get(mode, value.get("full" if mode == "quick" else "quick")) for mode in MODES}
        else:
            out = {mode: value for mode in MODES}
        for mode, number in out.items():
            if isinstance(number, bool) or not isinstance(number, (int, float)) or number < 0 or (positive and number == 0):
                raise self.fail(f"{where}.{mode}", f"expected a {'positive' if positive else 'non-negative'} number, "
                                                   f"got {number!r}")
        return {mode: float(n) for mode, n in out.items()}

    def metrics(self, raw: Any, where: str) -> tuple[MetricRange, ...]:
        raw = self.mapping(raw, where, set(map(str, raw)) if isinstance(raw, dict) else set())
        out = []
        for name, spec in raw.items():
            here = f"{where}.{name}"
            if isinstance(spec, bool):
                out.append(MetricRange(str(name), expect=spec))
            elif isinstance(spec, dict):
                self.mapping(spec, here, set(MODES))
                if not spec:
                    raise self.fail(here, "expected a range for quick and/or full mode, got {}")
                quick = spec.get("quick", spec.get("full"))
                full = spec.get("full", spec.get("quick"))
                out.append(MetricRange(str(name), self.range(quick, f"{here}.quick"), self.range(full, f"{here}.full")))
            else:
                bounds = self.range(spec, here)
                out.append(MetricRange(str(name), bounds, bounds))
        return tuple(out)

    def range(self, value: Any, where: str) -> tuple[float | None, float | None]:
        fix = "write [low, high] with numbers (null for an open bound) and low <= high, e.g. [0.9, 1.0]"
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise self.fail(where, f"expected a range [low, high], got {value!r}. HINT: {fix}")
        for bound in value:
            if bound is not None and (isinstance(bound, bool) or not isinstance(bound, (int, float))
                                      or not math.isfinite(bound)):
                raise self.fail(where, f"expected numeric bounds, got {value!r}. HINT: {fix}")
        low, high = value
        if low is None and high is None:
            raise self.fail(where, f"a range needs at least one bound, got {value!r}. HINT: {fix}")
        if low is not None and high is not None and low > high:
            raise self.fail(where, f"low bound {low} is above high bound {high}. HINT: {fix}")
        return (None if low is None else float(low), None if high is None else float(high))

    def check_references(self, lessons: list[Lesson], seen: dict[str, str]) -> None:
        ids = [lesson.id for lesson in lessons]
        produced: dict[str, str] = {}
        for lesson in lessons:
            for artifact in lesson.produces:
                if artifact in produced:
                    raise self.fail(f"{seen[lesson.id]}.produces",
                                    f"artifact {artifact!r} is already produced by lesson {produced[artifact]!r}")
                produced[artifact] = lesson.id
        for lesson in lessons:
            for req in lesson.requires:
                if req not in ids:
                    raise self.fail(f"{seen[lesson.id]}.requires",
                                    f"unknown lesson {req!r} in the prerequisites of {lesson.id!r}. "
                                    f"Known lessons: {', '.join(ids)}")
                if req == lesson.id:
                    raise self.fail(f"{seen[lesson.id]}.requires", f"lesson {lesson.id!r} requires itself")
            for artifact in lesson.needs:
                if artifact not in produced:
                    raise self.fail(f"{seen[lesson.id]}.needs",
                                    f"artifact {artifact!r} is produced by no lesson. HINT: add it to the "
                                    f"`produces` list of the lesson that writes it")


def _topological(lessons: list[Lesson], file: Path | None = None) -> list[Lesson]:
    """Lessons ordered so that each comes after its prerequisites (and producers), else manifest order."""
    by_id = {lesson.id: lesson for lesson in lessons}
    producer = {a: lesson.id for lesson in lessons for a in lesson.produces}
    deps = {lesson.id: [r for r in lesson.requires if r in by_id] +
            [producer[a] for a in lesson.needs if a in producer and producer[a] != lesson.id] for lesson in lessons}
    order: list[Lesson] = []
    state: dict[str, int] = {}   # 1 visiting, 2 done

    def visit(lesson_id: str, trail: list[str]) -> None:
        if state.get(lesson_id) == 2:
            return
        if state.get(lesson_id) == 1:
            cycle = trail[trail.index(lesson_id):] + [lesson_id]
            raise PathManifestError(f"cycle in prerequisites: {' -> '.join(cycle)}. HINT: remove one of these "
                                    "`requires` (or `needs`) entries", file=file, where="requires")
        state[lesson_id] = 1
        for dep in deps[lesson_id]:
            visit(dep, trail + [lesson_id])
        state[lesson_id] = 2
        order.append(by_id[lesson_id])

    for lesson in lessons:
        visit(lesson.id, [])
    return order
