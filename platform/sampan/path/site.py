"""``sampan path site``: the executed lessons as a static HTML site, so a learner can read before running.

The pages are the notebooks of a ``sampan path run`` folder (with their outputs), rendered by nbconvert's
``HTMLExporter`` (the JupyterLab template) with its HTML sanitiser on, so a script or an event handler in a
cell's output or in a Markdown cell cannot run in the reader's browser. The site keeps the course's folder
layout (``01-beginner/first_model.html`` beside ``figures/``), so every relative link of the lessons still
works: a link to a lesson's ``.ipynb`` leads to its page, a picture a lesson shows is copied along. It needs
no JavaScript and no network: one stylesheet, pictures embedded or copied, MathJax left out (formulas read as
their TeX source). Reference solutions of the exercises are folded into a ``<details>`` element.

The chain: read the run's report → plan one page per executed lesson, in path order → render each page and
fix its links → write the index, stylesheet and pictures → swap the finished site into place (an existing
site is replaced whole; a folder that holds anything else is refused).

Example:
    >>> from sampan.path.site import build_site
    >>> site = build_site("runs/20260101-120000")  # doctest: +SKIP
    >>> site.index  # doctest: +SKIP
    PosixPath('runs/20260101-120000/site/index.html')
"""
from __future__ import annotations

import base64
import html
import os
import posixpath
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from sampan.errors import UnsafeFileError, bad_argument
from sampan.path.manifest import LearningPath, Lesson, Stage, load_path
from sampan.path.report import MESSAGES, relative_href

MARKER = ".sampan-site"           # in every built site: only such a folder is ever replaced
CSS = "_static/sampan-site.css"
SOLUTION_TAG = "solution"
DROPPED_TAGS = ("injected-parameters", "sampan-nav")   # the run's parameters; the site draws its own navigation
ASSETS = {".png", ".jpg", ".jpeg", ".gif", ".webp"}   # pictures copied into the site beside the pages
# An SVG is never copied: opened on its own (a learner clicks a link to it, or opens the picture in a new tab) it
# is a document that runs its scripts in the site's origin, and no page's policy covers it. Sanitising it would
# mean knowing every way SVG runs script (<script>, <foreignObject>, on* handlers, javascript: links, <set> or
# <animate> rewriting a link, xml-stylesheet); inside <img> the browser runs none of them and loads nothing. So a
# picture the course shows is embedded as data:image/svg+xml (a data: document opened alone has no origin of the
# site's), and a link to an SVG loses its href, with a note (_unlink_svg).
SVG = ".svg"

WORDS: dict[str, dict[str, str]] = {
    "en": {"course": "{title}: the course, executed", "all": "All lessons",
           "previous": "Previous", "next": "Next",
           "lesson_of": "{stage} · lesson {n} of {total} · outputs of a {mode} run",
           "solution": "Reference solution (open it after trying your own)",
           "intro": "Every lesson below was executed by <code>sampan path run</code> in {mode} ({run}); the pages "
                    "show that run's outputs. Run a lesson yourself in JupyterLab (<code>sampan lab</code>) to "
                    "change it.",
           "no_page": "not executed in this run", "failed_banner": "This lesson failed in this run: {reason}",
           "minutes": "{m:g} min", "built": "Built by <code>sampan path site</code> from the run {run}."},
    "zh": {"course": "{title}：已执行的课程", "all": "全部课程",
           "previous": "上一课", "next": "下一课",
           "lesson_of": "{stage} · 第 {n} 课，共 {total} 课 · {mode}运行的输出",
           "solution": "参考答案（请先自己尝试，再展开）",
           "intro": "下面每一课都由 <code>sampan path run</code> 以{mode}执行（{run}），页面展示的是这次运行的输出。"
                    "要修改并自己运行，请在 JupyterLab 中打开（<code>sampan lab</code>）。",
           "no_page": "本次运行未执行", "failed_banner": "本课在这次运行中失败：{reason}",
           "minutes": "{m:g} 分钟", "built": "由 <code>sampan path site</code> 根据运行 {run} 生成。"},
}
# the words the site shares with the run's report (its language tag, the modes, the statuses): one spelling of each
WORDS = {lang: {**{k: MESSAGES[lang][k] for k in ("html_lang", "quick", "full", "passed", "failed", "skipped",
                                                  "not_run")}, **own} for lang, own in WORDS.items()}

