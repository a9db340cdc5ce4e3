"""The teacher dashboard and the learner's page speak the browser's language (unit level: no hub started)."""
from __future__ import annotations

import yaml

from sampan.hub.service import course, render_class, render_gallery, render_own, request_language

SUMMARY = {"learners": {"ada": {"environment_check": {"status": "done", "exercises_passed": 2},
                                "first_model": {"status": "in progress", "exercises_passed": 0}}},
           "lessons": {"environment_check": {"done": 1, "learners": 2, "most_failed": ["batch_mib"]},
                       "first_model": {"done": 0, "learners": 2, "most_failed": []},
                       "extra": {"done": 0, "learners": 2, "most_failed": []}}}
ROSTER = [{"name": "ada", "role": "student", "last_activity": None},
          {"name": "bo", "role": "student", "last_activity": None}]


def test_the_browser_language_picks_the_page_language(monkeypatch):
    monkeypatch.setenv("SAMPAN_LANG", "en")
    assert request_language("zh-CN,zh;q=0.9,en;q=0.8") == "zh"
    assert request_language("en-US,en;q=0.9,zh;q=0.8") == "en"
    assert request_language("fr;q=1, zh-TW;q=0.5") == "zh"
    assert request_language("fr") == "en" and request_language(None) == "en"
    monkeypatch.setenv("SAMPAN_LANG", "zh")
    assert request_language("") == "zh" and request_language("de-DE") == "zh"


def test_the_class_page_in_chinese_with_lesson_titles(tmp_path):
    (tmp_path / "path.yaml").write_text(yaml.safe_dump({"stages": [{"id": "beginner", "lessons": [
        {"id": "environment_check", "notebook": "a.ipynb", "title": {"en": "Environment check", "zh": "环境检查"}},
        {"id": "first_model", "notebook": "b.ipynb", "title": "First model"}]}]}), encoding="utf-8")
    titles = course(tmp_path)[1]
    assert titles["zh"] == {"environment_check": "环境检查"}
    assert titles["en"] == {"environment_check": "Environment check", "first_model": "First model"}
    page = render_class(SUMMARY, ROSTER, {}, "zh", titles["zh"])
    assert '<html lang="zh-CN">' in page and "<h1>班级学习进度</h1>" in page
    assert "<th>学员</th><th>角色</th><th>最近活动（UTC）</th>" in page and "<h2>课程</h2>" in page
    assert "<th>已完成</th><th>出错最多的练习</th>" in page
    assert '<th><span title="environment_check">环境检查</span></th><th>first_model</th><th>extra</th>' in page
    assert '<td class="done">已完成（2 道练习）</td>' in page and '<td class="in-progress">进行中</td>' in page
    assert '<td class="not-started">未开始</td>' in page
    for english in ("Class progress", "learner", "not started", "in progress", "ex.)", "most failed"):
        assert english not in page
    english = render_class(SUMMARY, ROSTER, {}, "en", titles["en"])
    assert '<html lang="en">' in english and "<h1>Class progress</h1>" in english and "done (2 ex.)" in english
    assert '<span title="first_model">First model</span>' in english


def test_the_learners_own_page_and_the_gallery_in_chinese():
    page = render_own("ada", SUMMARY["learners"]["ada"], "zh", {"environment_check": "环境检查"})
    assert '<html lang="zh-CN">' in page and "<title>我的学习进度</title>" in page and "<h1>ada 的学习进度</h1>" in page
    assert "<th>课程</th><th>状态</th><th>最近活动</th>" in page and "环境检查" in page
    assert "暂无记录" in render_own("bo", {}, "zh") and "nothing yet" in render_own("bo", {})
    gallery = render_gallery([("ada", {"name": "app", "published_at": "2026-12-03T07:00:00"})], live=True, lang="zh")
    assert "<title>班级作品廊</title>" in gallery and "<h1>全班发布的仪表盘</h1>" in gallery
    assert "<th>作者</th><th>发布时间（UTC）</th>" in gallery and "打开实时页面" in gallery
    assert "暂无记录" in render_gallery([], lang="zh")
