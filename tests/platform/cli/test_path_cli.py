"""`sampan path list | run` on planted lessons."""
from __future__ import annotations

import json

import nbformat
import pytest
import yaml

import sampan.path
from sampan.cli import main
from sampan.utils.io import repo_root

RECORD = ("from IPython.display import display\n"
          "display({'application/vnd.sampan.record+json': {'name': 'acc', 'value': 0.75 if QUICK else 0.2},"
          " 'text/plain': 'acc'}, raw=True)")


@pytest.fixture
def planted(tmp_path):
    return tmp_path / "notebooks"


def _notebook(path, source):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "sampan", "display_name": "Sampan (Python 3)", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("QUICK = False", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(source)]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def _course(root):
    _notebook(root / "01-beginner/one.ipynb", RECORD)
    _notebook(root / "01-beginner/two.ipynb", "pass")
    stages = [
        {"id": "beginner", "title": "Beginner", "lessons": [
            {"id": "one", "notebook": "01-beginner/one.ipynb", "minutes": {"quick": 1, "full": 12},
             "metrics": {"acc": {"quick": [0.7, 0.8], "full": [0.9, 1.0]}}, "produces": ["w"]},
            {"id": "two", "notebook": "01-beginner/two.ipynb", "requires": ["one"], "needs": ["w"]}]},
        {"id": "advanced", "lessons": []}]
    (root / "path.yaml").write_text(yaml.safe_dump({"stages": stages}))
    return root / "path.yaml"


def test_list_shows_the_path_with_progress(planted, capsys):
    file = _course(planted)
    sampan.path.update_progress("one", "passed")
    assert main(["path", "--manifest", str(file), "list"]) == 0
    out = capsys.readouterr().out
    assert "1/2 lessons done" in out
    assert "✔ one" in out and "· two" in out and "after one" in out and "12 min" in out
    assert "(no lessons yet)" in out


def test_run_quick_passes_and_writes_the_report(planted, tmp_path, capsys):
    file = _course(planted)
    code = main(["path", "--manifest", str(file), "run", "--lesson", "one", "--quick", "--output", str(tmp_path / "runs")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "✔ one" in out and "report:" in out
    [run_dir] = list((tmp_path / "runs").iterdir())
    report = json.loads((run_dir / "report.json").read_text())
    assert report["mode"] == "quick" and report["lessons"][0]["metrics"][0]["value"] == 0.75
    assert sampan.path.load_progress()["one"]["status"] == "passed"


def test_run_fails_with_exit_1_naming_the_missing_artifact(planted, tmp_path, capsys):
    file = _course(planted)
    assert main(["path", "--manifest", str(file), "run", "--lesson", "two", "--output", str(tmp_path)]) == 1
    assert "produced by lesson 'one'" in capsys.readouterr().out


def test_malformed_manifest_exits_2_with_the_reason(planted, capsys):
    file = _course(planted)
    data = yaml.safe_load(file.read_text())
    data["stages"][0]["lessons"][0]["requires"] = ["two"]  # one -> two -> one
    file.write_text(yaml.safe_dump(data))
    assert main(["path", "--manifest", str(file), "list"]) == 2
    assert "cycle in prerequisites: one -> two -> one" in capsys.readouterr().err
    assert main(["path", "--manifest", str(file), "run", "--stage", "nope"]) == 2


def test_index_rewrites_the_listing(planted, capsys):
    file = _course(planted)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Index\n<!-- sampan-path:begin -->\n<!-- sampan-path:end -->\nend")]
    nbformat.write(nb, planted / "index.ipynb")
    assert main(["path", "--manifest", str(file), "index"]) == 0
    assert "updated" in capsys.readouterr().out
    text = nbformat.read(planted / "index.ipynb", as_version=4).cells[0].source
    assert "1. [One](01-beginner/one.ipynb) · 12 min" in text and text.endswith("end")
    assert main(["path", "--manifest", str(file), "index"]) == 0
    assert "already in sync" in capsys.readouterr().out


def test_manifest_is_accepted_before_or_after_the_action(planted, capsys):
    file = _course(planted)
    assert main(["path", "list", "--manifest", str(file)]) == 0
    after = capsys.readouterr().out
    assert main(["path", "--manifest", str(file), "list"]) == 0
    assert capsys.readouterr().out == after and f"(manifest {file})" in after
    for action in ("list", "run", "index", "site"):
        with pytest.raises(SystemExit):
            main(["path", action, "--help"])
        assert "--manifest MANIFEST" in capsys.readouterr().out


def test_index_without_the_index_notebook_names_it_and_what_it_holds(planted, capsys, monkeypatch):
    _course(planted)
    monkeypatch.chdir(planted)
    assert main(["path", "--manifest", "path.yaml", "index"]) == 2
    err = capsys.readouterr().err
    assert f"The course index notebook {planted / 'index.ipynb'} does not exist" in err
    assert "<!-- sampan-path:begin --> and <!-- sampan-path:end -->" in err and "HINT: create it" in err
    assert "[Errno 2]" not in err


def test_list_in_chinese_says_minutes_in_chinese(planted, capsys):
    file = _course(planted)
    assert main(["path", "--manifest", str(file), "list", "--lang", "zh"]) == 0
    out = capsys.readouterr().out
    assert "约 12 分钟" in out and "  12 分钟" in out
    assert " min" not in out


def test_run_in_chinese_prints_chinese_status_and_report_line(planted, tmp_path, capsys):
    file = _course(planted)
    assert main(["path", "--manifest", str(file), "run", "--lesson", "two", "--output", str(tmp_path),
                 "--lang", "zh"]) == 1
    out = capsys.readouterr().out
    assert "✘ two" in out and "失败" in out and "报告：" in out
    assert "failed" not in out and "report:" not in out
    assert "本地模型库里没有制品 'w'" in out and "它由课程 'one'" in out


def test_list_names_several_prerequisites_with_the_languages_list_separator(capsys):
    manifest = str(repo_root() / "notebooks" / "path.yaml")
    for lang, line in (("zh", "先修：datasets_and_transforms、training_craft"),
                       ("en", "after datasets_and_transforms, training_craft")):
        assert main(["path", "--manifest", manifest, "list", "--lang", lang]) == 0
        out = capsys.readouterr().out
        assert line in [x for x in out.splitlines() if "transfer_learning_defects" in x][0]
