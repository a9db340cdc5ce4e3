"""A class in one language (``sampan hub --lang zh``): each learner gets the course built in it, their kernels and
JupyterLab speak it. No hub is started here: the configuration, the home a learner's server starts in, the CLI."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from traitlets.config import Config

from sampan.cli import main
from sampan.hub.config import HubSettings, configure
from sampan.hub.course import LOCALE_SETTINGS, prepare_home

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
LESSON = Path("01-beginner") / "environment_check.ipynb"


def test_a_chinese_class_gets_the_chinese_course_kernels_and_menus(tmp_path):
    c = Config()
    s = configure(c, HubSettings(hub_dir=tmp_path / "hub", course_dir=str(NOTEBOOKS), live="off",
                                 learner_user="root", lang="zh"))
    built = tmp_path / "hub" / "course" / "zh"
    assert s.course_dir == c.SampanSpawner.course_dir == str(built) and c.SampanSpawner.lang == "zh"
    progress = next(x for x in c.JupyterHub.services if x["name"] == "progress")
    assert progress["environment"]["SAMPAN_HUB_COURSE"] == str(built)  # the teacher's page reads its path.yaml
    assert c.Spawner.environment["SAMPAN_LANG"] == "zh"  # the exercises' feedback, dashboards and reports
    lesson = json.loads((built / LESSON).read_text(encoding="utf-8"))
    assert lesson["metadata"]["sampan"]["language"] == "zh"
    assert all(cell["metadata"].get("sampan", {}).get("lang") in (None, "zh") for cell in lesson["cells"])
    code = "".join(cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
                   for cell in lesson["cells"] if cell["cell_type"] == "code")
    assert "# 跳过较慢的检查" in code and "skip the slow checks" not in code  # the code's comments in Chinese

    home = tmp_path / "hub" / "users" / "lee"
    report = prepare_home(home, s.course_dir, "", s.lang)
    assert str(LESSON) in report.copied and (home / "course" / LESSON).read_bytes() == (built / LESSON).read_bytes()
    assert list(built.rglob("*.built")) and not list((home / "course").rglob("*.built"))  # the build's stamps
    assert json.loads((home / LOCALE_SETTINGS).read_text()) == {"locale": "zh_CN"}  # JupyterLab's menus


def test_an_english_class_gets_one_language_a_notebook_too(tmp_path):
    c = Config()
    s = configure(c, HubSettings(hub_dir=tmp_path / "hub", course_dir=str(NOTEBOOKS), live="off",
                                 learner_user="root", lang="en"))
    lesson = json.loads((Path(s.course_dir) / LESSON).read_text(encoding="utf-8"))
    assert s.course_dir.endswith("/course/en") and c.Spawner.environment["SAMPAN_LANG"] == "en"
    assert not [cell for cell in lesson["cells"] if cell["metadata"].get("sampan", {}).get("lang") == "zh"]
    home = tmp_path / "home"
    prepare_home(home, s.course_dir, "", "en")
    assert not (home / LOCALE_SETTINGS).exists()  # English: JupyterLab's own default
    assert configure(Config(), HubSettings(hub_dir=tmp_path / "other", live="off", learner_user="root",
                                           course_dir="")).course_dir == ""  # no course, nothing built


def test_a_learners_own_language_choice_is_kept(tmp_path):
    home = tmp_path / "home"
    (home / LOCALE_SETTINGS).parent.mkdir(parents=True)
    (home / LOCALE_SETTINGS).write_text('{"locale": "en"}\n')  # the learner switched JupyterLab to English
    prepare_home(home, "", "", "zh")
    assert json.loads((home / LOCALE_SETTINGS).read_text()) == {"locale": "en"}


def test_the_class_language_comes_from_the_cli_or_the_locale(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SAMPAN_HUB_LEARNER_USER", "root")
    monkeypatch.delenv("SAMPAN_LANG", raising=False)
    assert main(["hub", "--dry-run", "--dir", str(tmp_path / "hub"), "--lang", "zh-CN"]) == 0
    assert "SAMPAN_HUB_LANG=zh" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:  # argparse refuses it, with the languages and the fix
        main(["hub", "--dry-run", "--lang", "fr"])
    assert refused.value.code == 2 and "Expected `--lang` to be one of en, zh" in capsys.readouterr().err
    assert HubSettings.from_env({"SAMPAN_HUB_DIR": str(tmp_path), "LANG": "zh_CN.UTF-8"}).lang == "zh"
    assert HubSettings.from_env({"SAMPAN_HUB_DIR": str(tmp_path), "LANG": "C.UTF-8"}).lang == "en"
    with pytest.raises(ValueError, match="Expected `SAMPAN_HUB_LANG` to be one of en, zh"):
        HubSettings.from_env({"SAMPAN_HUB_DIR": str(tmp_path), "SAMPAN_HUB_LANG": "klingon"})


def test_the_deploys_hook_syncs_the_course_built_in_the_pods_language(tmp_path, monkeypatch, capsys):
    """`python -m sampan.hub.course SOURCE DEST [LANG]` (Kubernetes' postStart, the Slurm batch script): with
    $SAMPAN_LANG set (values.yaml's singleuser.extraEnv), the learner gets the course in that language."""
    from sampan.hub.course import main as course_main

    home = tmp_path / "jovyan"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SAMPAN_LANG", "zh")
    assert course_main([str(NOTEBOOKS), str(home / "course")]) == 0
    lesson = json.loads((home / "course" / LESSON).read_text(encoding="utf-8"))
    assert lesson["metadata"]["sampan"]["language"] == "zh"
    assert not list((home / "course").rglob("*.built"))  # the build's own stamps stay out of the learner's copy
    assert json.loads((home / LOCALE_SETTINGS).read_text()) == {"locale": "zh_CN"}
    assert "copied" in capsys.readouterr().out
    monkeypatch.delenv("SAMPAN_LANG")
    assert course_main([str(NOTEBOOKS), str(tmp_path / "as-is")]) == 0  # no language: the source notebooks
    assert (tmp_path / "as-is" / LESSON).read_bytes() == (NOTEBOOKS / LESSON).read_bytes()
    assert course_main([str(NOTEBOOKS), str(tmp_path / "x"), "fr"]) == 2
    assert "Expected `LANG` to be one of en, zh" in capsys.readouterr().err
    assert course_main([str(tmp_path / "nope"), str(tmp_path / "y"), "zh"]) == 2
    assert "Expected `SOURCE` to be the course folder" in capsys.readouterr().err