# Markup a lesson or an output may keep once sanitised (bleach); everything else is escaped, never executed.
_TAGS = {"a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "del", "details", "div",
         "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li",
         "mark", "ol", "p", "pre", "s", "samp", "small", "span", "strong", "sub", "summary", "sup", "table", "tbody",
         "td", "tfoot", "th", "thead", "tr", "u", "ul"}
_ATTRS = {"*": {"class", "id", "title", "lang", "dir"}, "a": {"href", "name"}, "img": {"src", "alt", "width", "height"},
          "td": {"colspan", "rowspan", "align"}, "th": {"colspan", "rowspan", "align", "scope"}, "ol": {"start"},
          "table": {"border"}, "details": {"open"}}
_DATA_IMAGE = re.compile(r"data:image/(png|jpe?g|gif|webp|svg\+xml);base64,", re.IGNORECASE)
_LINK = re.compile(r'\b(href|src)="([^"]*)"')
_ANCHOR = re.compile(r'<a(?:\s+[^\s=>"]+(?:="[^"]*")?)*\s*>')  # bleach writes every attribute value in "..."
_SVG_NOTE = "An SVG file of the course is shown only as a picture, never opened as a page (it could run a script)"

# Every page forbids scripts, frames, forms and loads from elsewhere: whatever slips past the sanitiser (a hole in a
# template, an attribute nbconvert writes unquoted) still cannot run in the reader's browser, from disk or a server.
CSP = ("default-src 'none'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; base-uri 'none'; "
       "form-action 'none'")
_CSP_META = f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'

_PAGE_TEMPLATE = r"""{%- extends 'index.html.j2' -%}
{%- block html_head_js -%}""" + _CSP_META + r"""{%- endblock html_head_js -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block notebook_css -%}<link rel="stylesheet" href="{{ resources.sampan.css }}">{%- endblock notebook_css -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block body_header -%}{{ super() }}{{ resources.sampan.header }}{%- endblock body_header -%}
{%- block body_footer -%}{{ resources.sampan.footer }}{{ super() }}{%- endblock body_footer -%}
{%- block data_mermaid scoped -%}<pre>{{ output.data['text/vnd.mermaid'] | escape_html }}</pre>{%- endblock -%}
{%- block any_cell scoped -%}
{%- if 'solution' in cell.metadata.get('tags', []) -%}
<details class="sampan-solution"><summary>{{ resources.sampan.solution }}</summary>{{ super() }}</details>
{%- else -%}{{ super() }}{%- endif -%}
{%- endblock any_cell -%}
"""

_INDEX_TEMPLATE = """<!DOCTYPE html>
<html lang="{{ w.html_lang }}">
<head><meta charset="utf-8">""" + _CSP_META + """<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>{{ title }}</title><link rel="stylesheet" href="{{ css }}"></head>
<body class="sampan-site-index"><main>
<h1>{{ title }}</h1>
<p class="sampan-intro">{{ intro }}</p>
{% for stage in stages %}
<section class="sampan-stage" id="stage-{{ stage.id }}">
<h2>{{ stage.title }}</h2>
{% if stage.description %}<p>{{ stage.description }}</p>{% endif %}
<ol class="sampan-lessons">
{% for item in stage.lessons %}
<li id="lesson-{{ item.id }}">
{% if item.href %}<a href="{{ item.href }}">{{ item.title }}</a>
{% else %}<span class="sampan-no-page">{{ item.title }}</span>
{% if item.status != "not_run" %}<em>({{ w.no_page }})</em>{% endif %}{% endif %}
<span class="sampan-status sampan-{{ item.status }}">{{ w[item.status] }}</span>
<span class="sampan-minutes">{{ item.minutes }}</span>
{% if item.summary %}<br><span class="sampan-summary">{{ item.summary }}</span>{% endif %}
</li>
{% endfor %}
</ol>
</section>
{% endfor %}
<footer class="sampan-built">{{ built }}</footer>
</main></body></html>
"""

