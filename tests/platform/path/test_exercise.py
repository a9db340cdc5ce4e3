"""The lessons' self-checking exercises: right answers say so, wrong ones say what is wrong and hint."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from sampan.path import exercise
from sampan.path.exercise import Exercises, check, compare
from sampan.path.progress import load_exercise_log

CHECKS = '''
import random
from sampan.path.exercise import Exercise, Incorrect, expect


class double(Exercise):
    hints = ({"en": "Multiply.", "zh": "用乘法。"}, {"en": "return 2 * x", "zh": "return 2 * x"})
    solution = """
def double(x):
    return 2 * x
"""

    def verify(self, double):
        for x in [3, *(random.randint(-10**6, 10**6) for _ in range(5))]:  # the example, then hidden inputs
            expect(double(x), 2 * x, f"double({x})")


class answer(Exercise):
    hints = ("Think.", "It is 42.")
    solution = "answer = 42"

    def verify(self, answer, *, offset=0):
        if answer != 42 + offset:
            raise Incorrect({"en": "not the answer", "zh": "不是答案"})
'''


@pytest.fixture
def lesson_ex(tmp_path):
    checks = tmp_path / "checks.py"
    checks.write_text(CHECKS)
    return Exercises("planted", checks=checks)


def test_compare_agrees_within_tolerance_and_explains_differences():
    assert compare(0.1 + 0.2, 0.3) is None
    assert compare(torch.tensor([1.0, 2.0]), np.array([1.0, 2.0])) is None
    assert compare(torch.ones(2, 3), torch.ones(3, 2)) == "expected shape (3, 2), got shape (2, 3)"
    assert "largest difference 1" in compare(torch.tensor([1.0, 3.0]), torch.tensor([1.0, 2.0]))
    assert compare([1, 2], [1, 3]) == "item 1: expected 3, got 2"
    assert compare({"a": 1}, {"b": 1}) == "expected keys ['b'], got keys ['a']"
    assert compare(None, 3) == "no answer yet (the value is still None or ...)"
    assert compare("x", 3).startswith("expected a number, got str")


def test_check_prints_right_or_what_is_wrong_and_records(capsys):
    assert check("q1", 3, expected=3) is True
    assert check("q2", 4, expected=3, hint="add them") is False
    assert check("q3", False, problem="the loss did not go down") is False
    out = capsys.readouterr().out
    assert "✔ q1: right" in out
    assert "✘ q2: expected 3, got 4. HINT: add them" in out
    assert "✘ q3: the loss did not go down" in out
    assert "[sampan.record] exercise_q1 = true" in out and "[sampan.record] exercise_q2 = false" in out


def test_check_function_reports_unwritten_and_crashing_answers(capsys):
    ex = Exercises("some_lesson")

    def unwritten(x):
        raise NotImplementedError

    def crashing(x):
        return x / "a"

    assert not ex.check_function("f", unwritten, [((1,), 2)])
    assert not ex.check_function("g", crashing, [((1,), 2)])
    assert not ex.check_function("h", lambda x: x + 1, [((1,), 2), ((2,), 4)], hint="double it")
    out = capsys.readouterr().out
    assert "○ f: not attempted yet" in out  # the starter code still raises NotImplementedError
    assert "✘ g: g(1) raised TypeError" in out
    assert "✘ h: h(2): expected 4, got 3. HINT: double it" in out


def test_done_marks_the_lesson_only_when_every_check_passed(monkeypatch, capsys):
    marked = []
    monkeypatch.setattr(exercise, "_mark_done", marked.append)
    ex = Exercises("a_lesson_without_checks_module")
    ex.check("a", 1, expected=1)
    ex.check("b", 1, expected=2)
    assert ex.done() is False and marked == []
    assert "1/2 exercises right; still to do: b" in capsys.readouterr().out
    ex.check("b", 2, expected=2)
    assert ex.done() is True and marked == ["a_lesson_without_checks_module"]


def test_bad_names_are_rejected():
    with pytest.raises(ValueError, match="Expected `name`"):
        check("", 1, expected=1)
    with pytest.raises(ValueError, match="Expected `lesson`"):
        Exercises("")


def test_a_check_tells_correct_incorrect_and_not_attempted_apart(lesson_ex, capsys):
    def starter(x):
        raise NotImplementedError

    assert lesson_ex.double.check(starter) is False
    assert lesson_ex.double.check(lambda x: 6 if x == 3 else 0) is False  # right on the example only
    assert lesson_ex.answer.check(None) is False
    out = capsys.readouterr().out
    assert "○ double: not attempted yet" in out and "○ answer: not attempted yet" in out
    assert "✘ double: double(" in out and "(stuck? ex.double.hint())" in out
    assert lesson_ex.outcomes == {"double": "incorrect", "answer": "not_attempted"}
    assert lesson_ex.double.check(lambda x: x + x) is True
    assert lesson_ex.answer.check(43, offset=1) is True  # context reaches the check as keyword arguments
    assert "✔ double: right" in capsys.readouterr().out


def test_the_learners_crash_is_reported_not_raised(lesson_ex, capsys):
    assert lesson_ex.double.check(lambda x: x / "a") is False
    assert "✘ double: your code raised TypeError" in capsys.readouterr().out


def test_hints_rise_and_the_solution_shows_and_solves(lesson_ex, capsys, monkeypatch):
    monkeypatch.setenv("SAMPAN_LANG", "zh")
    lesson_ex.double.hint()
    lesson_ex.double.hint(2)
    out = capsys.readouterr().out
    assert "double 的提示 1/2：用乘法。" in out and "提示 2/2：return 2 * x" in out and "ex.double.solution()" in out
    with pytest.raises(ValueError, match="Expected `level`"):
        lesson_ex.double.hint(3)
    monkeypatch.setenv("SAMPAN_LANG", "en")
    lesson_ex.double.solution()
    assert "def double(x):\n    return 2 * x" in capsys.readouterr().out
    namespace = {}
    lesson_ex.double.solve(namespace)
    assert namespace["double"](21) == 42
    log = load_exercise_log()["planted"]["double"]
    assert log["hints"] == 2 and log["solution_seen"] is True


def test_the_exercise_log_keeps_outcomes_and_attempts(lesson_ex):
    lesson_ex.answer.check(None)
    assert load_exercise_log()["planted"]["answer"]["outcome"] == "not_attempted"
    lesson_ex.answer.check(41)
    lesson_ex.answer.check(42)
    lesson_ex.answer.check(0)  # a right answer stays right in the log
    entry = load_exercise_log()["planted"]["answer"]
    assert entry["outcome"] == "correct" and entry["attempts"] == 3


def test_done_counts_every_exercise_of_the_module_even_unchecked(lesson_ex, capsys, monkeypatch):
    marked = []
    monkeypatch.setattr(exercise, "_mark_done", marked.append)
    lesson_ex.double.check(lambda x: 2 * x)
    assert lesson_ex.done() is False and marked == []
    assert "1/2 exercises right; still to do: answer" in capsys.readouterr().out


def test_unknown_exercises_and_missing_checks_are_named(lesson_ex, tmp_path):
    with pytest.raises(AttributeError, match="has no exercise 'tripple'; its exercises: double, answer"):
        lesson_ex.tripple
    with pytest.raises(FileNotFoundError, match="Expected `checks`"):
        Exercises("planted", checks=tmp_path / "nope.py")


def test_every_course_lesson_exercise_has_two_hints_and_a_solution():
    from sampan.path.manifest import load_path

    path = load_path()
    found = 0
    for lesson in path.lessons:
        ex = Exercises(lesson.id)
        for name, item in ex.exercises.items():
            found += 1
            assert len(item.hints) == 2, f"{lesson.id}.{name}: two hints, a nudge then nearly the answer"
            assert all(isinstance(h, dict) and {"en", "zh"} <= set(h) for h in item.hints), f"{lesson.id}.{name}"
            assert item.solution_code().strip(), f"{lesson.id}.{name} has no solution"
            compile(item.solution_code(), name, "exec")
            assert f"exercise_{name}" in {m.name for m in lesson.metrics}, f"{lesson.id}.{name} is not ranged in path.yaml"
    assert found >= 2
