"""Self-checking exercises for the lessons, in the spirit of Kaggle Learn's learntools.

Each lesson keeps its checks, hints and reference solutions out of sight, in
``notebooks/<stage>/checks/<lesson>.py``: one :class:`Exercise` subclass per
exercise. The notebook only sees them through :class:`Exercises`::

    ex = Exercises("tensors_and_autograd")     # setup cell: loads checks/tensors_and_autograd.py

    # YOUR ANSWER                                 (starter code: None, ... or raise NotImplementedError)
    def normalize(t):
        raise NotImplementedError

    ex.normalize.check(normalize)    # ✔ right / ✘ what is wrong / ○ not attempted yet
    ex.normalize.hint()              # a nudge;  ex.normalize.hint(2): nearly the answer
    ex.normalize.solution()          # the reference answer, only when asked for
    ex.done()                        # the score; marks the lesson done when every exercise is right

A check runs the learner's code on several inputs, some of them hidden (drawn
at random in the check), so hard-coding the visible case does not pass. The
outcome is ``correct``, ``incorrect`` or ``not_attempted`` (the starter code is
untouched: an answer still ``None``/``...`` or code that raises
``NotImplementedError``). Each outcome is recorded with :func:`sampan.record`
as ``exercise_<name>`` (True only when correct, for the path's ranges), kept in
the learner's exercise log (``<data dir>/exercises.json``) and, on a Sampan
hub, sent to the teacher dashboard. A hidden cell tagged ``solution`` calls
``ex.<name>.solve(globals())`` when the lesson runs with ``SOLUTION = True``
(the test suite does, and runs every lesson once more without it: every
exercise must then be not attempted or incorrect).

The older one-line checks, :meth:`Exercises.check` and
:meth:`Exercises.check_function`, remain for quick checks inside a lesson.

Example:
    >>> from sampan.path.exercise import Exercises
    >>> ex = Exercises("tensors_and_autograd")
    >>> ex.grad_of_cube.check(None)
    ○ grad_of_cube: not attempted yet: replace the placeholder in the # YOUR ANSWER cell
    [sampan.record] exercise_grad_of_cube = false
    False
"""
from __future__ import annotations

import importlib.util
import math
import numbers
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from sampan.errors import bad_argument
from sampan.path.lang import default_language, normalize_language
from sampan.path.progress import mark_done, report_exercises, title_of
from sampan.utils.record import record

__all__ = ["Exercise", "Exercises", "Incorrect", "NotAttempted", "check", "compare"]

