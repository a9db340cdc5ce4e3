"""Executes notebooks/03-advanced/develop_dynamic_deploy_static.ipynb in quick mode and checks its records."""
from __future__ import annotations

import pytest

from lesson_helpers import NOTEBOOKS, assert_follows_conventions, outputs_text, run_lesson

LESSON = NOTEBOOKS / "03-advanced/develop_dynamic_deploy_static.ipynb"

pytestmark = [pytest.mark.notebook, pytest.mark.slow]


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    return run_lesson(LESSON, tmp_path_factory.mktemp("deploy_lesson"))


def test_lesson_converts_explains_exports_and_serves(executed):
    records, _ = executed
    assert records["eager_acc"] > 0.8
    assert 0.0 <= records["static_max_abs_diff"] < 1e-4
    assert records["graph_breaks_before"] >= 1 and records["graph_breaks_after"] == 0
    assert records["cond_export_matches_eager"] is True
    assert 0.0 <= records["loaded_max_abs_diff"] < 1e-4
    assert records["predictor_matches_eager"] is True
    assert records["latency_ratio_eager_over_predictor_b1"] > 0
    assert records["exercise_fix_graph_break"] is True


def test_lesson_shows_the_fallback_warning_and_the_input_check(executed):
    text = outputs_text(executed[1])
    assert "if x.abs().max() > 10:" in text and "torch.where" in text
    assert "status: eager" in text
    assert "bad input -> input 'image' has dtype float64" in text


def test_lesson_follows_the_course_conventions():
    assert_follows_conventions(LESSON)
