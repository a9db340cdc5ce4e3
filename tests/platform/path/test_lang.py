"""sampan.path.lang: languages, the locale default, bilingual notebooks and the Chinese report."""
from __future__ import annotations

import json
import re

import pytest

from sampan.path.lang import (
    UNTRANSLATED_MARK, build_course, build_notebook, check_bilingual, cjk_share, code_comments, comment_problems,
    default_language, lesson_title, string_problems, translate_comments,
    localized, normalize_language,
)


def _md(text, lang=None):
    return {"cell_type": "markdown", "source": text, "metadata": {"sampan": {"lang": lang}} if lang else {}}


def _code(text):
    return {"cell_type": "code", "source": text, "metadata": {}, "outputs": [], "execution_count": None}


def _lesson(*cells):
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {"sampan": {"languages": ["en", "zh"]}},
            "cells": list(cells)}


@pytest.mark.parametrize("value, expected", [("zh", "zh"), ("zh-CN", "zh"), ("zh_CN", "zh"), ("EN", "en")])
def test_language_names(value, expected):
    assert normalize_language(value) == expected


@pytest.mark.parametrize("value", ["fr", "", None, 3])
def test_an_unknown_language_is_refused_naming_the_accepted_ones(value):
    with pytest.raises(ValueError, match=r"Expected `lang` to be one of en, zh\. Received: lang=.*HINT: pass --lang zh"):
        normalize_language(value)


