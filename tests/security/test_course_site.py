"""A run folder from someone else cannot make ``sampan path site`` write a page that runs script.

Building the site runs no code, so a learner may build one from a run folder (``report.json`` + executed
notebooks) received from elsewhere and open it in a browser. The attacks here are outputs that nbconvert's
JupyterLab template writes without its sanitiser: a ``text/vnd.mermaid`` output (printed as is) and a picture's
``width`` / ``height`` metadata (written as unquoted attributes), plus a lesson folder named ``javascript:...``
(a link that runs script when clicked). Each page is opened in real Chromium with JavaScript on. The course and
the run folder may bring more: an SVG picture holding a script (opened on its own, served with the site, it would
run in the site's origin) and a ``site`` link in the run folder (the default place of the site) leading anywhere.
"""
from __future__ import annotations

import functools
import json
import re
import shutil
import threading
from contextlib import contextmanager
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import nbformat
import pytest

from sampan.errors import UnsafeFileError
from sampan.path import load_path
from sampan.path.report import relative_href
from sampan.path.site import CSP, MARKER, build_site

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]
MANIFEST = """version: 1
title: Shared course
stages:
  - id: one
    title: One
    lessons:
      - {{id: a, notebook: {a!r}, title: Lesson A}}
      - {{id: b, notebook: b.ipynb, title: Lesson B}}
"""
SCRIPTED_SVG = ('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10" onload="localStorage.pwnedOnload=1">'
                '<script>localStorage.setItem("pwned", location.href)</script></svg>')
PICTURE_SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"><rect width="40" height="20"/></svg>'
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def _notebook(outputs: list[dict]) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("x", execution_count=1)
    cell.outputs = [nbformat.from_dict(o) for o in outputs]
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A lesson"), cell])


ATTACKS = [
    {"output_type": "display_data", "metadata": {},
     "data": {"text/vnd.mermaid": "</pre><img src=x onerror=\"document.title='PWNED-MERMAID'\"><pre>",
              "text/plain": "graph"}},
    {"output_type": "display_data", "data": {"image/png": PNG, "text/plain": "<Figure>"},
     "metadata": {"image/png": {"width": "1 onerror=document.body.dataset.pwnedWidth=1",
                                "height": "1 onload=document.body.dataset.pwnedHeight=1"}}},
    {"output_type": "display_data", "data": {"image/jpeg": "/9j/4AAQ", "text/plain": "<Figure>"},
     "metadata": {"width": "2 onerror=document.body.dataset.pwnedJpeg=1", "filenames": {"image/jpeg": "/etc/passwd"}}},
    {"output_type": "display_data", "data": {"text/html": "<img src=x onerror=\"document.body.dataset.pwnedHtml=1\">"},
     "metadata": {}},
]


def _policies(text: str) -> list[str]:
    """The Content-Security-Policy of each ``<meta http-equiv>`` in the page's ``<head>``."""
    class Heads(HTMLParser):
        found: list[str] = []

        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            if tag == "meta" and attrs.get("http-equiv", "").lower() == "content-security-policy":
                self.found.append(attrs.get("content"))

    parser = Heads()
    parser.found = []
    parser.feed(text.split("</head>", 1)[0])
    return parser.found


@pytest.fixture
def shared_run(tmp_path):
    """A course and a run folder as a stranger would send them, with the attacks in lesson A's outputs."""
    course, run = tmp_path / "course", tmp_path / "run"
    course.mkdir()
    (course / "path.yaml").write_text(MANIFEST.format(a="a.ipynb"))
    for folder in (course, run / "executed"):
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(_notebook(ATTACKS), folder / "a.ipynb")
        nbformat.write(_notebook([{"output_type": "stream", "name": "stdout", "text": "fine\n"}]), folder / "b.ipynb")
    report = {"language": "en", "mode": "quick", "manifest": str(course / "path.yaml"),
              "lessons": [{"lesson": "a", "status": "passed", "output": "executed/a.ipynb"},
                          {"lesson": "b", "status": "passed", "output": "executed/b.ipynb"}]}
    (run / "report.json").write_text(json.dumps(report))
    return course, run


