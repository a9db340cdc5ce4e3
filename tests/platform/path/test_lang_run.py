"""`sampan path run --lang zh` on a planted bilingual lesson: the Chinese notebook runs, report.html is in
Chinese, and progress is kept per lesson, not per language."""
from __future__ import annotations

import nbformat

import sampan.path
from sampan.cli import main

# emits a sampan.record output without importing torch in the kernel (as tests/platform/path/conftest.py does)
RECORD = ("import os\nfrom IPython.display import display\n"
          "display({'application/vnd.sampan.record+json': {'name': 'acc', 'value': 0.9}}, raw=True)\n"
          "display({'application/vnd.sampan.record+json': {'name': 'lang', 'value': os.environ['SAMPAN_LANG']}},"
          " raw=True)\n")


def _bilingual(planted):
    file = planted.notebook("01-beginner/hello.ipynb", RECORD)
    nb = nbformat.read(file, as_version=4)
    nb.cells[0].metadata["sampan"] = {"lang": "en"}
    zh = nbformat.v4.new_markdown_cell("# 一节示例课程")
    zh.metadata["sampan"] = {"lang": "zh"}
    nb.cells.insert(1, zh)
    nb.metadata["sampan"] = {"languages": ["en", "zh"]}
    nbformat.write(nb, file)
    return planted.manifest([{"id": "beginner", "title": {"en": "Beginner", "zh": "入门"}, "lessons": [
        {"id": "hello", "notebook": "01-beginner/hello.ipynb", "title": {"en": "Hello", "zh": "你好"},
         "metrics": {"acc": [0.5, 1.0]}}]}])


def test_path_run_in_chinese_runs_the_chinese_lesson_and_writes_a_chinese_report(planted, tmp_path, capsys):
    manifest = _bilingual(planted)
    code = main(["path", "--manifest", str(manifest), "run", "--quick", "--lang", "zh",
                 "--output", str(tmp_path / "runs")])
    assert code == 0, capsys.readouterr()
    run_dir = next((tmp_path / "runs").iterdir())
    executed = nbformat.read(run_dir / "beginner" / "hello.ipynb", as_version=4)
    markdown = [c.source for c in executed.cells if c.cell_type == "markdown"]
    assert markdown == ["# 一节示例课程"] and executed.metadata["sampan"]["language"] == "zh"
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in page and "学习路线报告" in page and "你好" in page and "1 通过" in page
    report = sampan.path.load_report(run_dir)
    assert report["language"] == "zh" and report["lessons"][0]["records"]["lang"] == "zh"  # the kernel's language
    # progress is per lesson: done in Chinese is done in English
    assert sampan.path.load_progress()["hello"]["status"] == "passed"
    assert main(["path", "--manifest", str(manifest), "list", "--lang", "en"]) == 0
    assert "✔ hello" in capsys.readouterr().out


def test_path_list_in_the_locale_language_and_unknown_languages(planted, monkeypatch, capsys):
    manifest = _bilingual(planted)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    for name in ("LC_ALL", "LC_MESSAGES", "SAMPAN_LANG"):
        monkeypatch.delenv(name, raising=False)
    assert main(["path", "--manifest", str(manifest), "list"]) == 0
    out = capsys.readouterr().out
    assert "入门  [beginner]" in out and "你好" in out and "已完成 0/1 节课" in out
    assert main(["path", "--manifest", str(manifest), "list", "--lang", "en"]) == 0
    out = capsys.readouterr().out
    assert "Beginner  [beginner]" in out and "Hello" in out and "你好" not in out
    for command in (["path", "list"], ["path", "run"], ["lab", "--dry-run"], ["dashboard", "x", "--dry-run"]):
        try:
            main([*command, "--lang", "fr"])
        except SystemExit as exc:
            assert exc.code == 2, command
        else:
            raise AssertionError(f"{command} accepted --lang fr")
        err = capsys.readouterr().err
        assert "Expected `--lang` to be one of en, zh. Received: --lang='fr'" in err, command


def test_the_notes_of_a_chinese_run_are_chinese(planted, tmp_path, monkeypatch):
    from markupsafe import escape

    from sampan.path import runner

    for name in ("a", "b", "c"):
        planted.notebook(f"01-beginner/{name}.ipynb", "x = 1")
    manifest = planted.manifest([{"id": "beginner", "lessons": [
        {"id": "a", "notebook": "01-beginner/a.ipynb"},
        {"id": "b", "notebook": "01-beginner/b.ipynb", "requires": ["a"]},
        {"id": "c", "notebook": "01-beginner/c.ipynb"}]}])
    error = {"cell_index": 2, "execution_count": 3, "source": "boom()", "ename": "ValueError", "evalue": "boom",
             "traceback": ""}
    monkeypatch.setattr(runner, "_execute", lambda *args, **kwargs: dict(error))
    notes = {}
    for lang in ("zh", "en"):
        report = sampan.path.run(manifest=manifest, output_dir=tmp_path / lang, progress=False, lang=lang)
        notes[lang] = [r.reason for r in report.lessons]
        page = report.html_path.read_text(encoding="utf-8")
        assert all(str(escape(note)) in page for note in notes[lang])  # the Notes column
    assert notes["zh"] == ["单元格 2（从 0 开始编号）出错：ValueError：boom", "先修课程 'a' 在本次运行中失败",
                           "前面的课程失败了（加上 --keep-going 可继续运行其余课程）"]
    assert notes["en"] == ["ValueError in cell 2 (counting from 0): boom", "prerequisite 'a' failed in this run",
                           "an earlier lesson failed (use --keep-going to run the rest)"]