_SITE_CSS = """
body.sampan-site-index main, .jp-Notebook main { max-width: 980px; margin: 0 auto; padding: 1em 1.5em; }
body.sampan-site-index { font-family: var(--jp-ui-font-family, sans-serif); line-height: 1.5; }
nav.sampan-nav, .sampan-failed-banner { font-family: var(--jp-ui-font-family, sans-serif); font-size: 0.95em; }
nav.sampan-nav { display: flex; flex-wrap: wrap; gap: 0.5em 1.5em; justify-content: space-between;
  padding: 0.6em 0.8em; margin: 0.8em 0; background: #f3f6fa; border: 1px solid #d7dee8; border-radius: 6px; }
nav.sampan-nav .sampan-where { color: #555; }
.sampan-failed-banner { padding: 0.6em 0.8em; background: #fdecea; border: 1px solid #e6a39b; border-radius: 6px; }
details.sampan-solution { margin: 0.6em 0; padding: 0.3em 0.6em; border: 1px dashed #b9c3cf; border-radius: 6px; }
details.sampan-solution > summary { cursor: pointer; color: #1f4e79; font-weight: 600; }
ol.sampan-lessons li { margin: 0.5em 0; }
body.sampan-site-index a, nav.sampan-nav a { color: #1f4e79; text-decoration: underline; }
.sampan-status { font-size: 0.85em; padding: 0 0.45em; border-radius: 4px; margin-left: 0.4em; }
.sampan-passed { background: #e2f0d9; } .sampan-failed { background: #f9d9d6; }
.sampan-skipped, .sampan-not_run { background: #eeeeee; }
.sampan-minutes { color: #777; font-size: 0.85em; margin-left: 0.4em; }
.sampan-summary { color: #444; }
footer.sampan-built { margin-top: 2em; color: #777; font-size: 0.85em; }
a.anchor-link { display: none; }
.jp-Collapser { display: none; }
.jp-InputArea, .jp-InputArea-editor { overflow: hidden; }
.cm-editor.cm-s-jupyter .highlight pre { padding: var(--jp-code-padding) 4px; margin: 0; font-family: inherit;
  font-size: inherit; line-height: inherit; color: inherit; }
.jp-OutputArea-output pre { line-height: inherit; font-family: inherit; }
.jp-RenderedText pre { color: var(--jp-content-font-color1); font-size: var(--jp-code-font-size); }
"""


@dataclass
class Site:
    """A built course site.

    Attributes:
        out: the site's folder; ``index`` is its front page.
        pages: lesson id → its page, for every lesson the run executed.
        missing: lessons of the path with no page (not executed in the run).
        failed: lessons that failed in the run (their pages show the error).
        language: ``"en"`` or ``"zh"``, the language of the run's lessons and of the site.
        run_dir: the run folder the pages come from.
    """

    out: Path
    pages: dict[str, Path] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    language: str = "en"
    run_dir: Path | None = None

    @property
    def index(self) -> Path:
        return self.out / "index.html"


@dataclass
class _Page:
    lesson: Lesson
    stage: Stage
    result: dict[str, Any]
    executed: Path | None        # the executed notebook in the run folder, None when the run has none
    rel: str                     # the page, relative to the site (the notebook's place in the course)


def build_site(run_dir: str | Path | None = None, *, out: str | Path | None = None, lang: str | None = None,
               manifest: str | Path | None = None, progress: bool = True) -> Site:
    """Builds the static HTML site of a path run's executed lessons.

    Args:
        run_dir: a folder written by ``sampan path run`` (holding ``report.json``). ``None`` runs the whole
            path in quick mode first (``sampan.path.run(quick=True, keep_going=True)``, with a progress bar).
        out: the site's folder; default ``<run_dir>/site``. An existing site there is replaced; a folder
            holding anything else is refused.
        lang: ``"en"`` or ``"zh"``; default the run's language. It must be the run's (the executed notebooks
            hold one language).
        manifest: the ``path.yaml``; default the one the run used, else the repository's.
        progress: show the progress bar of the run made when ``run_dir`` is None.

    Returns:
        The :class:`Site`; open ``site.index`` in a browser.

    Raises:
        ValueError: ``run_dir`` is not a run folder, ``lang`` is not the run's, or ``out`` holds other files.

    Example:
        >>> from sampan.path.site import build_site
        >>> site = build_site("runs/20260101-120000", out="site")  # doctest: +SKIP
        >>> sorted(site.pages)  # doctest: +SKIP
        ['environment_check', 'first_model', ...]
    """
    from sampan.path.lang import normalize_language
    from sampan.path.report import load_report

    lang = None if lang is None else normalize_language(lang)
    if run_dir is None:
        from sampan.path.runner import run

        run_dir = run(quick=True, keep_going=True, manifest=manifest, lang=lang, progress=progress).run_dir
    run_dir = _run_folder(run_dir)
    report = load_report(run_dir)
    lang = _language(report, lang)
    path = load_path(_manifest(manifest, report))
    target = _target(out, run_dir)
    pages = _plan(path, report, run_dir)
    site = Site(out=target, language=lang, run_dir=run_dir,
                pages={p.lesson.id: target / p.rel for p in pages if p.executed is not None},
                missing=[p.lesson.id for p in pages if p.executed is None],
                failed=[p.lesson.id for p in pages if p.result.get("status") == "failed"])
    building = target.parent / f".{target.name}.building-{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)
    try:
        _write_site(building, path, report, pages, lang, run_dir)
        _swap_in(building, target)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return site


