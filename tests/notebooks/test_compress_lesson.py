"""Executes notebooks/03-advanced/compress_a_model.ipynb in quick mode and checks its records."""
from __future__ import annotations

import pytest

from lesson_helpers import NOTEBOOKS, assert_follows_conventions, run_lesson

LESSON = NOTEBOOKS / "03-advanced/compress_a_model.ipynb"

pytestmark = [pytest.mark.notebook, pytest.mark.slow]


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    return run_lesson(LESSON, tmp_path_factory.mktemp("compress_lesson"))[0]


def test_lesson_prunes_quantizes_and_serves_within_the_goals(records):
    assert records["baseline_acc"] > 85.0
    assert 0.40 <= records["pruned_flops_ratio"] <= 0.505        # half the FLOPs, as asked
    assert records["pruned_finetuned_acc"] >= records["baseline_acc"] - 3.0
    assert records["static_int8_acc_drop"] <= 2.0
    assert records["int8_size_ratio"] <= 0.35
    assert records["served_int8_acc"] >= records["baseline_acc"] - 2.0
    assert records["served_pruned_acc"] == pytest.approx(records["pruned_finetuned_acc"], abs=0.5)
    assert records["exercise_keep_sensitive_float"] is True


def test_lesson_follows_the_course_conventions():
    assert_follows_conventions(LESSON)
