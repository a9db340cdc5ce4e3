"""Executes notebooks/03-advanced/develop_dynamic_deploy_static.ipynb in quick mode and checks its records."""
from __future__ import annotations

import pytest

from lesson_helpers import NOTEBOOKS, assert_follows_conventions, lesson_data_dir, lesson_run, outputs_text

LESSON = NOTEBOOKS / "03-advanced/develop_dynamic_deploy_static.ipynb"

pytestmark = [pytest.mark.notebook, pytest.mark.slow]


@pytest.fixture(scope="module")
def executed():
    return lesson_run(LESSON)  # the same run as test_courses.py's, in Chinese: its printed words are translated


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
    assert "状态： eager" in text  # "status:", from the lesson's Chinese strings
    assert "错误输入 -> input 'image' has dtype float64" in text  # the predictor's own message stays English


def test_exports_go_to_the_lesson_work_folder_not_the_course(executed):
    work = lesson_data_dir(LESSON) / "lessons" / "develop_dynamic_deploy_static"
    assert (work / "lenet.pt2").is_file() and (work / "lenet.onnx").is_file() and (work / "lenet.meta.json").is_file()
    assert not list(LESSON.parent.glob("lenet.*"))
    assert f"导出到 {work}" in outputs_text(executed[1])


def test_the_check_fails_an_unclipped_net_and_a_graph_break(tmp_path, monkeypatch):
    """The check compares with the clip on batches where it cuts (an unclipped net used to pass about half the
    time) and asks explain for one graph (.item() is right in value but breaks it)."""
    import torch

    from sampan.path.exercise import Exercises
    from sampan.vision.models import LeNet

    monkeypatch.setenv("SAMPAN_DATA", str(tmp_path))

    class Unclipped(LeNet):
        def forward(self, x):
            return super().forward(x)

    class ItemClip(LeNet):
        def forward(self, x):
            logits = super().forward(x)
            bound = logits.abs().mean().item() * 3
            return logits.clamp(-bound, bound)

    ex = Exercises("develop_dynamic_deploy_static")
    images = torch.rand(32, 1, 28, 28)
    for _ in range(3):
        assert not ex.fix_graph_break.check(Unclipped, images=images)
    assert not ex.fix_graph_break.check(ItemClip, images=images)
    assert ex.outcomes["fix_graph_break"] == "incorrect"
    namespace = {"LeNet": LeNet, "torch": torch}
    ex.fix_graph_break.solve(namespace)
    assert ex.fix_graph_break.check(namespace["FixedClipLeNet"], images=images)


def test_lesson_follows_the_course_conventions():
    assert_follows_conventions(LESSON)