def _run_folder(run_dir: str | Path) -> Path:
    folder = Path(run_dir).expanduser()
    if not (folder / "report.json").is_file():
        problem = "it does not exist" if not folder.exists() else "it holds no report.json"
        raise ValueError(bad_argument("run_dir", str(run_dir), "a run folder written by `sampan path run` "
                                      "(it holds report.json)", f"{problem}; pass --from runs/<timestamp>, or leave "
                                      "--from out to run the path in quick mode first"))
    return folder.resolve()


def _language(report: dict[str, Any], lang: str | None) -> str:
    ran = report.get("language") or "en"
    if lang is not None and lang != ran:
        raise ValueError(bad_argument("lang", lang, f"the language the run executed its lessons in ({ran!r})",
                                      f"leave --lang out, or run `sampan path run --lang {lang} --quick` and build "
                                      "the site from that run"))
    return ran


def _manifest(manifest: str | Path | None, report: dict[str, Any]) -> str | Path | None:
    if manifest is not None:
        return manifest
    used = report.get("manifest")
    return used if used and Path(used).is_file() else None


def _target(out: str | Path | None, run_dir: Path) -> Path:
    target = _default_target(run_dir) if out is None else Path(out).expanduser().resolve()
    fix = "pass --out with a new or empty folder (or a site built before, which is replaced)"
    if target.exists() and not target.is_dir():
        raise ValueError(bad_argument("out", str(out), "a folder for the site", f"it is a file; {fix}"))
    if target.is_dir() and any(target.iterdir()) and not (target / MARKER).is_file():
        raise ValueError(bad_argument("out", str(out), "a new or empty folder, or a site built before",
                                      f"it holds other files, which the site would replace; {fix}"))
    if target == run_dir or run_dir.is_relative_to(target):
        raise ValueError(bad_argument("out", str(out), "a folder outside the run folder's own files",
                                      f"the site would replace the run it is built from; {fix}"))
    if out is not None:  # a folder the user named; the default's parent is the run folder itself
        target.parent.mkdir(parents=True, exist_ok=True)
    return target


def _default_target(run_dir: Path) -> Path:
    """``<run_dir>/site``, refused when it is a link: a run folder from elsewhere (tar and zip keep links) could
    point it at any folder of the reader's, which the site would then be written into or replace."""
    target = run_dir / "site"
    if target.is_symlink():  # run_dir is resolved, so a `site` that is no link lies inside it
        raise UnsafeFileError(
            f"The site's default folder {target} is a link (to {os.readlink(target)}), which can lead out of the run "
            "folder; a site is never written through a link that a run folder brings along. HINT: remove the link "
            f"(rm {target}) or pass --out with a folder for the site", path=str(target), entry="site")
    return target