@pytest.mark.parametrize("environ, expected", [
    ({"LANG": "zh_CN.UTF-8"}, "zh"), ({"LC_ALL": "zh_TW.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),
    ({"LC_ALL": "en_US.UTF-8", "LANG": "zh_CN.UTF-8"}, "en"), ({"LC_MESSAGES": "zh_CN"}, "zh"),
    ({"LANG": "C.UTF-8"}, "en"), ({}, "en"), ({"LANG": "zh_CN.UTF-8", "SAMPAN_LANG": "en"}, "en"),
])
def test_the_default_language_follows_the_locale(environ, expected):
    assert default_language(environ) == expected


def test_manifest_texts_are_strings_or_per_language():
    assert localized({"en": "Beginner", "zh": "入门"}, "zh") == "入门"
    assert localized({"en": "Beginner"}, "zh") == "Beginner"
    assert localized("Beginner", "zh") == "Beginner"


def test_building_keeps_shared_cells_and_one_language_in_order():
    nb = _lesson(_md("# Title", "en"), _md("# 标题", "zh"), _code("x = 1"), _md("Done.", "en"), _md("完成。", "zh"))
    zh, en = build_notebook(nb, "zh"), build_notebook(nb, "en")
    assert [c["source"] for c in zh["cells"]] == ["# 标题", "x = 1", "完成。"]
    assert [c["source"] for c in en["cells"]] == ["# Title", "x = 1", "Done."]
    assert zh["metadata"]["sampan"]["language"] == "zh" and len(nb["cells"]) == 5  # the source is untouched


def test_the_chinese_build_translates_the_comments_of_the_shared_code():
    code = ("QUICK = True       # skip the slow checks\n"
            "SEED = 0           # the same numbers every run\n"
            "url = 'http://x/#top'  # a '#' in a string is code\n"
            "# YOUR ANSWER\n"
            "y = 1  # noqa: F841\n"
            "## two marks, one comment")
    cpp = _code("%%writefile k.cpp\n// a C++ comment # not Python")
    nb = _lesson(_md("Hi", "en"), _md("你好", "zh"), _code(code), cpp)
    assert [text for _, _, text in code_comments(code)] == [
        "skip the slow checks", "the same numbers every run", "a '#' in a string is code", "two marks, one comment"]
    nb["metadata"]["sampan"]["comments"] = {"zh": {"skip the slow checks": "跳过较慢的检查",
                                                   "the same numbers every run": "每次运行得到相同的数",
                                                   "a '#' in a string is code": "字符串里的 '#' 是代码",
                                                   "two marks, one comment": "两个井号，一条注释"}}
    zh, en = build_notebook(nb, "zh"), build_notebook(nb, "en")
    assert zh["cells"][1]["source"].split("\n") == [
        "QUICK = True       # 跳过较慢的检查",  # the code and the "#" column stay: aligned comments stay aligned
        "SEED = 0           # 每次运行得到相同的数",
        "url = 'http://x/#top'  # 字符串里的 '#' 是代码",
        "# YOUR ANSWER",  # the exercise marker the feedback names, and tool directives, stay as written
        "y = 1  # noqa: F841",
        "## 两个井号，一条注释"]
    assert en["cells"][1]["source"] == code and zh["cells"][2]["source"] == nb["cells"][3]["source"]
    assert check_bilingual(nb) == []
    del nb["metadata"]["sampan"]["comments"]["zh"]["skip the slow checks"]
    nb["metadata"]["sampan"]["comments"]["zh"]["a comment since deleted"] = "已删除的注释"
    assert comment_problems(nb, "zh") == [
        "the code comment 'skip the slow checks' has no zh translation in metadata.sampan.comments.zh",
        "metadata.sampan.comments.zh translates 'a comment since deleted', a comment no code cell has"]
    assert check_bilingual(nb) == comment_problems(nb, "zh")
    assert build_notebook(nb, "zh")["cells"][1]["source"].startswith("QUICK = True       # skip the slow checks\n")
    assert translate_comments("def f(:  # broken", {"broken": "坏的"}) == "def f(:  # broken"  # not Python: as is


def test_the_chinese_build_translates_the_text_the_code_shows():
    code = ('print(f"test accuracy: {acc:.2%}")  # the accuracy\n'
            'history["loss"]; plt.title("loss")\n'
            'plt.title("loss curve")')
    nb = _lesson(_md("Hi", "en"), _md("你好", "zh"), _code(code))
    nb["metadata"]["sampan"]["comments"] = {"zh": {"the accuracy": "准确率"}}
    nb["metadata"]["sampan"]["strings"] = {"zh": {'f"test accuracy: {acc:.2%}"': 'f"测试准确率：{acc:.2%}"',
                                                  '"loss curve"': '"损失曲线"'}}
    assert build_notebook(nb, "zh")["cells"][1]["source"] == (
        'print(f"测试准确率：{acc:.2%}")  # 准确率\n'
        'history["loss"]; plt.title("loss")\n'  # "loss" is another literal: a key the code reads, left as is
        'plt.title("损失曲线")')
    assert build_notebook(nb, "en")["cells"][1]["source"] == code and check_bilingual(nb) == []
    strings = nb["metadata"]["sampan"]["strings"]["zh"]
    strings.update({'f"test accuracy: {acc:.2%}"': 'f"测试准确率：{acc}"', '"loss curve"': "损失曲线", '"gone"': '"没了"',
                    '"loss"': '"损失")'})
    problems = string_problems(nb, "zh")
    assert problems[0].endswith("changes the f-string's fields")  # {acc:.2%} became {acc}
    assert "both sides must be one string literal" in problems[1]  # the quotes were lost
    assert problems[2] == "metadata.sampan.strings.zh translates '\"gone\"', which no code cell has"
    assert "both sides must be one string literal" in problems[3]  # '"损失")' is not one literal...
    assert problems[4].startswith("cell 2 does not parse once its strings are translated (zh)")  # ...nor code
    assert len(problems) == 5
    assert check_bilingual(nb) == problems


def test_a_complete_bilingual_lesson_has_no_problems():
    nb = _lesson(_md("## Goal\nTrain a model with `Model.fit`.", "en"),
                 _md("## 目标\n用 `Model.fit` 训练一个模型（model）。", "zh"), _code("print(1)"))
    assert check_bilingual(nb) == []


@pytest.mark.parametrize("cells, problem", [
    ([_md("Hello", "en"), _code("x = 1")], "cell 0 (en) has no zh counterpart after it"),
    ([_md("你好", "zh")], "cell 0 (zh) does not follow an en cell"),
    ([_md("Hello", "en"), _md("This paragraph was left in English.", "zh")], "cell 1 (zh) reads as English"),
    ([_md("Hello")], "cell 0 is a Markdown cell marked None"),
    ([{**_code("x = 1"), "metadata": {"sampan": {"lang": "zh"}}}], "cell 0 is a code cell marked 'zh'"),
])
def test_an_incomplete_bilingual_lesson_is_named(cells, problem):
    assert any(p.startswith(problem) for p in check_bilingual(_lesson(*cells))), check_bilingual(_lesson(*cells))


def test_the_share_of_chinese_ignores_code_links_and_bracketed_terms():
    assert cjk_share("混合精度（mixed precision）用 `torch.autocast` 实现，见 [文档](https://pytorch.org/docs)。") == 1.0
    assert cjk_share("Call `fit` and then evaluate the model on the test set.") == 0.0
    assert 0.3 < cjk_share("训练 the model 模型") < 0.9


def test_build_course_writes_each_notebook_in_one_language(tmp_path):
    src = tmp_path / "notebooks"
    (src / "01-beginner").mkdir(parents=True)
    (src / "01-beginner" / "a.ipynb").write_text(json.dumps(_lesson(_md("Hi", "en"), _md("你好", "zh"))))
    (src / "path.yaml").write_text("version: 1\n")
    (src / ".ipynb_checkpoints").mkdir()
    (src / ".ipynb_checkpoints" / "a-checkpoint.ipynb").write_text("{}")
    dest = build_course("zh", tmp_path / "zh", src)
    built = json.loads((dest / "01-beginner" / "a.ipynb").read_text(encoding="utf-8"))
    assert [c["source"] for c in built["cells"]] == ["你好"]
    assert (dest / "path.yaml").read_text() == "version: 1\n" and not (dest / ".ipynb_checkpoints").exists()



def test_a_course_update_never_overwrites_a_learners_edits(tmp_path):
    import os

    from sampan.path.lang import build_file

    source, target = tmp_path / "a.ipynb", tmp_path / "zh" / "a.ipynb"
    source.write_text(json.dumps(_lesson(_md("Hi", "en"), _md("你好", "zh"))))
    build_file(source, target, "zh")
    source.write_text(json.dumps(_lesson(_md("Hi again", "en"), _md("又见面了", "zh"))))
    os.utime(source, (target.stat().st_mtime + 10,) * 2)  # the course is updated after the build
    build_file(source, target, "zh")  # an untouched copy is simply rebuilt
    assert "又见面了" in target.read_text(encoding="utf-8") and len(list(target.parent.glob("a.mine-*"))) == 0
    target.write_text(target.read_text(encoding="utf-8").replace("又见面了", "我的笔记"), encoding="utf-8")
    os.utime(source, (target.stat().st_mtime + 10,) * 2)  # the learner edited, then the course changed again
    with pytest.warns(UserWarning, match=r"your edited copy is kept as a\.mine-"):
        build_file(source, target, "zh")
    (kept,) = target.parent.glob("a.mine-*.ipynb")
    assert "我的笔记" in kept.read_text(encoding="utf-8") and "又见面了" in target.read_text(encoding="utf-8")

def _manifest(tmp_path, title):
    (tmp_path / "a.ipynb").write_text(json.dumps(_lesson(_md("Hi", "en"), _md("你好", "zh"))))
    (tmp_path / "b.ipynb").write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []}))
    file = tmp_path / "path.yaml"
    file.write_text(f"version: 1\nstages:\n  - id: beginner\n    title: {{en: Beginner, zh: 入门}}\n    lessons:\n"
                    f"      - {{id: a, notebook: a.ipynb, title: {title}}}\n"
                    f"      - {{id: b, notebook: b.ipynb, title: {{en: Bee, zh: 蜜蜂}}}}\n", encoding="utf-8")
    return file


