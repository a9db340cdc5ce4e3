"""``sampan path site``: a static HTML site of executed lessons, built from a real path run (papermill).

A small planted course (three lessons and one that is never run) is executed by the real command
``sampan path site`` without ``--from``, which runs the path in quick mode first; the tests read the pages
it wrote: order, outputs, pictures, links, solutions folded, scripts neutralised. A second, Chinese run of
the bilingual lesson checks the language.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import nbformat
import pytest
import yaml

import sampan.path
from sampan.path.site import MARKER, build_site

REPO = Path(__file__).resolve().parents[3]
KERNEL = {"name": "sampan", "display_name": "Sampan (Python 3)", "language": "python"}
PARAMS = "QUICK = False\nDATA_DIR = ''\nSEED = 0\nSOLUTION = False\n"
EVIL = ('<b onmouseover="steal()">bold output</b><script>window.stolen = 1</script>'
        '<table><tr><td>cell 7</td></tr></table>')


def _md(text: str, lang: str | None = None):
    cell = nbformat.v4.new_markdown_cell(textwrap.dedent(text))
    if lang:
        cell.metadata["sampan"] = {"lang": lang}
    return cell


def _code(src: str, *tags: str):
    return nbformat.v4.new_code_cell(textwrap.dedent(src), metadata={"tags": list(tags)} if tags else {})


def _write(path: Path, cells: list, bilingual: bool = False) -> None:
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = KERNEL
    if bilingual:
        nb.metadata["sampan"] = {"languages": ["en", "zh"]}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def plant_course(root: Path) -> Path:
    """Lessons intro (bilingual), second, broken (raises) and later (skipped: it requires broken)."""
    for folder in ("figures", "01-beginner"):
        (root / folder).mkdir(parents=True)
    shutil.copyfile(REPO / "notebooks" / "figures" / "convolution.png", root / "figures" / "convolution.png")
    shutil.copyfile(REPO / "notebooks" / "figures" / "autograd_graph.png", root / "01-beginner" / "local.png")
    _write(root / "01-beginner" / "intro.ipynb", [
        _md("# Intro lesson\n\nA kernel slides: ![convolution](../figures/convolution.png)", "en"),
        _md("# 入门课\n\n卷积核在输入上滑动：![卷积](../figures/convolution.png)", "zh"),
        _code(PARAMS, "parameters"),
        _md("Go on to [the second lesson](second.ipynb#Part-2) or [a later one](../02-intermediate/later.ipynb).",
            "en"),
        _md("继续学习[第二课](second.ipynb#Part-2)或[后面的课](../02-intermediate/later.ipynb)。", "zh"),
        _code("""\
            import matplotlib
            matplotlib.use("module://matplotlib_inline.backend_inline")
            import matplotlib.pyplot as plt
            plt.plot([0, 1, 2], [0, 1, 4])
            plt.show()
            print("hello from the intro run")
            """),
        _code(f"from IPython.display import HTML, display\ndisplay(HTML({EVIL!r}))"),
        _code('if SOLUTION:\n    print("THE-REFERENCE-ANSWER")', "solution"),
        nbformat.v4.new_markdown_cell("**Learning path** · Next: [Second](second.ipynb)",
                                      metadata={"tags": ["sampan-nav"]}),
    ], bilingual=True)
    _write(root / "01-beginner" / "second.ipynb", [
        _md("## Part 2\n\n![a local picture](local.png) and back to [the intro](intro.ipynb)."),
        _code(PARAMS, "parameters"),
        _code('print("second lesson output", 6 * 7)'),
    ])
    _write(root / "02-intermediate" / "broken.ipynb", [
        _md("# Broken"), _code(PARAMS, "parameters"), _code("raise ValueError('planted failure')")])
    _write(root / "02-intermediate" / "later.ipynb", [_md("# Later"), _code(PARAMS, "parameters")])
    stages = [
        {"id": "beginner", "title": {"en": "Beginner", "zh": "入门"}, "description": {"en": "First steps.",
                                                                                   "zh": "第一步。"},
         "lessons": [
             {"id": "intro", "notebook": "01-beginner/intro.ipynb", "title": {"en": "Intro", "zh": "入门课"},
              "summary": {"en": "Pictures and outputs.", "zh": "图片与输出。"}, "minutes": {"quick": 1, "full": 5}},
             {"id": "second", "notebook": "01-beginner/second.ipynb", "title": "Second lesson",
              "summary": "Links back."}]},
        {"id": "intermediate", "title": "Intermediate", "lessons": [
            {"id": "broken", "notebook": "02-intermediate/broken.ipynb", "title": "Broken lesson"},
            {"id": "later", "notebook": "02-intermediate/later.ipynb", "title": "Later lesson",
             "requires": ["broken"]}]},
    ]
    manifest = root / "path.yaml"
    manifest.write_text(yaml.safe_dump({"version": 1, "title": {"en": "Planted path", "zh": "种下的路线"},
                                        "stages": stages}, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return manifest


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[tuple[str, str, str]] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("href", "src") and value is not None:
                self.links.append((tag, name, value))
            assert not name.startswith("on"), f"<{tag} {name}=...> would run script"


def _parse(page: Path) -> _Links:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    base = tmp_path_factory.mktemp("site")
    manifest = plant_course(base / "course")
    env = {**os.environ, "SAMPAN_DATA": str(base / "data"), "SAMPAN_LANG": "en"}
    done = subprocess.run([sys.executable, "-m", "sampan", "path", "--manifest", str(manifest), "site",
                           "--lang", "en"], cwd=base, env=env, capture_output=True, text=True, timeout=900)
    (run_dir,) = (base / "runs").iterdir()
    return base, manifest, run_dir, run_dir / "site", done


def _outcomes(run_dir: Path) -> str:
    """Each lesson's status, time and error in the run's report: what a failed assertion below needs to say."""
    lessons = json.loads((run_dir / "report.json").read_text())["lessons"]
    return "\n".join(f"{x['lesson']}: {x['status']} in {x['duration_s']} s; {x['reason']} {x['error'] or ''}"
                     for x in lessons)


def test_without_from_the_path_runs_in_quick_mode_then_the_site_is_built(built):
    base, _, run_dir, site, done = built
    assert done.returncode == 1, done.stderr  # `broken` failed in the run it made, and it says so
    assert f"site: {site / 'index.html'}" in done.stdout
    assert "failed in that run (their pages show where): broken" in done.stdout, _outcomes(run_dir)
    assert "not executed in that run (listed without a page): later" in done.stdout
    assert "4/4" in done.stderr  # the run's progress bar
    report = json.loads((run_dir / "report.json").read_text())
    assert report["mode"] == "quick" and report["parameters"]["QUICK"] is True
    files = sorted(p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file())
    assert files == [MARKER, "01-beginner/intro.html", "01-beginner/local.png", "01-beginner/second.html",
                     "02-intermediate/broken.html", "_static/sampan-site.css", "figures/convolution.png",
                     "index.html"]


def test_the_index_lists_stages_and_lessons_in_path_order_with_their_pages(built):
    *_, site, _ = built
    text = (site / "index.html").read_text(encoding="utf-8")
    order = [text.index(s) for s in ("Beginner", "Intro", "Pictures and outputs.", "Second lesson",
                                     "Intermediate", "Broken lesson", "Later lesson")]
    assert order == sorted(order)
    assert 'href="01-beginner/intro.html"' in text and 'href="02-intermediate/broken.html"' in text
    later = text[text.index('id="lesson-later"'):]
    assert "not executed in this run" in later[:400] and "href" not in later[:later.index("</li>")]
    assert re.search(r'id="lesson-broken".*?sampan-failed', text, re.S)
    assert "quick mode" in text and "Planted path" in text


def test_pages_hold_the_outputs_of_the_run(built):
    _, _, run_dir, site, _ = built
    intro = (site / "01-beginner" / "intro.html").read_text(encoding="utf-8")
    assert "hello from the intro run" in intro
    assert re.search(r'<img [^>]*src="data:image/png;base64,[A-Za-z0-9+/=\s]{1000,}"', intro), (  # the plot
        _outcomes(run_dir))
    assert "<td>cell 7</td>" in intro and "<b>bold output</b>" in intro
    assert "Intro lesson" in intro and "入门课" not in intro  # the English build only
    assert "QUICK = True" not in intro  # papermill's injected parameters are left out
    assert "Next: [Second]" not in intro and "Learning path" not in intro  # the notebook's own nav line too
    second = (site / "01-beginner" / "second.html").read_text(encoding="utf-8")
    assert "second lesson output 42" in second
    broken = (site / "02-intermediate" / "broken.html").read_text(encoding="utf-8")
    assert "This lesson failed in this run" in broken and "planted failure" in broken


def test_solutions_are_folded_away(built):
    *_, site, _ = built
    intro = (site / "01-beginner" / "intro.html").read_text(encoding="utf-8")
    folded = re.search(r'<details class="sampan-solution"><summary>(.*?)</summary>(.*?)</details>', intro, re.S)
    assert folded and "Reference solution" in folded.group(1)
    assert "THE-REFERENCE-ANSWER" in folded.group(2)  # the run sets SOLUTION = True
    assert intro.count("THE-REFERENCE-ANSWER") == 1


def test_no_script_runs_and_nothing_is_fetched(built):
    *_, site, _ = built
    for page in site.rglob("*.html"):
        parsed = _parse(page)  # also fails on any on* event attribute
        assert "script" not in parsed.tags, page
        for tag, _, value in parsed.links:
            assert not urlsplit(value).netloc, f"{page.name}: <{tag}> fetches {value}"
    intro = (site / "01-beginner" / "intro.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;window.stolen = 1&lt;/script&gt;" in intro  # shown as text, never run


def test_every_relative_link_and_picture_resolves_inside_the_site(built):
    *_, site, _ = built
    checked = 0
    for page in site.rglob("*.html"):
        for tag, _, value in _parse(page).links:
            parts = urlsplit(value)
            if parts.scheme or not parts.path:
                continue
            target = (page.parent / parts.path).resolve()
            assert target.is_file() and target.is_relative_to(site.resolve()), f"{page.name}: {value}"
            checked += 1
    assert checked >= 12


def test_previous_next_and_lesson_links_follow_the_path(built):
    *_, site, _ = built
    def links(rel):
        return [(t, v) for t, a, v in _parse(site / rel).links if a == "href"]

    intro, second, broken = (links(r) for r in ("01-beginner/intro.html", "01-beginner/second.html",
                                                 "02-intermediate/broken.html"))
    assert ("a", "second.html") in intro and ("a", "../index.html") in intro
    assert ("a", "second.html#Part-2") in intro               # a lesson's .ipynb link → its page
    assert ("a", "../index.html#lesson-later") in intro      # a lesson without a page → its index entry
    assert ("a", "intro.html") in second and ("a", "../02-intermediate/broken.html") in second
    assert ("a", "../01-beginner/second.html") in broken and not any("later" in v for _, v in broken)
    page = (site / "01-beginner" / "intro.html").read_text(encoding="utf-8")
    nexts = re.findall(r'<a [^>]*class="sampan-next"[^>]*>', page)
    assert len(nexts) == 2 and all('href="second.html"' in a for a in nexts)  # header and footer
    assert "sampan-previous" not in page  # the first lesson has none
    assert 'src="../figures/convolution.png"' in page


def test_a_rebuild_replaces_the_site_and_other_folders_are_refused(built, tmp_path):
    _, manifest, run_dir, site, _ = built
    out = tmp_path / "site"
    first = build_site(run_dir, out=out, manifest=manifest)
    (out / "stale.html").write_text("old")
    again = build_site(run_dir, out=out, manifest=manifest)
    assert again.index.is_file() and not (out / "stale.html").exists()
    assert sorted(first.pages) == ["broken", "intro", "second"] and first.missing == ["later"]
    assert first.failed == ["broken"] and first.language == "en", _outcomes(run_dir)
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("precious")
    with pytest.raises(ValueError, match=r"Expected `out` to be a new or empty folder.*HINT"):
        build_site(run_dir, out=foreign, manifest=manifest)
    assert (foreign / "thesis.tex").read_text() == "precious"
    assert not list(tmp_path.glob(".*building*"))


def test_bad_run_folder_and_wrong_language_are_refused(built, tmp_path):
    _, manifest, run_dir, *_ = built
    with pytest.raises(ValueError, match=r"Expected `run_dir` to be a run folder.*HINT: it holds no report.json"):
        build_site(tmp_path, manifest=manifest)
    with pytest.raises(ValueError, match=r"Expected `lang` to be the language the run executed its lessons in "
                                         r"\('en'\).*sampan path run --lang zh"):
        build_site(run_dir, lang="zh", out=tmp_path / "zh", manifest=manifest)
    done = subprocess.run([sys.executable, "-m", "sampan", "path", "site", "--from", str(tmp_path / "nope")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "it does not exist" in done.stderr


def test_a_report_cannot_point_the_site_outside_its_run_folder(built, tmp_path):
    _, manifest, run_dir, *_ = built
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("site"))
    secret = tmp_path / "secret.ipynb"
    _write(secret, [_md("TOP SECRET")])
    report = json.loads((copy / "report.json").read_text())
    report["lessons"][0]["output"] = "../secret.ipynb"
    (copy / "report.json").write_text(json.dumps(report))
    site = build_site(copy, manifest=manifest)
    assert "intro" in site.missing
    assert "TOP SECRET" not in "".join(p.read_text(encoding="utf-8") for p in site.out.rglob("*.html"))


def test_the_chinese_run_gives_a_chinese_site(built, tmp_path):
    _, manifest, *_ = built
    report = sampan.path.run(lesson="intro", quick=True, manifest=manifest, output_dir=tmp_path / "runs",
                             data_dir=tmp_path / "data", lang="zh", progress=False)
    assert report.ok, report.lessons
    done = subprocess.run([sys.executable, "-m", "sampan", "path", "--manifest", str(manifest), "site", "--from",
                           str(report.run_dir), "--out", str(tmp_path / "zh")], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "SAMPAN_LANG": "en"})
    assert done.returncode == 0, done.stderr
    index = (tmp_path / "zh" / "index.html").read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in index and "种下的路线" in index and "入门课" in index and "图片与输出。" in index
    page = (tmp_path / "zh" / "01-beginner" / "intro.html").read_text(encoding="utf-8")
    assert "卷积核在输入上滑动" in page and "Intro lesson" not in page and "参考答案" in page
    assert 'href="../index.html#lesson-later"' in page


def test_the_sanitiser_keeps_document_markup_and_drops_what_runs():
    from sampan.path.site import clean_html

    kept = ('<h2 id="Loss">Loss</h2><p>See <a href="first.html#x">this</a> and <a href="https://pytorch.org">torch'
            '</a>.</p><table><thead><tr><th>a</th></tr></thead><tbody><tr><td>1</td></tr></tbody></table>'
            '<img alt="plot" src="data:image/png;base64,iVBORw0KGgo="><details><summary>s</summary>x</details>')
    assert clean_html(kept) == kept  # nothing of a lesson's own markup is escaped
    dropped = clean_html('<a href="javascript:alert(1)">a</a><a href="data:text/html;base64,PHNjcmlwdD4=">b</a>'
                         '<img src="x.png" onerror="alert(2)" style="position:fixed"><iframe src="https://x.y">'
                         '</iframe><svg onload="alert(3)"></svg><style>body{display:none}</style>')
    assert "javascript:" not in dropped and "data:text/html" not in dropped and "onerror" not in dropped
    assert "style=" not in dropped and "<iframe" not in dropped and "<svg" not in dropped and "<style" not in dropped
    assert '<img src="x.png">' in dropped and "<a>a</a>" in dropped and "<a>b</a>" in dropped


def test_a_relative_manifest_keeps_the_pages_in_the_site_with_relative_links(built, tmp_path, monkeypatch):
    _, manifest, run_dir, *_ = built
    before = sorted(manifest.parent.rglob("*.html"))
    monkeypatch.chdir(manifest.parent)
    site = build_site(run_dir, out=tmp_path / "rel", manifest="path.yaml")
    assert sorted(manifest.parent.rglob("*.html")) == before == []  # nothing written beside the course sources
    assert site.pages["intro"] == tmp_path / "rel" / "01-beginner" / "intro.html" and site.pages["intro"].is_file()
    assert 'href="01-beginner/intro.html"' in site.index.read_text(encoding="utf-8")


def test_a_page_outside_the_site_folder_is_refused(built, tmp_path, monkeypatch):
    from sampan.errors import UnsafeFileError
    from sampan.path.manifest import Lesson

    _, manifest, run_dir, *_ = built
    monkeypatch.setattr(Lesson, "relative_notebook", lambda self, root: str(tmp_path / "elsewhere" / "x.ipynb"))
    with pytest.raises(UnsafeFileError, match=r"outside the site folder.*HINT: keep every lesson notebook inside"):
        build_site(run_dir, out=tmp_path / "site", manifest=manifest)
    assert not (tmp_path / "elsewhere").exists() and not (tmp_path / "site").exists()