def _plan(path: LearningPath, report: dict[str, Any], run_dir: Path) -> list[_Page]:
    """Every lesson of the path in its order, with its executed notebook when the run has one."""
    results = {r["lesson"]: r for r in report.get("lessons", [])}
    pages = []
    for stage in path.stages:
        for lesson in stage.lessons:
            result = results.get(lesson.id, {"status": "not_run"})
            executed = None
            if result.get("output"):
                candidate = (run_dir / result["output"]).resolve()
                # a report from elsewhere cannot make the site read a file outside its run folder
                if candidate.is_file() and candidate.is_relative_to(run_dir) and candidate.suffix == ".ipynb":
                    executed = candidate
            rel = _page_path(Path(lesson.relative_notebook(path.root)).with_suffix(".html").as_posix(), lesson)
            pages.append(_Page(lesson, stage, result, executed, rel))
    return pages


def _page_path(rel: str, lesson: Lesson) -> str:
    """``rel`` when it names a file inside the site folder; a page is never written anywhere else."""
    parts = Path(rel).parts
    if not rel or Path(rel).is_absolute() or ".." in parts or ":" in rel:
        raise UnsafeFileError(
            f"The page of lesson {lesson.id!r} would be written at {rel!r}, outside the site folder (its notebook "
            f"{lesson.notebook} is not inside the course folder). HINT: keep every lesson notebook inside the "
            "folder of path.yaml, and pass --manifest with that file", path=str(lesson.notebook), entry=rel)
    return rel


def _write_site(folder: Path, path: LearningPath, report: dict[str, Any], pages: list[_Page], lang: str,
                run_dir: Path) -> None:
    folder.mkdir(parents=True)
    exporter = _exporter()
    _write(folder / CSS, _stylesheet(exporter))
    built = [p for p in pages if p.executed is not None]
    by_source = {Path(p.lesson.relative_notebook(path.root)).as_posix(): p for p in pages}
    assets: set[str] = set()
    for i, page in enumerate(built):
        neighbours = (built[i - 1] if i > 0 else None, built[i + 1] if i + 1 < len(built) else None)
        mode = "quick" if report.get("mode") == "quick" else "full"
        text = _render_page(exporter, page, neighbours, lang, mode)
        text = _relink(text, page, by_source, path.root, assets)
        _write(folder / page.rel, text)
    _write(folder / "index.html", _render_index(path, report, pages, lang, run_dir))
    _copy_assets(path.root, folder, assets)
    _write(folder / MARKER, "a course site built by `sampan path site`; rebuilding replaces this folder\n")


def _write(file: Path, text: str) -> None:
    """A plain write: the whole site is built in a temporary folder and renamed into place when complete."""
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text, encoding="utf-8")


def _exporter():
    """nbconvert's HTMLExporter with the JupyterLab template, sanitised, without scripts or widget views."""
    import jinja2
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    priority = [m for m in HTMLExporter().default_config["NbConvertBase"]["display_data_priority"]
                if m not in ("application/vnd.jupyter.widget-view+json", "application/javascript")]
    config = Config({"NbConvertBase": {"display_data_priority": priority}})
    return HTMLExporter(config=config, template_name="lab", template_file="sampan_page.html.j2",
                        extra_loaders=[jinja2.DictLoader({"sampan_page.html.j2": _PAGE_TEMPLATE})],
                        sanitize_html=True, filters={"clean_html": clean_html}, exclude_anchor_links=True)


def clean_html(element: Any) -> str:
    """Sanitises HTML from a lesson or an output (bleach): the markup of a document stays, scripts go.

    nbconvert's own ``clean_html`` keeps only bleach's few inline tags, so headings, paragraphs, pictures
    and tables of every Markdown cell would be escaped into visible tags; this one keeps document markup
    (:data:`_TAGS`), drops event handlers and styles, allows ``http(s)``/``mailto``/relative links and
    ``data:image/...`` pictures, and escapes everything else (``<script>`` shows as text, never runs).

    Example:
        >>> from sampan.path.site import clean_html
        >>> clean_html('<h2>Loss</h2><img src="x.png" onerror="alert(1)"><script>alert(2)</script>')
        '<h2>Loss</h2><img src="x.png">&lt;script&gt;alert(2)&lt;/script&gt;'
    """
    import bleach

    text = element.decode() if isinstance(element, bytes) else str(element)
    return bleach.clean(text, tags=_TAGS, attributes=_allowed_attribute,
                        protocols={"http", "https", "mailto", "data"}, strip_comments=True)


def _allowed_attribute(tag: str, name: str, value: str) -> bool:
    if name not in _ATTRS["*"] | _ATTRS.get(tag, set()):
        return False
    if value.strip().lower().startswith("data:"):
        return tag == "img" and name == "src" and bool(_DATA_IMAGE.match(value.strip()))
    return True