def test_manifest_titles_per_language_and_the_untranslated_mark(tmp_path):
    from sampan.path import load_path

    path = load_path(_manifest(tmp_path, "{en: Hello, zh: 你好}"))
    a, b = path.lesson("a"), path.lesson("b")
    assert (a.title, a.text("title", "zh"), path.stages[0].text("title", "zh")) == ("Hello", "你好", "入门")
    assert lesson_title(a, "zh") == "你好" and lesson_title(a, "en") == "Hello"
    assert lesson_title(b, "zh") == "Bee" + UNTRANSLATED_MARK  # a zh title, but the notebook is English only


def test_a_malformed_per_language_title_is_refused(tmp_path):
    from sampan.path import PathManifestError, load_path

    with pytest.raises(PathManifestError, match=r"lessons\[0\].*title.*en required.*'fr'"):
        load_path(_manifest(tmp_path, "{en: Hello, fr: Bonjour}"))


def _report(language):
    return {"mode": "quick", "run_dir": "runs/x", "started": "t0", "finished": "t1", "parameters": {"QUICK": True},
            "summary": {"passed": 1, "failed": 0, "skipped": 0, "not_run": 0}, "language": language,
            "lessons": [{"lesson": "a", "stage": "beginner", "title": "环境检查", "notebook": "a.ipynb",
                         "status": "passed", "output": None, "duration_s": 1.0, "reason": "", "error": None,
                         "metrics": [{"name": "acc", "value": 0.9, "ok": True, "expect": None, "low": 0.5,
                                      "high": None, "problem": None}]}]}


