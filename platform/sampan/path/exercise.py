"""Self-checking exercises for the lessons, in the spirit of Kaggle Learn's ``q1.check()``.

A lesson opens an :class:`Exercises` for its id, the learner writes an answer
in a ``# YOUR ANSWER`` cell, and a check cell compares it: ``✔ right`` or
``✘`` with what is wrong and a hint. Each result is recorded with
:func:`sampan.record` as ``exercise_<name>`` (True/False), so the test suite
and the learning-path report see it; when every check of the lesson has
passed, :meth:`Exercises.done` marks the lesson done with
``sampan.path.mark_done``. It lives in the learning-path package, whose
progress it updates (``from sampan.path.exercise import Exercises``).

Example:
    >>> ex = Exercises("tensors_and_autograd")
    >>> ex.check("sum", 1 + 2, expected=3)
    ✔ sum: right
    [sampan.record] exercise_sum = true
    True
    >>> ex.check("sum", 4, expected=3, hint="add the two numbers")
    ✘ sum: expected 3, got 4. HINT: add the two numbers
    [sampan.record] exercise_sum = false
    False
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Iterable, Sequence

from sampan.errors import bad_argument
from sampan.path.progress import mark_done, report_exercises
from sampan.utils.record import record

__all__ = ["Exercises", "check", "compare"]

_MISSING = object()
RIGHT, WRONG = "✔", "✘"


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


def compare(got: Any, expected: Any, *, rtol: float = 1e-5, atol: float = 1e-8) -> str | None:
    """Says what is wrong with ``got`` compared with ``expected``, or ``None`` when they agree.

    Tensors and arrays must have the same shape and be ``allclose``; numbers must be
    ``isclose``; lists, tuples and dicts are compared item by item; anything else with ``==``.

    Example:
        >>> compare(0.30000001, 0.3) is None
        True
        >>> compare([1, 2], [1, 3])
        'item 1: expected 3, got 2'
    """
    if got is None or got is Ellipsis:
        return "no answer yet (the value is still None or ...)"
    exp_arr = _as_array(expected)
    if exp_arr is not None:
        import numpy as np

        got_arr = _as_array(got)
        if got_arr is None:
            try:
                got_arr = np.asarray(got, dtype=exp_arr.dtype)
            except (TypeError, ValueError):
                return f"expected an array or tensor of shape {tuple(exp_arr.shape)}, got {type(got).__name__}"
        if got_arr.shape != exp_arr.shape:
            return f"expected shape {tuple(exp_arr.shape)}, got shape {tuple(got_arr.shape)}"
        if got_arr.dtype == bool or exp_arr.dtype == bool:
            equal = np.array_equal(got_arr, exp_arr)
        else:
            equal = np.allclose(got_arr.astype(float), exp_arr.astype(float), rtol=rtol, atol=atol)
        if not equal:
            diff = np.abs(got_arr.astype(float) - exp_arr.astype(float))
            return f"values differ (largest difference {diff.max():.4g} at index {np.unravel_index(diff.argmax(), diff.shape)})"
        return None
    if isinstance(expected, numbers.Number) and not isinstance(expected, bool):
        if not isinstance(got, numbers.Number) and _as_array(got) is None:
            return f"expected a number, got {type(got).__name__} {_short(got)}"
        value = float(got.item() if hasattr(got, "item") else got)
        if not math.isclose(value, float(expected), rel_tol=rtol, abs_tol=atol):
            return f"expected {expected!r}, got {value:.6g}"
        return None
    if isinstance(expected, (list, tuple)) and isinstance(got, (list, tuple)):
        if len(got) != len(expected):
            return f"expected {len(expected)} items, got {len(got)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            problem = compare(g, e, rtol=rtol, atol=atol)
            if problem:
                return f"item {i}: {problem}"
        return None
    if isinstance(expected, dict) and isinstance(got, dict):
        if set(got) != set(expected):
            return f"expected keys {sorted(expected)}, got keys {sorted(got)}"
        for key in expected:
            problem = compare(got[key], expected[key], rtol=rtol, atol=atol)
            if problem:
                return f"key {key!r}: {problem}"
        return None
    if got != expected:
        return f"expected {_short(expected)}, got {_short(got)}"
    return None


# The fixed words of the feedback, in the lesson's language (SAMPAN_LANG, set by `sampan lab|path run --lang`);
# a hint may be a str or {"en": ..., "zh": ...}. What `compare` finds wrong stays English for now.
_WORDS = {
    "en": {"right": "right", "hint": ". HINT: ", "no_answer": "no answer yet",
           "score": "{passed}/{total} exercises right", "todo": "; still to do: {names}",
           "complete": "all {total} exercises right: lesson {lesson!r} complete"},
    "zh": {"right": "正确", "hint": "。提示：", "no_answer": "还没有作答",
           "score": "答对 {passed}/{total} 道练习", "todo": "；还需完成：{names}",
           "complete": "全部 {total} 道练习都答对了：课程 {lesson!r} 已完成"},
}


def _words() -> dict[str, str]:
    from sampan.path.lang import default_language

    return _WORDS[default_language()]


def _say(name: str, problem: str | None, hint: str | dict[str, str]) -> bool:
    from sampan.path.lang import default_language, localized

    words = _words()
    if problem is None:
        print(f"{RIGHT} {name}: {words['right']}")
        return True
    message = f"{WRONG} {name}: {problem}"
    hint = localized(hint, default_language())
    if hint:
        message += words["hint"] + hint
    print(message)
    return False


def check(name: str, got: Any, expected: Any = _MISSING, *, hint: str | dict[str, str] = "", rtol: float = 1e-5,
          atol: float = 1e-8, problem: str | None = None) -> bool:
    """Checks one answer and prints ``✔ name: right`` or ``✘ name: what is wrong. HINT: ...``.

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
    if not isinstance(name, str) or not name.strip():
        raise ValueError(bad_argument("name", name, "a non-empty str naming the exercise", 'check("q1", ...)'))
    if expected is _MISSING:
        unanswered = _words()["no_answer"] if got is None else f"the condition is {_short(got)}"
        found = None if got else (problem or unanswered)
    else:
        found = compare(got, expected, rtol=rtol, atol=atol)
    ok = _say(name, found, hint)
    record(f"exercise_{name}", ok)
    return ok


