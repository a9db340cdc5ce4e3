"""notebooks/03-advanced/compress_a_model.ipynb: what its starter-code run shows, and checks that can fail.

``test_courses.py`` runs the lesson twice (reference solutions, ranged by path.yaml and QUICK_RANGES; untouched
starter code, no exercise may pass); the tests here read the same cached runs (``lesson_run``) and try
the lesson's checks module with wrong answers, without running the lesson.
"""
from __future__ import annotations

import pytest

from lesson_helpers import NOTEBOOKS, lesson_data_dir, lesson_run, outputs_text
from sampan.path.exercise import Exercises

LESSON = "03-advanced/compress_a_model"
on_the_lesson = [pytest.mark.notebook]  # the lesson's runs are shared with test_courses.py (lesson_run)


@pytest.mark.parametrize("_", [pytest.param(None, marks=on_the_lesson)])
def test_starter_code_leaves_every_exercise_not_attempted_and_the_lesson_runs_on(_):
    records, output = lesson_run(LESSON, solution=False)
    assert records["exercise_scale_zero_point"] is False and records["exercise_keep_sensitive_float"] is False
    text = outputs_text(output)
    assert "○ scale_zero_point" in text and "○ keep_sensitive_float" in text, text[-2000:]
    assert "sampan.path.done" not in records
    # the sections after the task cell ran (a smoke run, SAMPAN_FAST_DEV_RUN: their figures are the solution run's)
    assert {"qat_gain_points", "served_pruned_acc", "served_int8_acc"} <= set(records)
    solved, _ = lesson_run(LESSON)
    assert solved["qat_gain_points"] >= 5 and solved["served_pruned_acc"] >= 82


@pytest.mark.parametrize("_", [pytest.param(None, marks=on_the_lesson)])
def test_served_models_answer_as_their_sources_and_live_in_the_lesson_work_folder(_):
    records, _ = lesson_run(LESSON)
    assert records["served_pruned_acc"] == pytest.approx(records["pruned_finetuned_acc"], abs=0.5)
    assert records["served_int8_acc"] >= records["baseline_acc"] - 2.0
    work = lesson_data_dir(LESSON) / "lessons" / "compress_a_model"
    assert (work / "lenet_pruned.pt2").is_file() and (work / "lenet_int8.onnx").is_file()
    assert not list((NOTEBOOKS / "03-advanced").glob("lenet_*"))


@pytest.fixture()
def ex(monkeypatch, tmp_path):
    monkeypatch.setenv("SAMPAN_DATA", str(tmp_path))  # the exercise log goes there
    return Exercises("compress_a_model")


def _solve(exercise):
    import sampan
    from sampan.quantization import quantize_dynamic

    namespace = {"sampan": sampan, "quantize_dynamic": quantize_dynamic}
    exercise.solve(namespace)
    return namespace


def test_the_reference_answer_passes_and_a_fixed_list_of_layers_fails(ex):
    mlp, agreement = ex.keep_sensitive_float.task()
    keep_in_float = _solve(ex.keep_sensitive_float)["keep_in_float"]
    answer = keep_in_float(mlp, agreement)
    assert ex.keep_sensitive_float.check(keep_in_float) is True
    assert ex.keep_sensitive_float.check(lambda model, agreement: list(answer)) is False  # hidden MLPs differ
    assert ex.keep_sensitive_float.check(lambda model, agreement: ["0", "2", "4", "6"]) is False  # not the fewest
    assert ex.outcomes["keep_sensitive_float"] == "incorrect"


def test_qparams_must_include_zero_and_cannot_be_hard_coded(ex):
    assert ex.scale_zero_point.check(_solve(ex.scale_zero_point)["qparams"]) is True
    no_zero = lambda lo, hi: ((hi - lo) / 255, round(-lo / ((hi - lo) / 255)))  # noqa: E731
    assert ex.scale_zero_point.check(no_zero) is False  # fails on the hidden all-positive range
    assert ex.scale_zero_point.check(lambda lo, hi: (4 / 255, 64)) is False  # the visible answer, hard-coded
