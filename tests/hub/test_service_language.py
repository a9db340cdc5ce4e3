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
    assert "<th>学员</th><th>角色</th><th>最近活动（UTC）</th><th>已完成课程</th>" in page and "<h2>课程</h2>" in page
    assert "<th>#</th><th>课程</th><th>已完成</th><th>出错最多的练习</th>" in page
    assert '<th class="n" title="环境检查">1</th><th class="n" title="first_model">2</th>' in page
    assert '<td><span title="environment_check">环境检查</span></td>' in page  # the lessons table names the numbers
    assert '<td class="cell done" title="环境检查：已完成（2 道练习）">✓</td>' in page
    assert '<td class="cell in-progress" title="first_model：进行中">◐</td>' in page
    assert '<td class="cell not-started" title="extra：未开始">–</td>' in page
    assert "<td>ada</td><td>学员</td>" in page and "✓ 已完成" in page  # the roles and the legend in Chinese too
    for english in ("Class progress", "learner", "not started", "in progress", "ex.)", "most failed", "student"):
        assert english not in page
    english = render_class(SUMMARY, ROSTER, {}, "en", titles["en"])
    assert '<html lang="en">' in english and "<h1>Class progress</h1>" in english
    assert 'title="Environment check: done (2 ex.)">✓</td>' in english
    assert '<span title="first_model">First model</span>' in english


def test_the_roster_is_one_narrow_column_a_lesson_under_its_stage(tmp_path):
    """A full course fits a laptop's screen: numbered columns under their stages, a mark a cell (the words on hover),
    each student's count of lessons done; teachers and assistants listed after the students, not counted."""
    (tmp_path / "path.yaml").write_text(yaml.safe_dump({"stages": [
        {"id": "beginner", "title": {"en": "Beginner", "zh": "入门"}, "lessons": [
            {"id": "environment_check", "notebook": "a.ipynb", "title": "Environment check"},
            {"id": "first_model", "notebook": "b.ipynb", "title": "First model"}]},
        {"id": "advanced", "title": "Advanced", "lessons": [
            {"id": "extra", "notebook": "c.ipynb", "title": "Extra"}]}]}), encoding="utf-8")
    lessons, titles, stages = course(tmp_path)
    assert stages["zh"] == {"environment_check": "入门", "first_model": "入门", "extra": "Advanced"}
    summary = dict(SUMMARY, learners={**SUMMARY["learners"], "bo": {
        "environment_check": {"status": "done", "exercises_passed": 1},
        "first_model": {"status": "in progress", "exercises_passed": 3}}})
    roster = [{"name": "amy", "role": "teacher", "last_activity": "2026-12-06T09:00:00.5Z"}, *ROSTER]
    page = render_class(summary, roster, {"ada": "2026-12-06T10:00:00Z"}, "en", titles["en"], stages["en"])
    assert ('<th rowspan="2">lessons done</th><th class="stage" colspan="2">Beginner</th>'
            '<th class="stage" colspan="1">Advanced</th></tr><tr><th class="n" title="Environment check">1</th>'
            ) in page
    ada, bo, amy = (page.index(f"<td>{name}</td>") for name in ("ada", "bo", "amy"))
    assert ada < bo < amy  # students first
    assert ('<td class="when">2026-12-06 10:00:00</td><td class="when">1/3<span class="bar">'
            '<i style="width:33%">') in page
    assert 'title="First model: in progress (3 ex.)">◐3</td>' in page  # three exercises passed so far
    assert ('<td class="num">1</td><td><span title="environment_check">Environment check</span></td>'
            '<td class="when">1/2<span class="bar">'
            '<i style="width:50%">') in page  # the lessons table: the class's completion, from the store's summary
    assert '<td class="staff" colspan="4">not counted (not a student)</td>' in page
    assert page.count('<td class="cell ') == 2 * 3  # two students, three lessons; none for the teacher
    assert "<th class=\"stage\"" not in render_class(summary, roster, {}, "en")  # no course: no stage row


def test_the_learners_own_page_lists_the_whole_course_in_its_order():
    mine = {"first_model": {"status": "done", "exercises_passed": 2, "last": "2026-12-06T10:00:00.123Z"},
            "made_up": {"status": "done", "exercises_passed": 1, "last": "2026-12-06T11:00:00Z"}}
    page = render_own("ada", mine, "en", {"first_model": "First model"}, ["environment_check", "first_model", "extra"])
    assert page.index("environment_check") < page.index("First model") < page.index("extra")
    assert '<td class="not-started">not started</td><td>-</td>' in page  # the lessons not started are listed too
    assert '<td class="done">done (2 ex.)</td><td>2026-12-06 10:00:00</td>' in page
    assert "made_up" not in page  # an id outside the course is not a lesson of it
    assert '<p class="when">lessons done: 1/3<span class="bar"><i style="width:33%">' in page
    assert "made_up" in render_own("ada", mine) and "lessons done" not in render_own("ada", mine)  # no course


def test_the_learners_own_page_and_the_gallery_in_chinese():
    page = render_own("ada", SUMMARY["learners"]["ada"], "zh", {"environment_check": "环境检查"})
    assert '<html lang="zh-CN">' in page and "<title>我的学习进度</title>" in page and "<h1>ada 的学习进度</h1>" in page
    assert "<th>课程</th><th>状态</th><th>最近活动（UTC）</th>" in page and "环境检查" in page
    assert "暂无记录" in render_own("bo", {}, "zh") and "nothing yet" in render_own("bo", {})
    gallery = render_gallery([("ada", {"name": "app", "published_at": "2026-12-03T07:00:00"})], live=True, lang="zh")
    assert "<title>班级作品廊</title>" in gallery and "<h1>全班发布的仪表盘</h1>" in gallery
    assert "<th>作者</th><th>发布时间（UTC）</th>" in gallery and "打开实时页面" in gallery
    assert "暂无记录" in render_gallery([], lang="zh")