class Exercises:
    """The exercises of one lesson: checks answers and marks the lesson done when all are right.

    Args:
        lesson: the lesson's id (its notebook's name, e.g. ``"training_craft"``).

    Example:
        >>> ex = Exercises("tensors_and_autograd")
        >>> ex.check_function("double", lambda x: 2 * x, [((3,), 6), ((0,), 0)])
        ✔ double: right
        [sampan.record] exercise_double = true
        True
    """

    def __init__(self, lesson: str):
        if not isinstance(lesson, str) or not lesson:
            raise ValueError(bad_argument("lesson", lesson, "the lesson id, e.g. 'training_craft'"))
        self.lesson = lesson
        self.results: dict[str, bool] = {}

    def check(self, name: str, got: Any, expected: Any = _MISSING, **kwargs: Any) -> bool:
        """Like :func:`check`; remembers the result for :meth:`done`."""
        self.results[name] = check(name, got, expected, **kwargs)
        return self.results[name]

    def check_function(self, name: str, fn: Callable, cases: Iterable[tuple[Sequence[Any], Any]], *,
                       hint: str | dict[str, str] = "", rtol: float = 1e-5, atol: float = 1e-8) -> bool:
        """Calls ``fn(*args)`` for each ``(args, expected)`` case; an exception counts as wrong.

        The first failing case is reported with its arguments.
        """
        found = None
        if not callable(fn):
            found = f"expected a function, got {_short(fn)}"
        else:
            for args, expected in cases:
                shown = ", ".join(_short(a, 40) for a in args)
                try:
                    got = fn(*args)
                except NotImplementedError:
                    found = "not written yet (it raises NotImplementedError)"
                    break
                except Exception as exc:  # the learner's code: report, do not crash the lesson
                    found = f"{name}({shown}) raised {type(exc).__name__}: {exc}"
                    break
                problem = compare(got, expected, rtol=rtol, atol=atol)
                if problem:
                    found = f"{name}({shown}): {problem}"
                    break
        ok = _say(name, found, hint)
        record(f"exercise_{name}", ok)
        self.results[name] = ok
        return ok

    def done(self) -> bool:
        """Says how many checks passed; marks the lesson done when all did. Returns True when all passed."""
        total, passed = len(self.results), sum(self.results.values())
        _report(self.lesson, self.results)
        if total == 0 or passed < total:
            missing = [n for n, ok in self.results.items() if not ok]
            words = _words()
            print(words["score"].format(passed=passed, total=total)
                  + (words["todo"].format(names=", ".join(missing)) if missing else ""))
            return False
        print(f"{RIGHT} " + _words()["complete"].format(total=total, lesson=self.lesson))
        _mark_done(self.lesson)
        return True


def _report(lesson: str, results: dict[str, bool]) -> None:
    """On a Sampan hub, sends the exercise results to the teacher dashboard (nothing elsewhere)."""
    report_exercises(lesson, dict(results))


def _mark_done(lesson: str) -> None:
    """Marks the lesson done in the learner's progress (:func:`sampan.path.mark_done`)."""
    try:
        print(mark_done(lesson))
    except ValueError as exc:  # an id the manifest does not know yet: keep the lesson running
        print(f"(progress not saved: {exc})")