def test_outputs_that_the_template_writes_raw_are_neutralised(shared_run):
    _, run = shared_run
    site = build_site(run, progress=False)
    page = (site.out / "a.html").read_text(encoding="utf-8")
    assert not re.search(r"<[^>]*\son\w+\s*=", page), "an event handler reached the page"
    assert "&lt;/pre&gt;&lt;img src=x onerror=" in page  # the mermaid source shown as text
    assert "/etc/passwd" not in page  # a picture cannot be pointed at a file of the reader
    assert _policies(page) == [CSP]
    index = (site.out / "index.html").read_text(encoding="utf-8")
    assert _policies(index) == [CSP]
    assert 'href="a.html"' in index
    # and a link never starts with something a browser reads as a scheme (the manifest refuses such names too)
    assert relative_href("javascript:alert(1)/a.html") == "./javascript:alert(1)/a.html"
    assert relative_href("../01-beginner/a.html") == "../01-beginner/a.html"


@contextmanager
def _chromium():
    """Headless Chromium with JavaScript on, as a learner's browser."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (.ci/run does this)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def _served(folder: Path):
    """The site over http, as a published course site is read: its files share one origin."""
    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()


def test_no_script_runs_when_the_pages_are_opened_in_a_browser(shared_run):
    _, run = shared_run
    site = build_site(run, progress=False)
    with _chromium() as browser:
        page = browser.new_page()
        dialogs = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto((site.out / "a.html").as_uri())
        page.wait_for_load_state("load")
        assert page.title() == "Lesson A"
        assert not [k for k in page.evaluate("Object.keys(document.body.dataset)") if k.startswith("pwned")]
        # the page still looks like a lesson: the site's stylesheet applies under the policy, from disk
        assert page.evaluate("getComputedStyle(document.querySelector('nav.sampan-nav')).display") == "flex"
        page.click("a.sampan-next")
        page.wait_for_load_state("load")
        assert page.title() == "Lesson B" and not dialogs


@pytest.mark.parametrize("name", ["javascript:alert(document.domain)/a.ipynb", "data:text/html,x/a.ipynb"])
def test_a_lesson_path_that_would_read_as_a_link_scheme_is_refused(tmp_path, name):
    folder = tmp_path / name.rsplit("/", 1)[0]
    folder.mkdir(parents=True)
    nbformat.write(_notebook([]), folder / "a.ipynb")
    manifest = tmp_path / "path.yaml"
    manifest.write_text(MANIFEST.format(a=name))
    (tmp_path / "b.ipynb").write_text(nbformat.writes(_notebook([])))
    with pytest.raises(UnsafeFileError, match=r"stages\[0\]\.lessons\[0\]\.notebook: the notebook path .* "
                                              r"contains ':'.*HINT: rename") as info:
        load_path(manifest)
    assert info.value.entry.endswith(".notebook")


def test_a_report_from_elsewhere_cannot_put_a_script_link_in_the_path_report():
    from sampan.path.report import render_html

    lessons = [{"lesson": f"l{i}", "stage": "one", "title": f"L{i}", "notebook": f"l{i}.ipynb", "status": "passed",
                "output": output, "duration_s": 1.0, "reason": "", "error": None, "metrics": []}
               for i, output in enumerate(["javascript:alert(document.domain)", " JavaScript:alert(1)", "/etc/passwd",
                                           "../../secret.ipynb", "executed/l4.ipynb"])]
    page = render_html({"mode": "quick", "run_dir": "runs/x", "started": "t0", "finished": "t1", "parameters": {},
                        "summary": {"passed": 5, "failed": 0, "skipped": 0, "not_run": 0}, "language": "en",
                        "lessons": lessons})
    assert re.findall(r'href="([^"]*)"', page) == ["executed/l4.ipynb"]


def test_a_report_link_a_browser_would_read_as_another_place_is_dropped():
    """Browsers drop leading spaces and control characters and ignore tabs and newlines in a link: " /\\host/x"
    opens another host, " /etc/passwd" a file of the server's; the check read the raw value and let them through."""
    from sampan.path.report import render_html

    outputs = [" /etc/passwd", " /\\evil.example/x", "\x01/\\evil.example/x", "\t//evil.example/x",
               "java\tscript:alert(1)", "\n/etc/passwd", "executed/ok.ipynb"]
    lessons = [{"lesson": f"l{i}", "stage": "one", "title": f"L{i}", "notebook": f"l{i}.ipynb", "status": "passed",
                "output": output, "duration_s": 1.0, "reason": "", "error": None, "metrics": []}
               for i, output in enumerate(outputs)]
    page = render_html({"mode": "quick", "run_dir": "runs/x", "started": "t0", "finished": "t1", "parameters": {},
                        "summary": {"passed": len(outputs), "failed": 0, "skipped": 0, "not_run": 0},
                        "language": "en", "lessons": lessons})
    assert re.findall(r'href="([^"]*)"', page) == ["executed/ok.ipynb"]


