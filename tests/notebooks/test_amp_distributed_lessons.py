"""Executes the "Mixed precision" and "Distributed training" lessons (notebooks/03-advanced/) in quick mode.

The distributed lesson runs ``notebook_launcher`` from a real Jupyter kernel (papermill / nbclient), which is
the case other launchers break on: the training function is defined in the notebook's ``__main__``.
"""
from __future__ import annotations

import re

import nbformat
import pytest

from lesson_helpers import NOTEBOOKS, assert_follows_conventions, lesson_run, outputs_text

LESSONS = NOTEBOOKS / "03-advanced"

pytestmark = [pytest.mark.notebook, pytest.mark.slow]


@pytest.fixture(scope="module")
def mixed_precision():
    return lesson_run("03-advanced/mixed_precision")  # the same run as test_courses.py's


@pytest.fixture(scope="module")
def distributed():
    return lesson_run("03-advanced/distributed_training")  # the same run as test_courses.py's


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


def test_mixed_precision_check_fails_every_linear_and_the_hard_coded_name(tmp_path, monkeypatch):
    """The exercise's check runs hidden networks: black-listing every Linear, or naming only the lesson's
    overflowing layer, is incorrect; the reference solution is right."""
    import torch

    from sampan.amp import AmpConfig
    from sampan.path.exercise import Exercises

    monkeypatch.setenv("SAMPAN_DATA", str(tmp_path))
    nb = nbformat.read(LESSONS / "mixed_precision.ipynb", as_version=4)
    planted = next(c.source for c in nb.cells if c.source.startswith("class Planted"))
    namespace = {"torch": torch, "AmpConfig": AmpConfig}
    exec(planted.split("\ntry:")[0], namespace)  # the lesson's own Planted network
    ex = Exercises("mixed_precision")
    every_linear = lambda diagnosis: AmpConfig(dtype="float16", custom_black_list=["Linear"])  # noqa: E731
    hard_coded = lambda diagnosis: AmpConfig(dtype="float16", custom_black_list=["amplify"])  # noqa: E731
    assert not ex.fix_overflow.check(every_linear, Planted=namespace["Planted"])
    assert not ex.fix_overflow.check(hard_coded, Planted=namespace["Planted"])
    ex.fix_overflow.solve(namespace)
    assert ex.fix_overflow.check(namespace["fixed_config"], Planted=namespace["Planted"])
    assert ex.outcomes["fix_overflow"] == "correct"


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
    tail = "".join(c.source for c in nb.cells[-6:] if c.cell_type == "code")
    assert re.search(r"ex\.(\w+\.)?check\(", tail) and "ex.done()" in tail


def _exercises(lesson, tmp_path, monkeypatch):
    from sampan.path.exercise import Exercises

    monkeypatch.setenv("SAMPAN_DATA", str(tmp_path))
    return Exercises(lesson)


def _starter(*args):
    raise NotImplementedError


def test_distributed_training_steps_check_runs_uneven_hidden_cases(tmp_path, monkeypatch):
    """Floor division is right on the lesson's 1024 / 2 / 32 / 2 but wrong on the hidden, uneven cases (padding,
    a short last batch and a last, incomplete accumulation group all count); the starter is not attempted."""
    ex = _exercises("distributed_training", tmp_path, monkeypatch)
    floor_division = lambda n, world, batch, accumulate: (n // world // batch // accumulate,  # noqa: E731
                                                          world * batch * accumulate)
    assert not ex.steps.check(floor_division, measured_steps=8) and ex.outcomes["steps"] == "incorrect"
    assert not ex.steps.check(_starter, measured_steps=8) and ex.outcomes["steps"] == "not_attempted"
    namespace = {}
    ex.steps.solve(namespace)
    assert ex.steps.check(namespace["optimizer_steps"], measured_steps=8)


def test_large_models_checks_refuse_the_usual_mistakes(tmp_path, monkeypatch):
    """Each check of the large_models lesson: the reference solution is right, the untouched starter is not
    attempted, and the mistake a learner is likely to make is incorrect."""
    import torch

    ex = _exercises("large_models", tmp_path, monkeypatch)
    namespace = {}
    for name in ("merge_gradients", "bubble_fraction", "bytes_per_rank"):
        getattr(ex, name).solve(namespace)

    def not_divided(net, loss_fn, x, y, k):
        for xb, yb in zip(x.chunk(k), y.chunk(k)):
            loss_fn(net(xb), yb).backward()

    def whole_batch(net, loss_fn, x, y, k):
        loss_fn(net(x), y).backward()

    for wrong in (not_divided, whole_batch):
        assert not ex.merge_gradients.check(wrong) and ex.outcomes["merge_gradients"] == "incorrect"
    assert not ex.bubble_fraction.check(lambda stages, micro: 0.2)  # right for 2 stages and 4 micro-batches only
    shapes = [(512, 64), (512,), (512, 512), (512,), (10, 512), (10,)]
    even_split = lambda shapes, world, strategy: 16 * sum(  # noqa: E731 - ignores the uneven rows on rank 0
        torch.Size(s).numel() for s in shapes) // (1 if strategy == "ddp" else world)
    assert not ex.bytes_per_rank.check(even_split, shapes=shapes)
    assert not ex.merge_gradients.check(_starter) and not ex.bubble_fraction.check(_starter)
    assert not ex.bytes_per_rank.check(_starter, shapes=shapes)
    assert set(ex.outcomes.values()) == {"not_attempted"}
    assert ex.merge_gradients.check(namespace["merge_gradients"])
    assert ex.bubble_fraction.check(namespace["bubble_fraction"])
    assert ex.bytes_per_rank.check(namespace["bytes_per_rank"], shapes=shapes)