def _stylesheet(exporter) -> str:
    """JupyterLab's light theme and notebook styles (as nbconvert ships them) plus the site's own rules."""
    for base in exporter.template_paths:
        static = Path(base) / "static"
        if (static / "index.css").is_file() and (static / "theme-light.css").is_file():
            lab = (static / "index.css").read_text(encoding="utf-8")
            theme = (static / "theme-light.css").read_text(encoding="utf-8")
            return f"{lab}\n{theme}\n{_SITE_CSS}"
    return _SITE_CSS  # pragma: no cover - nbconvert always ships the lab template


def _render_page(exporter, page: _Page, neighbours: tuple[_Page | None, _Page | None], lang: str,
                 mode: str) -> str:
    import nbformat

    words = WORDS[lang]
    nb = nbformat.read(page.executed, as_version=4)
    nb.cells = [c for c in nb.cells if not set(c.get("metadata", {}).get("tags", [])) & set(DROPPED_TAGS)]
    title = page.lesson.text("title", lang)
    nb.metadata["title"] = title
    nb.metadata.pop("widgets", None)
    _plain_image_metadata(nb)
    up = _up(page.rel)
    nav = _nav(page, neighbours, lang, up, words[mode])
    banner = ""
    if page.result.get("status") == "failed":
        reason = html.escape(str(page.result.get("reason", "")))
        banner = f'<p class="sampan-failed-banner">{words["failed_banner"].format(reason=reason)}</p>'
    resources = {"sampan": {"css": up + CSS, "header": nav + banner, "footer": nav,
                            "solution": html.escape(words["solution"])},
                 "metadata": {"name": title}, "language_code": words["html_lang"]}
    body, _ = exporter.from_notebook_node(nb, resources=resources)
    return body


def _plain_image_metadata(nb) -> None:
    """Keeps only numeric picture sizes in the outputs' metadata, and no file names.

    nbconvert's template writes ``width=`` and ``height=`` unquoted from the metadata, so a notebook from elsewhere
    with ``"width": "1 onerror=..."`` would add an event handler; ``filenames`` would point a picture at any file.
    """
    for cell in nb.cells:
        for output in cell.get("outputs", ()):
            metadata = output.get("metadata")
            if not isinstance(metadata, dict):
                continue
            metadata.pop("filenames", None)
            for holder in [metadata, *(v for v in metadata.values() if isinstance(v, dict))]:
                for key in ("width", "height"):
                    value = holder.get(key)
                    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                        del holder[key]


def _nav(page: _Page, neighbours: tuple[_Page | None, _Page | None], lang: str, up: str, mode: str) -> str:
    words = WORDS[lang]
    lessons = page.stage.lessons
    where = words["lesson_of"].format(stage=page.stage.text("title", lang), mode=mode,
                                      n=[x.id for x in lessons].index(page.lesson.id) + 1, total=len(lessons))
    parts = [f'<a href="{up}index.html">{html.escape(words["all"])}</a>',
             f'<span class="sampan-where">{html.escape(where)}</span>']
    for key, other in zip(("previous", "next"), neighbours):
        if other is not None:
            href = relative_href(posixpath.relpath(other.rel, posixpath.dirname(page.rel) or "."))
            label = f"{'← ' if key == 'previous' else ''}{words[key]}: {other.lesson.text('title', lang)}"
            label += " →" if key == "next" else ""
            parts.append(f'<a class="sampan-{key}" rel="{"prev" if key == "previous" else "next"}" '
                         f'href="{html.escape(href)}">{html.escape(label)}</a>')
    return f'<nav class="sampan-nav">{" ".join(parts)}</nav>'


def _up(rel: str) -> str:
    """The relative way from a page back to the site's root (``"../"`` for ``01-beginner/x.html``)."""
    return "../" * rel.count("/")