def test_report_html_is_written_in_the_run_language():
    from sampan.path.report import MESSAGES, render_html

    zh, en = render_html(_report("zh")), render_html(_report("en"))
    assert '<html lang="zh-CN">' in zh and "学习路线报告" in zh and "快速模式" in zh and "1 通过" in zh
    visible = re.sub(r"<[^>]+>", " ", zh.split("<body>")[1])
    assert not re.search(r"\b(passed|failed|skipped|not run|Stage|Lesson|Duration|expected|mode)\b", visible), visible
    assert '<html lang="en">' in en and "Learning-path report" in en and "1 passed" in en
    assert MESSAGES["en"].keys() == MESSAGES["zh"].keys()


def test_course_index_and_its_listing_in_chinese(tmp_path, monkeypatch):
    from sampan.path import load_path
    from sampan.path.index import course_index, index_markdown, sync_index_notebook

    manifest = _manifest(tmp_path, "{en: Hello, zh: 你好}")
    zh = index_markdown(load_path(manifest), "zh")
    assert "### 入门" in zh and "[你好](a.ipynb)" in zh and "[Bee（英文）](b.ipynb)" in zh
    monkeypatch.setenv("SAMPAN_LANG", "zh")  # what `sampan lab --lang zh` gives the kernel
    page = course_index(manifest)._repr_html_()
    assert "你的学习进度：已完成 0/2 节课" in page and ">你好</a>" in page
    assert "Your progress: 0/2" in course_index(manifest, lang="en")._repr_html_()
    marked = "<!-- sampan-path:begin -->\n<!-- sampan-path:end -->"
    index = tmp_path / "index.ipynb"
    index.write_text(json.dumps(_lesson(_md("## Path\n" + marked, "en"), _md("## 路线\n" + marked, "zh"))))
    assert sync_index_notebook(index, manifest) is True
    cells = [c["source"] for c in json.loads(index.read_text(encoding="utf-8"))["cells"]]
    assert "[Hello](a.ipynb)" in "".join(cells[0]) and "[你好](a.ipynb)" in "".join(cells[1])
    assert sync_index_notebook(index, manifest) is False  # in sync now


def test_exercise_feedback_in_the_lesson_language(monkeypatch, capsys):
    from sampan.path.exercise import Exercises

    hint = {"en": "multiply by 4 bytes", "zh": "再乘以 4 字节"}
    monkeypatch.setenv("SAMPAN_LANG", "zh")
    ex = Exercises("demo")
    assert ex.check("size", 1, expected=2, hint=hint) is False and ex.check("name", "a", expected="a") is True
    assert ex.done() is False
    out = capsys.readouterr().out
    assert "✘ size: 应为 2，得到 1。提示：再乘以 4 字节" in out and "✔ name: 正确" in out
    assert "答对 1/2 道练习；还需完成：size" in out
    monkeypatch.setenv("SAMPAN_LANG", "en")
    Exercises("demo").check("size", 1, expected=2, hint=hint)
    assert "✘ size: expected 2, got 1. HINT: multiply by 4 bytes" in capsys.readouterr().out