@pytest.mark.parametrize("elsewhere", ["nothing yet", "a site built before"])
def test_a_site_link_in_the_run_folder_cannot_send_the_site_elsewhere(shared_run, tmp_path, elsewhere):
    _, run = shared_run
    victim = tmp_path / "home" / "new" / "place"
    if elsewhere == "a site built before":  # the reader's own site somewhere else, which a rebuild would replace
        victim.mkdir(parents=True)
        (victim / MARKER).write_text("")
        (victim / "index.html").write_text("mine")
    (run / "site").symlink_to(victim)  # a tar or zip keeps the link, dangling or not
    link = run.resolve() / "site"
    with pytest.raises(UnsafeFileError, match=rf"{re.escape(str(link))} is a link \(to {re.escape(str(victim))}\).*"
                                              r"HINT: remove the link .* or pass --out") as info:
        build_site(run, progress=False)
    assert info.value.path == str(link)
    if elsewhere == "nothing yet":
        assert not (tmp_path / "home").exists()
    else:
        assert (victim / "index.html").read_text() == "mine" and len(list(victim.iterdir())) == 2
    assert sorted(p.name for p in run.iterdir()) == ["executed", "report.json", "site"]
    # a folder the reader names is theirs: the site is built there, its missing parents made
    site = build_site(run, out=tmp_path / "sites" / "shared", progress=False)
    assert site.index.is_file() and (run / "site").is_symlink()


@pytest.fixture
def svg_site(shared_run):
    """The shared course with an SVG picture holding a script beside a harmless one; lesson B shows and links them."""
    course, run = shared_run
    (course / "figures").mkdir()
    (course / "figures" / "diagram.svg").write_text(SCRIPTED_SVG)
    (course / "figures" / "picture.svg").write_text(PICTURE_SVG)
    lesson = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
        "See [the diagram](figures/diagram.svg) or [the same](./figures/diagram%2Esvg?v=1#top).\n\n"
        "![a picture](figures/picture.svg) ![the diagram, shown](figures/diagram.svg)")])
    for folder in (course, run / "executed"):
        nbformat.write(lesson, folder / "b.ipynb")
    return build_site(run, progress=False)


def test_no_svg_with_a_script_and_no_link_to_an_svg_reaches_the_site(svg_site):
    # the pages are checked above (sanitised, under the policy); any other file a browser could open as a document
    others = [p for p in svg_site.out.rglob("*") if p.is_file() and p.suffix != ".html"]
    scripts = [p.name for p in others if re.search(rb"<script|\son\w+\s*=", p.read_bytes(), re.IGNORECASE)]
    assert not scripts, f"a file of the site holds a script: {scripts}"
    for page in svg_site.out.rglob("*.html"):
        for link in re.findall(r'<a [^>]*href="([^"]*)"', page.read_text(encoding="utf-8")):
            assert not urlsplit(link).path.lower().replace("%2e", ".").endswith(".svg"), f"{page.name}: {link}"


def test_an_svg_from_the_course_runs_no_script_when_clicked_and_pictures_still_show(svg_site):
    with _chromium() as browser, _served(svg_site.out) as url:
        page = browser.new_page()
        page.goto(url + "b.html")
        page.wait_for_load_state("load")
        shown = "[...document.images].filter(i => i.complete && i.naturalWidth).map(i => [i.alt, i.naturalWidth])"
        assert page.evaluate(shown) == [["a picture", 40], ["the diagram, shown", 10]]
        for text in ("the diagram", "the same"):
            page.goto(url + "b.html")
            page.get_by_text(text, exact=True).click()
            page.wait_for_load_state("load")
            assert page.evaluate("localStorage.getItem('pwned') || localStorage.getItem('pwnedOnload')") is None, text
        page.goto(url + "figures/diagram.svg")  # nor at its place in the course's layout, typed by hand
        assert page.evaluate("localStorage.length") == 0