def _relink(text: str, page: _Page, by_source: dict[str, _Page], root: Path, assets: set[str]) -> str:
    """Points the page's relative links at the site: lesson notebooks → their pages, pictures → copied files
    (an SVG picture → embedded, a link to an SVG → none; see :data:`SVG`)."""
    here = posixpath.dirname(page.rel)

    def fix(match: re.Match) -> str:
        attr, raw = match.group(1), html.unescape(match.group(2))
        parts = urlsplit(raw)
        if parts.scheme or parts.netloc or not parts.path or raw.startswith("/"):
            return match.group(0)
        target = posixpath.normpath(posixpath.join(here, parts.path))
        if target.startswith("../") or target == "..":
            return match.group(0)
        fragment = f"#{parts.fragment}" if parts.fragment else ""
        if target.endswith(".ipynb"):
            other = by_source.get(target)
            if other is not None and other.executed is not None:
                new = relative_href(posixpath.relpath(other.rel, here or ".")) + fragment
            else:
                anchor = f"#lesson-{other.lesson.id}" if other is not None else ""
                new = posixpath.relpath("index.html", here or ".") + anchor
            return f'{attr}="{html.escape(new)}"'
        suffix = Path(target).suffix.lower()
        source = _course_file(root, target) if suffix in ASSETS | {SVG} else None
        if attr == "src" and suffix == SVG and source is not None:
            return f'src="data:image/svg+xml;base64,{base64.b64encode(source.read_bytes()).decode()}"'
        if suffix in ASSETS and source is not None:
            assets.add(target)
        return match.group(0)

    return _LINK.sub(fix, _ANCHOR.sub(_unlink_svg, text))


def _unlink_svg(match: re.Match) -> str:
    """An ``<a>`` to an SVG file of the site's folder keeps its text and loses its link, with a note as its title."""
    tag = match.group(0)
    href = re.search(r'\shref="([^"]*)"', tag)
    if href is None:
        return tag
    parts = urlsplit(html.unescape(href.group(1)))
    if parts.scheme or parts.netloc or not unquote(parts.path).lower().endswith(SVG):
        return tag  # an SVG elsewhere opens in its own origin
    kept = re.sub(r'\s(?:href|title)="[^"]*"', "", tag[2:-1])
    return f'<a{kept} title="{html.escape(_SVG_NOTE)}">'


def _course_file(root: Path, rel: str) -> Path | None:
    """The course's file at ``rel``, or None when there is none or it lies outside the course folder (a link)."""
    source = (root / rel).resolve()
    return source if source.is_file() and source.is_relative_to(root.resolve()) else None


def _copy_assets(root: Path, folder: Path, assets: set[str]) -> None:
    """The course's pictures (``figures/``) and every picture a page links to, at the same place as in the course."""
    figures = root / "figures"
    wanted = set(assets)
    if figures.is_dir():
        wanted |= {p.relative_to(root).as_posix() for p in figures.iterdir() if p.suffix.lower() in ASSETS}
    for rel in sorted(wanted):
        source = _course_file(root, rel)  # never a file outside the course folder
        if source is not None:
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, folder / rel)


def _render_index(path: LearningPath, report: dict[str, Any], pages: list[_Page], lang: str, run_dir: Path) -> str:
    import jinja2
    from markupsafe import Markup

    words = WORDS[lang]
    run = html.escape(run_dir.name)
    stages = []
    for stage in path.stages:
        items = [{"id": p.lesson.id, "title": p.lesson.text("title", lang), "summary": p.lesson.text("summary", lang),
                  "href": relative_href(p.rel) if p.executed is not None else None,
                  "status": p.result.get("status", "not_run"),
                  "minutes": words["minutes"].format(m=p.lesson.minutes.get("full", 0))}
                 for p in pages if p.stage.id == stage.id]
        stages.append({"id": stage.id, "title": stage.text("title", lang),
                       "description": stage.text("description", lang), "lessons": items})
    mode = words["quick" if report.get("mode") == "quick" else "full"]
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return env.from_string(_INDEX_TEMPLATE).render(
        w=words, title=words["course"].format(title=path.text("title", lang)), css=CSS, stages=stages,
        intro=Markup(words["intro"].format(mode=mode, run=run)), built=Markup(words["built"].format(run=run)))


def _swap_in(building: Path, target: Path) -> None:
    """Replaces ``target`` (absent, empty, or a site built before) by the finished ``building`` folder."""
    old = None
    if target.exists():
        old = target.parent / f".{target.name}.old-{os.getpid()}"
        target.rename(old)
    building.rename(target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