_MISSING = object()
RIGHT, WRONG, OPEN = "✔", "✘", "○"
OUTCOMES = ("correct", "incorrect", "not_attempted")


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _as_array(value: Any):
    """A NumPy array for tensors and arrays, ``None`` for anything else."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        return value.detach().cpu().numpy()
    if type(value).__module__ == "numpy" and hasattr(value, "shape"):
        import numpy as np

        return np.asarray(value)
    return None


# What `compare` finds wrong, per language (the lesson's: sampan.path.lang.default_language()).
_COMPARE = {
    "en": {"no_answer": "no answer yet (the value is still None or ...)",
           "not_array": "expected an array or tensor of shape {shape}, got {kind}",
           "shape": "expected shape {expected}, got shape {got}",
           "values": "values differ (largest difference {diff:.4g} at index {index})",
           "number": "expected a number, got {kind} {got}", "value": "expected {expected}, got {got}",
           "count": "expected {expected} items, got {got}", "item": "item {i}: {problem}",
           "keys": "expected keys {expected}, got keys {got}", "key": "key {key!r}: {problem}"},
    "zh": {"no_answer": "还没有作答（值仍是 None 或 ...）",
           "not_array": "应为形状 {shape} 的数组或张量，得到 {kind}",
           "shape": "形状应为 {expected}，得到 {got}",
           "values": "数值不同（最大差 {diff:.4g} 位于下标 {index}）",
           "number": "应为一个数，得到 {kind} {got}", "value": "应为 {expected}，得到 {got}",
           "count": "应有 {expected} 项，得到 {got} 项", "item": "第 {i} 项：{problem}",
           "keys": "键应为 {expected}，得到 {got}", "key": "键 {key!r}：{problem}"},
}


def compare(got: Any, expected: Any, *, rtol: float = 1e-5, atol: float = 1e-8, lang: str | None = None) -> str | None:
    """Says what is wrong with ``got`` compared with ``expected``, or ``None`` when they agree.

    Tensors and arrays must have the same shape and be ``allclose``; numbers must be
    ``isclose``; lists, tuples and dicts are compared item by item; anything else with ``==``.
    The words are in ``lang`` (``"en"`` or ``"zh"``; default the lesson's language).

    Example:
        >>> from sampan.path.exercise import compare
        >>> compare(0.30000001, 0.3) is None
        True
        >>> compare([1, 2], [1, 3], lang="en")
        'item 1: expected 3, got 2'
        >>> compare([1, 2], [1, 3], lang="zh")
        '第 1 项：应为 3，得到 2'
    """
    say = _COMPARE[default_language() if lang is None else normalize_language(lang)]
    if got is None or got is Ellipsis:
        return say["no_answer"]
    exp_arr = _as_array(expected)
    if exp_arr is not None:
        import numpy as np

        got_arr = _as_array(got)
        if got_arr is None:
            try:
                got_arr = np.asarray(got, dtype=exp_arr.dtype)
            except (TypeError, ValueError):
                return say["not_array"].format(shape=tuple(exp_arr.shape), kind=type(got).__name__)
        if got_arr.shape != exp_arr.shape:
            return say["shape"].format(expected=tuple(exp_arr.shape), got=tuple(got_arr.shape))
        if got_arr.dtype == bool or exp_arr.dtype == bool:
            equal = np.array_equal(got_arr, exp_arr)
        else:
            equal = np.allclose(got_arr.astype(float), exp_arr.astype(float), rtol=rtol, atol=atol)
        if not equal:
            diff = np.abs(got_arr.astype(float) - exp_arr.astype(float))
            index = tuple(int(i) for i in np.unravel_index(diff.argmax(), diff.shape))
            return say["values"].format(diff=diff.max(), index=index)
        return None
    if isinstance(expected, numbers.Number) and not isinstance(expected, bool):
        if not isinstance(got, numbers.Number) and _as_array(got) is None:
            return say["number"].format(kind=type(got).__name__, got=_short(got))
        value = float(got.item() if hasattr(got, "item") else got)
        if not math.isclose(value, float(expected), rel_tol=rtol, abs_tol=atol):
            return say["value"].format(expected=repr(expected), got=f"{value:.6g}")
        return None
    if isinstance(expected, (list, tuple)) and isinstance(got, (list, tuple)):
        if len(got) != len(expected):
            return say["count"].format(expected=len(expected), got=len(got))
        for i, (g, e) in enumerate(zip(got, expected)):
            problem = compare(g, e, rtol=rtol, atol=atol, lang=lang)
            if problem:
                return say["item"].format(i=i, problem=problem)
        return None
    if isinstance(expected, dict) and isinstance(got, dict):
        if set(got) != set(expected):
            return say["keys"].format(expected=sorted(expected), got=sorted(got))
        for key in expected:
            problem = compare(got[key], expected[key], rtol=rtol, atol=atol, lang=lang)
            if problem:
                return say["key"].format(key=key, problem=problem)
        return None
    if got != expected:
        return say["value"].format(expected=_short(expected), got=_short(got))
    return None


# The fixed words of the feedback, in the lesson's language (SAMPAN_LANG, set by `sampan lab|path run --lang`);
# a hint or a label of `expect` may be a str or {"en": ..., "zh": ...}.
_WORDS = {
    "en": {"right": "right", "hint": ". HINT: ",
           "score": "{passed}/{total} exercises right", "todo": "; still to do: {names}",
           "complete": "all {total} exercises right: lesson {lesson!r} complete",
           "not_attempted": "not attempted yet: replace the placeholder in the # YOUR ANSWER cell",
           "try_hint": " (stuck? ex.{name}.hint())", "hint_title": "HINT {level}/{count} for {name}",
           "no_more_hints": "that was the last hint: ex.{name}.solution() shows the reference answer",
           "solution_title": "Reference solution of {name} (try your own first):",
           "solved": "(the reference solution of {name} is filled in)", "raised": "your code raised {error}",
           "hint_line": "💡 {title}: {hint}", "label": "{what}: {problem}", "check_failed": "a check failed",
           "condition": "the condition is {value}", "not_function": "expected a function, got {value}",
           "call_raised": "{call} raised {error}", "not_saved": "(progress not saved: {error})"},
    "zh": {"right": "正确", "hint": "。提示：",
           "score": "答对 {passed}/{total} 道练习", "todo": "；还需完成：{names}",
           "complete": "全部 {total} 道练习都答对了：《{title}》一课已完成",
           "not_attempted": "还没有作答：请替换 # YOUR ANSWER 单元格里的占位代码",
           "try_hint": "（卡住了？运行 ex.{name}.hint()）", "hint_title": "{name} 的提示 {level}/{count}",
           "no_more_hints": "这是最后一条提示：ex.{name}.solution() 会显示参考答案",
           "solution_title": "{name} 的参考答案（请先自己尝试）：",
           "solved": "（已填入 {name} 的参考答案）", "raised": "你的代码抛出了 {error}",
           "hint_line": "💡 {title}：{hint}", "label": "{what}：{problem}",
           "check_failed": "有一项检查没有通过",
           "condition": "条件的值为 {value}", "not_function": "应为一个函数，得到 {value}",
           "call_raised": "{call} 抛出了 {error}", "not_saved": "（学习进度未保存：{error}）"},
}


def _words() -> dict[str, str]:
    from sampan.path.lang import default_language

    return _WORDS[default_language()]


def _text(value: str | dict[str, str]) -> str:
    """A str, or ``{"en": ..., "zh": ...}`` in the lesson's language."""
    from sampan.path.lang import default_language, localized

    return localized(value, default_language()) if value else ""


def _unanswered(value: Any) -> bool:
    return value is None or value is Ellipsis


def _say(name: str, problem: str | None, hint: str | dict[str, str] = "", *, outcome: str | None = None) -> str:
    """Prints the feedback line and records ``exercise_<name>`` (True only when correct); returns the outcome
    (``correct``, ``incorrect`` or ``not_attempted``)."""
    words = _words()
    outcome = outcome or ("correct" if problem is None else "incorrect")
    if outcome == "correct":
        print(f"{RIGHT} {name}: {words['right']}")
    elif outcome == "not_attempted":
        print(f"{OPEN} {name}: {words['not_attempted']}")
    else:
        message = f"{WRONG} {name}: {problem}"
        hint = _text(hint)
        print(message + (words["hint"] + hint if hint else ""))
    record(f"exercise_{name}", outcome == "correct")
    return outcome


def check(name: str, got: Any, expected: Any = _MISSING, *, hint: str | dict[str, str] = "", rtol: float = 1e-5,
          atol: float = 1e-8, problem: str | None = None) -> bool:
    """Checks one answer and prints ``✔ name: right`` or ``✘ name: what is wrong. HINT: ...``.

    An answer still ``None`` or ``...`` is *not attempted* (``○``), not wrong.

    Args:
        name: the exercise's short name (a Python identifier is best: it becomes ``exercise_<name>``).
        got: the learner's value; without ``expected`` it is a condition (truthy means right).
        expected: the right value, compared with :func:`compare`.
        hint: what to try when it is wrong: a str, or ``{"en": ..., "zh": ...}`` for a bilingual lesson
            (shown in the language of ``SAMPAN_LANG`` / the locale).
        rtol, atol: tolerances for numbers and arrays.
        problem: with a condition, what to say when it is false.

    Returns:
        True when right.
    """
    return _check(name, got, expected, hint=hint, rtol=rtol, atol=atol, problem=problem) == "correct"


def _check(name: str, got: Any, expected: Any = _MISSING, *, hint: str | dict[str, str] = "", rtol: float = 1e-5,
           atol: float = 1e-8, problem: str | None = None) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(bad_argument("name", name, "a non-empty str naming the exercise", 'check("q1", ...)'))
    if _unanswered(got):
        outcome = _say(name, None, outcome="not_attempted")
    elif expected is _MISSING:
        outcome = _say(name, None if got else (problem or _words()["condition"].format(value=_short(got))), hint)
    else:
        outcome = _say(name, compare(got, expected, rtol=rtol, atol=atol), hint)
    return outcome


class Incorrect(Exception):
    """Raised by a check (:meth:`Exercise.verify`) to say what is wrong; str or ``{"en": ..., "zh": ...}``."""

    def __init__(self, message: str | dict[str, str]):
        super().__init__(message)
        self.message = message


class NotAttempted(Exception):
    """Raised by a check when the answer is still the starter code."""


class Exercise:
    """One exercise, written in the lesson's checks module (``notebooks/<stage>/checks/<lesson>.py``).

    A subclass sets ``hints`` (at least two, of rising strength: a nudge, then nearly the answer),
    ``solution`` (the reference code, run by :meth:`solve`) and implements :meth:`verify`. The name
    the notebook uses is the class attribute ``name`` (default: the class name).

    Example:
        >>> from sampan.path.exercise import Exercise, expect
        >>> class double(Exercise):
        ...     hints = ("Multiply by a number.", "return 2 * x")
        ...     solution = "def double(x):\\n    return 2 * x\\n"
        ...     def verify(self, double):
        ...         for x in (3, -1, 0.5):  # several inputs; a check can draw hidden ones at random
        ...             expect(double(x), 2 * x, f"double({x})")
    """

    name: str = ""
    hints: Sequence[str | dict[str, str]] = ()
    solution: str = ""

    def __init__(self, owner: "Exercises | None" = None):
        self.name = self.name or type(self).__name__
        self._owner = owner
        code = type(self).solution
        self._code = code.strip("\n") + "\n" if isinstance(code, str) else ""
        self.solution = self._show_solution  # authors set `solution` to code; learners call ex.<name>.solution()

    def verify(self, *answers: Any, **context: Any) -> None:
        """Raises :class:`Incorrect` (or ``AssertionError``) saying what is wrong; returns when right."""
        raise NotImplementedError(f"{type(self).__name__}.verify is not written")

    # what the learner calls
    def check(self, *answers: Any, **context: Any) -> bool:
        """Checks the learner's answer(s); prints ✔ / ✘ / ○ and records the outcome. True when right.

        ``answers`` are the learner's values (still ``None``/``...`` means not attempted); ``context``
        passes values of the lesson the check needs (keyword arguments).
        """
        problem, outcome = None, "correct"
        if not answers or any(_unanswered(a) for a in answers):
            outcome = "not_attempted"
        else:
            try:
                self.verify(*answers, **context)
            except (NotAttempted, NotImplementedError):
                outcome = "not_attempted"
            except Incorrect as exc:
                problem, outcome = _text(exc.message), "incorrect"
            except AssertionError as exc:
                problem, outcome = str(exc) or _words()["check_failed"], "incorrect"
            except Exception as exc:  # the learner's code failed: report it, keep the lesson running
                problem = _words()["raised"].format(error=f"{type(exc).__name__}: {exc}")
                outcome = "incorrect"
        if problem is not None and self.hints:
            problem += _words()["try_hint"].format(name=self.name)
        _say(self.name, problem, outcome=outcome)
        if self._owner is not None:
            self._owner._note(self.name, outcome)
        return outcome == "correct"

    def hint(self, level: int = 1) -> None:
        """Prints hint ``level`` (1: a nudge, 2: nearly the answer)."""
        count = len(self.hints)
        if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= max(count, 1):
            raise ValueError(bad_argument("level", level, f"an int from 1 to {count}",
                                          f"ex.{self.name}.hint() for a nudge, ex.{self.name}.hint({count}) for more"))
        words = _words()
        title = words["hint_title"].format(level=level, count=count, name=self.name)
        print(words["hint_line"].format(title=title, hint=_text(self.hints[level - 1])))
        if level == count:
            print(words["no_more_hints"].format(name=self.name))
        if self._owner is not None:
            self._owner._log(self.name, f"hint{level}")

    def _show_solution(self) -> None:
        """Prints the reference solution (only when asked: try your own first)."""
        print(_words()["solution_title"].format(name=self.name))
        print(self.solution_code())
        if self._owner is not None:
            self._owner._log(self.name, "solution")

    def solution_code(self) -> str:
        """The reference solution's source."""
        return self._code

    def solve(self, namespace: dict[str, Any]) -> None:
        """Runs the reference solution in ``namespace`` (the notebook's ``globals()``), as ``SOLUTION = True`` does."""
        if not isinstance(namespace, dict):
            raise ValueError(bad_argument("namespace", namespace, "the notebook's globals() dict",
                                          f"ex.{self.name}.solve(globals())"))
        exec(compile(self.solution_code(), f"<solution of {self.name}>", "exec"), namespace)  # the course's own code
        print(_words()["solved"].format(name=self.name))

    def __repr__(self) -> str:
        return f"<exercise {self.name}: .check(...), .hint(), .hint(2), .solution()>"


def expect(got: Any, expected: Any, what: str | dict[str, str] = "", *, rtol: float = 1e-5,
           atol: float = 1e-8) -> None:
    """Raises :class:`Incorrect` when ``got`` differs from ``expected`` (see :func:`compare`), naming ``what``.

    ``what`` labels the case: a str, or ``{"en": ..., "zh": ...}`` shown in the lesson's language.

    Example:
        >>> from sampan.path.exercise import expect
        >>> expect(2 + 2, 4, {"en": "2 + 2", "zh": "2 加 2"})
    """
    problem = compare(got, expected, rtol=rtol, atol=atol)
    if problem is not None:
        label = _text(what)
        raise Incorrect(_words()["label"].format(what=label, problem=problem) if label else problem)


class Exercises:
    """The exercises of one lesson: its checks module's exercises as attributes, a score, progress.

    Args:
        lesson: the lesson's id (its notebook's name, e.g. ``"training_craft"``).
        checks: the checks module; default ``checks/<lesson>.py`` beside the lesson's notebook
            (found through ``notebooks/path.yaml``). A lesson without one still has :meth:`check`.

    Example:
        >>> from sampan.path.exercise import Exercises
        >>> ex = Exercises("tensors_and_autograd")
        >>> ex.normalize.hint()
        💡 HINT 1/2 for normalize: ...
    """

    def __init__(self, lesson: str, *, checks: str | Path | None = None):
        if not isinstance(lesson, str) or not lesson:
            raise ValueError(bad_argument("lesson", lesson, "the lesson id, e.g. 'training_craft'"))
        self.lesson = lesson
        self.results: dict[str, bool] = {}
        self.outcomes: dict[str, str] = {}
        self.exercises: dict[str, Exercise] = {}
        path = Path(checks) if checks is not None else _checks_file(lesson)
        if checks is not None and not path.is_file():
            raise FileNotFoundError(bad_argument("checks", str(path), "the lesson's checks module (a .py file)"))
        if path is not None and path.is_file():
            for cls in _exercise_classes(path, lesson):
                exercise = cls(self)
                self.exercises[exercise.name] = exercise

    def __getattr__(self, name: str) -> Exercise:
        exercises = self.__dict__.get("exercises", {})
        if name in exercises:
            return exercises[name]
        if name.startswith("_"):
            raise AttributeError(name)
        raise AttributeError(f"lesson {self.__dict__.get('lesson')!r} has no exercise {name!r}; "
                             f"its exercises: {', '.join(exercises) or 'none'}")

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self.exercises))

    def check(self, name: str, got: Any, expected: Any = _MISSING, **kwargs: Any) -> bool:
        """Like :func:`check`; remembers the result for :meth:`done`."""
        self._note(name, _check(name, got, expected, **kwargs))
        return self.results[name]

    def check_function(self, name: str, fn: Callable, cases: Iterable[tuple[Sequence[Any], Any]], *,
                       hint: str | dict[str, str] = "", rtol: float = 1e-5, atol: float = 1e-8) -> bool:
        """Calls ``fn(*args)`` for each ``(args, expected)`` case; an exception counts as wrong.

        The first failing case is reported with its arguments; a function that still raises
        ``NotImplementedError`` (the starter code) is not attempted.
        """
        found, outcome = None, None
        if _unanswered(fn):
            outcome = "not_attempted"
        elif not callable(fn):
            found = _words()["not_function"].format(value=_short(fn))
        else:
            for args, expected in cases:
                shown = ", ".join(_short(a, 40) for a in args)
                try:
                    got = fn(*args)
                except NotImplementedError:
                    outcome = "not_attempted"
                    break
                except Exception as exc:  # the learner's code: report, do not crash the lesson
                    error = f"{type(exc).__name__}: {exc}"
                    found = _words()["call_raised"].format(call=f"{name}({shown})", error=error)
                    break
                problem = compare(got, expected, rtol=rtol, atol=atol)
                if problem:
                    found = _words()["label"].format(what=f"{name}({shown})", problem=problem)
                    break
        outcome = _say(name, found, hint, outcome=outcome)
        self._note(name, outcome)
        return outcome == "correct"

    def _note(self, name: str, outcome: str) -> None:
        self.outcomes[name] = outcome
        self.results[name] = outcome == "correct"
        self._log(name, outcome)

    def _log(self, name: str, event: str) -> None:
        from sampan.path.progress import record_exercise

        record_exercise(self.lesson, name, event)

    def done(self) -> bool:
        """Says how many exercises are right; marks the lesson done when all are. Returns True when all are."""
        names = list(dict.fromkeys([*self.exercises, *self.outcomes]))
        results = {n: self.results.get(n, False) for n in names}
        total, passed = len(names), sum(results.values())
        _report(self.lesson, {n: self.outcomes.get(n, "not_attempted") for n in names})
        if total == 0 or passed < total:
            missing = [n for n in names if not results[n]]
            words = _words()
            print(words["score"].format(passed=passed, total=total)
                  + (words["todo"].format(names=", ".join(missing)) if missing else ""))
            return False
        title = title_of(self.lesson, default_language())
        print(f"{RIGHT} " + _words()["complete"].format(total=total, lesson=self.lesson, title=title))
        _mark_done(self.lesson)
        return True


