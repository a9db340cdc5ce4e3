"""What a Chinese learner reads from the path is Chinese: exercise feedback, progress lines, run notes."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sampan.path import exercise
from sampan.path.exercise import Exercises, Incorrect, check, compare, expect


@pytest.fixture
def zh(monkeypatch):
    monkeypatch.setenv("SAMPAN_LANG", "zh")


def test_compare_explains_differences_in_chinese(zh):
    assert compare(torch.ones(2, 3), torch.ones(3, 2)) == "形状应为 (3, 2)，得到 (2, 3)"
    assert compare(torch.tensor([1.0, 3.0]), torch.tensor([1.0, 2.0])) == "数值不同（最大差 1 位于下标 (1,)）"
    assert compare([1, 2], [1, 3]) == "第 1 项：应为 3，得到 2"
    assert compare([1, 2], [1, 3], lang="en") == "item 1: expected 3, got 2"


def test_expect_takes_a_bilingual_label(zh, monkeypatch):
    with pytest.raises(Incorrect) as caught:
        expect(torch.zeros(2), torch.ones(2), {"en": "the zeros", "zh": "全零张量"})
    assert caught.value.message == "全零张量：数值不同（最大差 1 位于下标 (0,)）"
    monkeypatch.setenv("SAMPAN_LANG", "en")
    with pytest.raises(Incorrect, match=r"^the zeros: values differ"):
        expect(torch.zeros(2), torch.ones(2), {"en": "the zeros", "zh": "全零张量"})


def test_a_false_condition_and_a_bare_assertion_say_so_in_chinese(zh, tmp_path, capsys):
    assert check("q", False) is False
    checks = tmp_path / "checks.py"
    checks.write_text("from sampan.path.exercise import Exercise\n"
                      "class bare(Exercise):\n"
                      "    def verify(self, x):\n"
                      "        assert x == 1\n")
    Exercises("planted", checks=checks).bare.check(2)
    out = capsys.readouterr().out
    assert "✘ q: 条件的值为 False" in out and "✘ bare: 有一项检查没有通过" in out


def test_a_course_check_labels_its_cases_in_chinese(zh, capsys):
    ex = Exercises("tensors_and_autograd")
    ex.grad_of_cube.check(lambda x: 2 * x)
    out = capsys.readouterr().out
    assert "对形状为" in out and "的张量做 grad_of_cube：数值不同（最大差" in out
    assert "tensor" not in out and "values differ" not in out


def test_the_last_right_answer_names_the_lesson_by_its_chinese_title(zh, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(exercise, "_mark_done", lambda lesson: None)
    empty = tmp_path / "checks.py"
    empty.write_text("")
    ex = Exercises("environment_check", checks=empty)
    ex.check("a", 1, expected=1)
    assert ex.done() is True
    assert "✔ 全部 1 道练习都答对了：《环境检查》一课已完成" in capsys.readouterr().out


def test_mark_done_speaks_chinese_and_keeps_the_record_line(zh, capsys, monkeypatch):
    from sampan.path.progress import RUNNER_ENV, mark_done

    assert mark_done("environment_check") == "[sampan.path] 《环境检查》已完成"
    assert '[sampan.record] sampan.path.done = "environment_check"' in capsys.readouterr().out
    assert mark_done("some_lesson", check=False) == "[sampan.path] 《some_lesson》已完成"  # no title: the id
    monkeypatch.setenv(RUNNER_ENV, "1")
    assert mark_done("environment_check") == "[sampan.path] 《环境检查》已学完"


def test_progress_not_saved_is_chinese(zh, capsys):
    exercise._mark_done("no_such_lesson_anywhere")
    assert capsys.readouterr().out.startswith("（学习进度未保存：")


def test_the_hint_title_ends_with_a_full_width_colon(zh, tmp_path, capsys):
    checks = tmp_path / "checks.py"
    checks.write_text("from sampan.path.exercise import Exercise\n"
                      "class q(Exercise):\n"
                      "    hints = ({'en': 'Try.', 'zh': '试试。'}, 'x')\n")
    Exercises("planted", checks=checks).q.hint()
    assert "💡 q 的提示 1/2：试试。" in capsys.readouterr().out


def test_a_leaking_collect_names_the_grad_fn_type_not_its_address(zh, capsys):
    ex = Exercises("profiling_and_memory")
    ex.no_leak.check(lambda forward, batches: [forward(b) for b in batches])
    out = capsys.readouterr().out
    assert "（grad_fn=AddmmBackward0）" in out and " at 0x" not in out


def test_the_hidden_mlps_are_named_as_ones_the_learner_cannot_see(zh, capsys):
    ex = Exercises("compress_a_model")
    ex.keep_sensitive_float.check(lambda model, agreement: ["no_such_layer"])
    out = capsys.readouterr().out
    assert "不是第 1 个你看不到的 MLP中的 Linear 层" in out and "隐藏的" not in out


def test_a_cell_number_says_it_counts_from_zero_and_the_notebook_is_a_笔记本():
    from sampan.path.report import MESSAGES, message

    assert message("in_cell_n", "zh", cell=2) == "单元格 2（从 0 开始编号）"
    assert message("in_cell_n", "en", cell=2) == "cell 2 (counting from 0)"
    assert MESSAGES["zh"]["executed"] == "已执行的笔记本"


def test_metric_notes_of_a_chinese_run_are_chinese():
    from sampan.path.manifest import Lesson, MetricRange
    from sampan.path.runner import LessonResult, _judge

    assert MetricRange("ok", expect=True).check(False, "full", "zh") == "应为 True，实际为 False"
    assert MetricRange("x").check(float("nan"), "full", "zh") == "应为一个有限的数，实际为 nan"
    metrics = (MetricRange("acc", full=(0.0, 1.0)), MetricRange("loss"))
    lesson = Lesson("a", Path("a.ipynb"), "beginner", "A", metrics=metrics)
    result = LessonResult("a", "beginner", "A", "a.ipynb", records={"acc": 5})
    _judge(lesson, result, "full", "zh")
    assert result.reason == "acc：5 不在 [0, 1] 范围内；loss：未记录"
    assert [m["problem"] for m in result.metrics] == ["5 不在 [0, 1] 范围内", "未记录"]
    english = LessonResult("a", "beginner", "A", "a.ipynb", records={"acc": 5})
    _judge(lesson, english, "full", "en")
    assert english.reason == "acc: 5 is outside [0, 1]; loss: not recorded"


def test_a_missing_artifact_is_named_in_chinese(zh):
    from sampan.path.artifacts import ArtifactMissingError, artifact

    with pytest.raises(ArtifactMissingError) as caught:
        artifact("no_such_artifact")
    assert str(caught.value).startswith("本地模型库里没有制品 'no_such_artifact'（查找的位置：")
    assert "学习路线中没有哪节课会产出它。" in str(caught.value)


def test_a_language_is_taken_in_any_spelling_and_an_unknown_one_is_refused_by_name():
    from sampan.path.artifacts import missing_message

    assert compare(1, 2, lang="zh-CN") == "应为 2，得到 1" and compare(1, 2, lang="EN") == "expected 2, got 1"
    assert missing_message("x", Path("x.pt"), None, lang="zh_CN").startswith("本地模型库里没有制品 'x'")
    for call in (lambda: compare(1, 2, lang="fr"), lambda: missing_message("x", Path("x.pt"), None, lang="fr")):
        with pytest.raises(ValueError, match=r"Expected `lang` to be one of en, zh. Received: lang='fr'"):
            call()


WRONG_ANSWERS = {  # lesson, exercise, a wrong answer, a piece of its Chinese label, English words it must not show
    "soft_cross_entropy": ("distillation", lambda s, t, T: (s - t).abs().mean(), "soft_cross_entropy 作用于 [",
                           "logits with"),
    "d_loss": ("gan_digits", lambda real, fake: real.mean() + fake.mean(), "d_loss 在真实 logits 形状为",
               "fake logits"),
    "g_loss": ("gan_digits", lambda fake: fake.mean(), "g_loss 在生成 logits 形状为", "of fake logits"),
    "effective_number_weights": ("transfer_learning_defects", lambda labels, k, beta: torch.arange(1.0, k + 1),
                                 "各类样本数", "labels with counts"),
    "bytes_per_rank": ("large_models", lambda shapes, world, strategy: 1, "个形状", "shapes,"),
}


@pytest.mark.parametrize("name", sorted(WRONG_ANSWERS))
def test_the_course_checks_label_their_cases_in_chinese(zh, capsys, name):
    lesson, answer, chinese, english = WRONG_ANSWERS[name]
    assert getattr(Exercises(lesson), name).check(answer) is False
    out = capsys.readouterr().out
    assert chinese in out and english not in out, out


def test_a_chinese_report_names_the_stage_and_the_failed_lesson_by_their_chinese_titles(tmp_path):
    """The report's Stage column showed the stage's id ("beginner") and a failure's heading the lesson's id
    ("broken 失败") in a Chinese report; a report.json written before stage titles were kept still renders."""
    from sampan.path.report import render_html
    from sampan.path.runner import LessonResult, RunReport

    report = RunReport(run_dir=tmp_path, mode="quick", started="2026-12-06T00:00:00+00:00", language="zh")
    report.lessons = [LessonResult("broken", "beginner", "出错的一课", "b.ipynb", status="failed", stage_title="入门",
                                   error={"cell_index": 1, "execution_count": 3, "source": "raise ValueError('x')",
                                          "ename": "ValueError", "evalue": "x", "traceback": ""})]
    report.lessons.append(LessonResult("warm_up", "beginner", "热身", "w.ipynb", status="passed", stage_title="入门",
                                       output="beginner/w.ipynb"))
    data = report.to_dict()
    page = render_html(data)
    assert '已执行的笔记本：<code class="output">beginner/w.ipynb</code>' in render_html(data, links=False)
    assert "<td>入门</td>" in page and "<h2>出错的一课 失败，出错单元格 1 (In [3])</h2>" in page
    assert "<td>beginner</td>" not in page
    del data["lessons"][0]["stage_title"]
    assert "<td>beginner</td>" in render_html(data)
