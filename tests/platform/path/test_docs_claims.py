"""What the READMEs and docs/SECURITY.md say about the learning path matches the path and the command line."""
from __future__ import annotations

import json
import re
from pathlib import Path

import sampan.path
from sampan.cli import build_parser

REPO = Path(__file__).resolve().parents[3]


def test_the_full_run_in_the_readme_counts_every_lesson_of_its_table():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    claimed = int(re.search(r"passed all \*\*(\d+) lessons\*\*", readme).group(1))
    rows = re.findall(r"^\| (?:beginner|intermediate|advanced) \| (\w+) \|", readme, re.MULTILINE)
    assert claimed == len(rows) == len(sampan.path.load_path().lessons)


def test_the_chinese_readme_says_which_lessons_are_bilingual():
    lessons = sampan.path.load_path().lessons
    bilingual = [x.id for x in lessons
                 if json.loads(x.notebook.read_text(encoding="utf-8"))["metadata"].get("sampan", {})
                 .get("languages") == ["en", "zh"]]
    readme = (REPO / "README.zh-CN.md").read_text(encoding="utf-8")
    progress = next(line for line in readme.splitlines() if line.startswith("**翻译进度：**"))
    if len(bilingual) == len(lessons):
        assert f"全部 {len(lessons)} 节课都已提供中英双语" in progress and "只有英文" not in progress
    else:  # the line must then give the count of bilingual lessons
        assert str(len(bilingual)) in progress, progress


def test_security_names_only_path_actions_that_exist():
    parser = build_parser(only="path")
    path_parser = parser._subparsers._group_actions[0].choices["path"]
    actions = set(path_parser._subparsers._group_actions[0].choices)
    named = set(re.findall(r"`sampan path (\w+)", (REPO / "docs" / "SECURITY.md").read_text(encoding="utf-8")))
    assert named and named <= actions, named - actions
