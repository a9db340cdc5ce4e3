"""`sampan lab --lang zh` in headless Chromium: JupyterLab's menus are in Chinese, the course index opens and
a bilingual lesson opens in Chinese and its first cells print Sampan's own words in Chinese; the effective UI
language setting read from the settings API is zh_CN. Writes the screenshot docs/images/lab-zh.png (README.zh-CN.md)."""
from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from lab_cells import run_the_check
from servers import stop, wait_until

from sampan.cli._servers import free_port

REPO = Path(__file__).resolve().parents[2]
WAIT = 240_000  # ms: the 2-core CI machine is shared
pytestmark = pytest.mark.browser


def _get(port: int, path: str, token: str):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}?token={token}", timeout=30) as response:
        return json.loads(response.read())


@pytest.fixture
def zh_lab(server_env, tmp_path):
    """`sampan lab --lang zh` with a private data directory (the built course and the lab settings live there)."""
    token, port = uuid.uuid4().hex, free_port()
    env = dict(server_env, SAMPAN_LAB_TOKEN=token, SAMPAN_DATA=str(tmp_path / "data"), OMP_NUM_THREADS="1",
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"))
    log = tmp_path / "lab.log"
    proc = subprocess.Popen([sys.executable, "-m", "sampan", "lab", "--no-browser", "--port", str(port), "--lang", "zh"],
                            stdout=log.open("w"), stderr=subprocess.STDOUT, env=env, cwd=str(REPO))
    try:
        wait_until(lambda: _get(port, "/api/status", token) is not None, proc, log, 120, "JupyterLab")
        yield port, token, log
    finally:
        stop(proc)


def test_lab_in_chinese_shows_chinese_menus_and_the_chinese_lesson(zh_lab, page):
    port, token, log = zh_lab
    setting = _get(port, "/lab/api/settings/@jupyterlab/translation-extension:plugin", token)
    assert setting["settings"]["locale"] == "zh_CN"                       # the effective setting
    assert "zh_CN" in _get(port, "/lab/api/translations", token)["data"]  # the language pack is installed
    lesson = _get(port, "/api/contents/01-beginner/environment_check.ipynb", token)["content"]
    markdown = "".join("".join(c["source"]) for c in lesson["cells"] if c["cell_type"] == "markdown")
    assert "# 环境检查" in markdown and "# Environment check" not in markdown  # the course built in Chinese

    page.goto(f"http://127.0.0.1:{port}/?token={token}", timeout=WAIT)  # default_url: the course index
    page.wait_for_url("**/lab/tree/index.ipynb**", timeout=WAIT)
    menubar = page.locator("#jp-MainMenu")
    menubar.get_by_text("文件", exact=True).wait_for(timeout=WAIT)      # "File"
    assert menubar.get_by_text("File", exact=True).count() == 0
    listing = page.locator(".jp-RenderedMarkdown", has_text="学习路线")  # the Chinese course index
    listing.wait_for(timeout=WAIT)
    assert page.locator(".jp-RenderedMarkdown", has_text="The learning path").count() == 0
    listing.locator("a:has-text('环境检查')").click(timeout=WAIT)  # its Chinese title, from path.yaml
    page.locator(".jp-NotebookPanel .jp-RenderedMarkdown h1", has_text="环境检查").first.wait_for(timeout=WAIT)
    # the code's comments and printed words are Chinese too (metadata.sampan.comments / strings)
    page.locator(".jp-NotebookPanel .jp-CodeCell", has_text="跳过较慢的检查").first.wait_for(timeout=WAIT)
    assert page.locator(".jp-NotebookPanel .jp-CodeCell", has_text="skip the slow checks").count() == 0
    page.locator(".jp-StatusBar-Widget", has_text="Sampan (Python 3)").first.wait_for(timeout=WAIT)
    # the lesson's first cells, run as a learner does: what Sampan itself prints follows the course's language too
    lesson = run_the_check(page, idle="空闲", first_item="CPU：前向 + 反向", ready="Sampan 已就绪。", wait=WAIT)
    assert lesson.locator(".jp-OutputArea-output", has_text="cpu: forward").count() == 0
    (REPO / "docs" / "images").mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(REPO / "docs" / "images" / "lab-zh.png"))


def test_a_dashboard_in_chinese_in_voila(server_env, page, tmp_path):
    """The path report dashboard with ``--lang zh`` over a real Chinese run (one lesson passed, one failed): its
    labels, the lessons' titles, the statuses and the failure in Chinese; the picture of README.zh-CN.md."""
    import socket

    from path_runs import planted_runs

    runs = planted_runs(tmp_path / "course", lang="zh", twice=False)
    token, port = uuid.uuid4().hex, free_port()
    env = dict(server_env, SAMPAN_DASHBOARD_TOKEN=token, SAMPAN_DATA=str(tmp_path / "data"), OMP_NUM_THREADS="1",
               SAMPAN_RUNS_DIR=str(runs))
    log = tmp_path / "voila.log"
    proc = subprocess.Popen([sys.executable, "-m", "sampan", "dashboard", "path_report", "--port", str(port),
                             "--lang", "zh"], stdout=log.open("w"), stderr=subprocess.STDOUT, env=env, cwd=str(REPO))
    try:
        deadline = time.time() + 120
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.time() < deadline, f"Voilà did not start:\n{log.read_text()[-3000:]}"
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.3)
        page.goto(f"http://127.0.0.1:{port}/?token={token}", timeout=WAIT)
        page.locator("h1", has_text="学习路线报告").wait_for(timeout=WAIT)
        assert page.locator("h1", has_text="Learning-path reports").count() == 0
        page.locator(".jupyter-widgets").first.wait_for(timeout=WAIT)  # the page is built: its widgets are drawn
        page.get_by_text("只看失败的课程").wait_for(timeout=WAIT)  # the widgets' labels are Chinese too
        page.get_by_text("你的进度").first.wait_for(timeout=WAIT)
        assert page.get_by_text("Only failed lessons").count() == 0
        report = page.locator(".sampan-report")
        report.locator("#failure-broken").wait_for(timeout=WAIT)
        text = report.inner_text()
        for words in ("1 通过", "1 失败", "热身", "出错的一课", "入门", "ValueError", "planted"):
            assert words in text, text
        assert "passed" not in text and "Warm up" not in text, text
        assert report.locator("#failure-broken h2").inner_text().startswith("出错的一课 失败")  # its title, not its id
        # the failed cell's code reads as code inside the widget: a monospace font, lines not 28 px apart
        font, line = report.locator("#failure-broken pre").first.evaluate(
            "e => [getComputedStyle(e).fontFamily, parseFloat(getComputedStyle(e).lineHeight)]")
        assert "monospace" in font and line < 22, (font, line)
        page.screenshot(path=str(REPO / "docs" / "images" / "dashboard-zh.png"), full_page=True)
    finally:
        stop(proc)
