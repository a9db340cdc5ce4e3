"""The lessons' self-checking exercises: right answers say so, wrong ones say what is wrong and hint."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from sampan.path import exercise
from sampan.path.exercise import Exercises, check, compare


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
    assert "✘ f: not written yet" in out
    assert "✘ g: g(1) raised TypeError" in out
    assert "✘ h: h(2): expected 4, got 3. HINT: double it" in out


def test_done_marks_the_lesson_only_when_every_check_passed(monkeypatch, capsys):
    marked = []
    monkeypatch.setattr(exercise, "_mark_done", marked.append)
    ex = Exercises("tensors_and_autograd")
    ex.check("a", 1, expected=1)
    ex.check("b", 1, expected=2)
    assert ex.done() is False and marked == []
    assert "1/2 exercises right; still to do: b" in capsys.readouterr().out
    ex.check("b", 2, expected=2)
    assert ex.done() is True and marked == ["tensors_and_autograd"]


def test_bad_names_are_rejected():
    with pytest.raises(ValueError, match="Expected `name`"):
        check("", 1, expected=1)
    with pytest.raises(ValueError, match="Expected `lesson`"):
        Exercises("")