def _checks_file(lesson: str) -> Path | None:
    """``checks/<lesson>.py`` beside the lesson's notebook, through ``path.yaml``; None when there is none."""
    from sampan.path.manifest import PathManifestError, default_manifest, load_path

    try:
        manifest = default_manifest()
        notebook = load_path(manifest, check_files=False).lesson(lesson).notebook
    except (FileNotFoundError, PathManifestError, KeyError, ValueError):
        return None
    return Path(notebook).parent / "checks" / f"{lesson}.py"


def _exercise_classes(path: Path, lesson: str) -> list[type[Exercise]]:
    """The :class:`Exercise` subclasses a checks module defines, in the order written."""
    spec = importlib.util.spec_from_file_location(f"sampan_checks_{lesson}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and pickling look the module up
    spec.loader.exec_module(module)  # the course's own checks, shipped with the project
    return [obj for obj in vars(module).values()
            if isinstance(obj, type) and issubclass(obj, Exercise) and obj is not Exercise
            and obj.__module__ == spec.name]


def _report(lesson: str, outcomes: dict[str, str]) -> None:
    """On a Sampan hub, sends the exercise outcomes to the teacher dashboard (nothing elsewhere)."""
    report_exercises(lesson, dict(outcomes))


def _mark_done(lesson: str) -> None:
    """Marks the lesson done in the learner's progress (:func:`sampan.path.mark_done`)."""
    try:
        print(mark_done(lesson))
    except ValueError as exc:  # an id the manifest does not know yet: keep the lesson running
        print(_words()["not_saved"].format(error=exc))
