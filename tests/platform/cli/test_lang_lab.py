"""`sampan lab --lang zh`: a real JupyterLab whose effective UI language setting is zh_CN (the language pack is
installed) serving the course built in Chinese, opened on its index."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import urllib.error
import urllib.request
import uuid

import pytest
from servers import stop, wait_until

from sampan.cli import main
from sampan.cli._servers import free_port


def _get(port: int, path: str, token: str):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}?token={token}", timeout=30) as response:
        return json.loads(response.read())


@pytest.fixture
def zh_lab(tmp_path):
    token, port = uuid.uuid4().hex, free_port()
    env = dict(os.environ, SAMPAN_LAB_TOKEN=token, SAMPAN_DATA=str(tmp_path / "data"), OMP_NUM_THREADS="1",
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"), JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"))
    log = tmp_path / "lab.log"
    proc = subprocess.Popen([sys.executable, "-m", "sampan", "lab", "--no-browser", "--port", str(port), "--lang", "zh"],
                            stdout=log.open("w"), stderr=subprocess.STDOUT, env=env)
    try:
        wait_until(lambda: _get(port, "/api/status", token) is not None, proc, log, 120, "JupyterLab")
        yield port, token, tmp_path / "data", log
    finally:
        stop(proc)


def test_lab_in_chinese_has_the_zh_cn_locale_and_serves_the_chinese_course(zh_lab):
    port, token, data, log = zh_lab
    setting = _get(port, "/lab/api/settings/@jupyterlab/translation-extension:plugin", token)
    assert setting["settings"]["locale"] == "zh_CN"
    languages = _get(port, "/lab/api/translations", token)["data"]
    assert "zh_CN" in languages, languages  # the language pack is installed
    lesson = _get(port, "/api/contents/01-beginner/environment_check.ipynb", token)["content"]
    markdown = "".join("".join(c["source"]) for c in lesson["cells"] if c["cell_type"] == "markdown")
    assert "# 环境检查" in markdown and "# Environment check" not in markdown
    assert _get(port, "/api/contents/index.ipynb", token)["type"] == "notebook"
    assert f"/lab/tree/index.ipynb?token={token}" in log.read_text()  # the URL printed opens the index


def test_lab_dry_run_in_each_language(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("SAMPAN_DATA", str(tmp_path))
    assert main(["lab", "--dry-run", "--no-browser", "--port", "0", "--lang", "zh"]) == 0
    cmd = capsys.readouterr().out.split()
    assert f"--ServerApp.root_dir={tmp_path / 'courses' / 'zh'}" in cmd
    assert f"--LabApp.user_settings_dir={tmp_path / 'lab' / 'zh' / 'user-settings'}" in cmd
    assert not (tmp_path / "courses").exists()  # a dry run builds nothing
    assert main(["lab", "--dry-run", "--no-browser", "--port", "0", "--lang", "en"]) == 0
    cmd = capsys.readouterr().out.split()
    assert f"--ServerApp.root_dir={tmp_path / 'courses' / 'en'}" in cmd and not any("user_settings" in w for w in cmd)


def test_dashboard_in_chinese_serves_the_chinese_build(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("SAMPAN_DATA", str(tmp_path))
    assert main(["dashboard", "digit_playground", "--dry-run", "--port", "0", "--lang", "zh"]) == 0
    cmd = shlex.split(capsys.readouterr().out)  # [python, -P, -c, VOILA_BOOT, notebook, ...]
    assert cmd[4] == str(tmp_path / "courses" / "zh" / "dashboards" / "digit_playground.ipynb")
    assert main(["dashboard", "digit_playground", "--dry-run", "--port", "0", "--lang", "en"]) == 0
    assert shlex.split(capsys.readouterr().out)[4] == str(tmp_path / "courses" / "en" / "dashboards" /
                                                          "digit_playground.ipynb")
    assert not (tmp_path / "courses").exists()  # a dry run builds nothing
