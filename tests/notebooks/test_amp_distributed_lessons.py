"""Executes the "Mixed precision" and "Distributed training" lessons (notebooks/03-advanced/) in quick mode.

The distributed lesson runs ``notebook_launcher`` from a real Jupyter kernel (papermill / nbclient), which is
the case other launchers break on: the training function is defined in the notebook's ``__main__``.
"""
from __future__ import annotations

import nbformat
import pytest

from lesson_helpers import NOTEBOOKS, assert_follows_conventions, outputs_text, run_lesson

LESSONS = NOTEBOOKS / "03-advanced"

pytestmark = [pytest.mark.notebook, pytest.mark.slow]


@pytest.fixture(scope="module")
def mixed_precision(tmp_path_factory):
    return run_lesson(LESSONS / "mixed_precision.ipynb", tmp_path_factory.mktemp("mixed_precision"))


@pytest.fixture(scope="module")
def distributed(tmp_path_factory):
    return run_lesson(LESSONS / "distributed_training.ipynb", tmp_path_factory.mktemp("distributed_training"))


def test_mixed_precision_lesson_records(mixed_precision):
    records, output = mixed_precision
    assert records["acc_fp32"] > 0.85 and records["acc_bf16"] > 0.85
    assert records["acc_gap_points"] <= 1.0
    assert records["fp16_skipped_steps"] >= 5  # from 2**32 down to a workable scale
    assert records["doctor_module"] == "amplify"
    assert records["o2_master_is_fp32"] is True
    assert records["exercise_fix_overflow"] is True
    assert isinstance(records["cpu_native_bf16"], bool)
    assert "First non-finite output: module 'amplify' (Linear)" in outputs_text(output)


def test_distributed_lesson_records(distributed):
    records, output = distributed
    assert records["world_size"] == 2
    assert records["ranks_agree_on_acc"] is True
    assert 0.0 <= records["ddp_vs_single_max_abs_diff"] < 1e-4
    assert records["ddp_vs_single_diff_batchnorm"] > 1e-3 and records["ddp_vs_single_diff_dropout"] > 1e-3
    assert records["unpicklable_named"] is True
    assert records["failing_rank"] == 1
    assert records["exercise_steps"] is True
    text = outputs_text(output)
    assert "global `lock` of fn (lock) -> TypeError" in text and "Rank 1 of 2 raised first" in text


@pytest.mark.parametrize("name", ["mixed_precision", "distributed_training"])
def test_lessons_follow_the_course_conventions(name):
    assert_follows_conventions(LESSONS / f"{name}.ipynb")
    nb = nbformat.read(LESSONS / f"{name}.ipynb", as_version=4)
    tail = "".join(c.source for c in nb.cells[-4:])
    assert "ex.check(\"" in tail and "ex.done()" in tail
