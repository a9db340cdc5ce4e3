"""A learner's dashboard gallery: their own notebooks published as Voilà dashboards.

``publish`` copies a notebook from the learner's folder into ``<data dir>/gallery/``,
takes a thumbnail of its saved outputs (headless Chromium with JavaScript off; a
placeholder when Chromium is absent) and rewrites ``index.ipynb``, the gallery page
that lists every dashboard with its picture. :func:`voila_command` serves the folder
with the project's Voilà security settings (see ``sampan dashboard``) and preheated
kernels. The gallery is a snapshot: publish again to update a dashboard.

Example:
    >>> from sampan.hub import gallery
    >>> gallery.publish("my_app.ipynb")  # doctest: +SKIP
    Published(name='my_app', ...)
    >>> [p.name for p in gallery.list_published()]  # doctest: +SKIP
    ['my_app']
"""
from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import json
import os
import re
import shutil
import sys
import unicodedata
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

from sampan.errors import UnsafeFileError, bad_argument, first_line
from sampan.utils.io import atomic_write, atomic_write_json, atomic_write_text, data_home, read_json_dict

LEARNER_HOME_ENV = "SAMPAN_LEARNER_HOME"
INDEX = "index.ipynb"
# ASCII only: the class gallery's routes (hub/service.py) and the live service (hub/live.py) take no other name
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
TITLE_CHARS = 80
PLACEHOLDER_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="320" height="200"><rect width="100%" height="100%" '
    'fill="#eef1f5"/><text x="50%" y="50%" font-family="sans-serif" font-size="18" fill="#667" '
    'text-anchor="middle">no preview</text></svg>')


@dataclass(frozen=True)
class Published:
    """One dashboard of the gallery.

    Attributes:
        name: its name (the notebook file is ``<name>.ipynb`` in the gallery).
        source: where it was published from, relative to the learner's folder.
        published_at: UTC ISO time of the last publish.
        thumbnail: ``thumbs/<name>.png`` or None (the gallery shows a placeholder).
        title: what the galleries show, in the learner's language (default: the notebook's file name without
            ``.ipynb``); :func:`list_published` gives the name for an entry published before titles.
    """

    name: str
    source: str
    published_at: str
    thumbnail: str | None = None
    title: str | None = None


def gallery_dir() -> Path:
    """``<data dir>/gallery``."""
    return data_home() / "gallery"


def learner_root() -> Path:
    """The learner's folder: ``$SAMPAN_LEARNER_HOME``, else the home directory (the hub sets it per learner)."""
    env = os.environ.get(LEARNER_HOME_ENV)
    return (Path(env).expanduser() if env else Path.home()).resolve()


def _catalog_file() -> Path:
    return gallery_dir() / "gallery.json"


def _load_catalog() -> dict[str, dict]:
    return read_json_dict(_catalog_file(), "dashboards")


def list_published() -> list[Published]:
    """The gallery's dashboards, sorted by name. An entry of another shape (a hand-edited gallery.json) is left
    out with a warning that names it; the file keeps it until the learner mends or removes it."""
    catalog, entries = _load_catalog(), []
    for key, entry in sorted(catalog.items()):
        if not well_formed(entry):
            warnings.warn(f"{_catalog_file()}: the entry {key!r} is not a dashboard as `sampan publish` writes "
                          f"it (a name of ASCII letters, digits, '_' or '-', a published_at time); mend it, or "
                          f"run `sampan publish` on its notebook again", RuntimeWarning, stacklevel=2)
            continue
        thumb = entry.get("thumbnail")
        entries.append(Published(name=entry["name"], source=str(entry.get("source") or ""),
                                 published_at=entry.get("published_at") or "",
                                 thumbnail=thumb if isinstance(thumb, str) else None, title=title_of(entry)))
    return entries


def well_formed(entry: object) -> bool:
    """Whether a gallery.json entry is a dashboard as `sampan publish` writes it (a dict with an ASCII ``name``
    and a ``published_at`` string or null). A learner may edit their own gallery.json: an entry of another shape
    must not break their gallery page, ``sampan publish --list`` or the class gallery."""
    return (isinstance(entry, dict) and isinstance(entry.get("name"), str) and bool(_NAME.match(entry["name"]))
            and isinstance(entry.get("published_at"), (str, type(None))))


def clean_title(title: str) -> str:
    """``title`` on one line, without control or format characters (bidi overrides, zero-width), at most
    :data:`TITLE_CHARS` characters."""
    line = "".join(ch for ch in " ".join(title.split()) if not unicodedata.category(ch).startswith("C"))
    return line if len(line) <= TITLE_CHARS else line[:TITLE_CHARS - 1] + "…"


def title_of(entry: dict) -> str:
    """The title a gallery shows for a gallery.json entry (:func:`clean_title`): its name when it has no title
    (published before titles) or one that is not a string (a hand-edited gallery.json)."""
    title = entry.get("title")
    return (clean_title(title) if isinstance(title, str) else "") or str(entry.get("name", ""))


def check_notebook(notebook: str | os.PathLike) -> Path:
    """The resolved notebook path; refuses files outside the learner's folder, missing files and non-notebooks.

    Raises:
        UnsafeFileError: the file (after following links) lies outside :func:`learner_root`.
        FileNotFoundError / ValueError: missing, not ``.ipynb`` or not a notebook.
    """
    path = Path(notebook).expanduser()
    if not path.is_file():
        raise FileNotFoundError(bad_argument("notebook", str(notebook), "an existing .ipynb file",
                                             "give the path of a notebook in your folder"))
    resolved, root = path.resolve(), learner_root()
    if not resolved.is_relative_to(root):
        raise UnsafeFileError(bad_argument("notebook", str(notebook), f"a notebook inside your folder {root}",
                                           "copy the notebook into your folder first; only your own notebooks "
                                           "can be published"), path=str(resolved))
    if resolved.suffix != ".ipynb":
        raise ValueError(bad_argument("notebook", str(notebook), "a .ipynb notebook", "publish a Jupyter notebook"))
    try:
        data = json.loads(resolved.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(bad_argument("notebook", str(notebook), "a Jupyter notebook (JSON)",
                                      f"the file does not parse ({exc}); save it again from JupyterLab")) from None
    if not isinstance(data, dict) or "cells" not in data or "nbformat" not in data:
        raise ValueError(bad_argument("notebook", str(notebook), "a Jupyter notebook with cells",
                                      "save it again from JupyterLab"))
    return resolved


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name) or name == Path(INDEX).stem:
        raise ValueError(bad_argument("name", name, "ASCII letters, digits, '_' or '-', starting with a letter "
                                      "or digit (at most 64, not 'index')", "pass --name my_dashboard"))
    return name


def default_name(notebook: str | os.PathLike) -> str:
    """The dashboard name ``publish`` gives a notebook: its file name, each character a URL route cannot hold
    replaced by ``_``. A name with other characters (``我的.ipynb``) would lose them all, and two such notebooks would
    share one name: it becomes its ASCII part, else ``dashboard``, plus a hash of the file name, the same each time
    (so also for names that cannot be one as they are: ``_draft``, ``index``, longer than 64).

    Example:
        >>> from sampan.hub.gallery import default_name
        >>> default_name("apps/my app.ipynb"), default_name("我的.ipynb"), default_name("数据app.ipynb")
        ('my_app', 'dashboard_7f1d9dd0', 'app_6166c210')
    """
    stem = Path(notebook).stem
    plain = _plain_name(stem)
    if plain is not None:
        return plain
    ascii_part = re.sub(r"[^A-Za-z0-9]+", "_", stem).strip("_")[:40] or "dashboard"
    return f"{ascii_part}_{hashlib.sha256(stem.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def _plain_name(stem: str) -> str | None:
    """An ASCII file name with each character other than letters, digits, ``_`` and ``-`` as ``_``, when that is a
    valid dashboard name; else None."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", stem)
    return name if stem.isascii() and _NAME.match(name) and name != Path(INDEX).stem else None


def publish(notebook: str | os.PathLike, *, name: str | None = None, title: str | None = None,
            thumbnail: bool = True) -> Published:
    """Adds (or updates) a learner's notebook in their gallery.

    Args:
        notebook: a ``.ipynb`` inside the learner's folder.
        name: the dashboard's name, ASCII letters, digits, ``_`` and ``-`` (default: :func:`default_name`, the
            notebook's file name without ``.ipynb``; a note on stderr gives the name chosen for a file name with
            other characters).
        title: what the galleries show, any language (default: the notebook's file name without ``.ipynb``,
            so ``手写数字识别.ipynb`` shows as 手写数字识别 under an ASCII name); see :func:`clean_title`.
        thumbnail: take a picture of the notebook's saved outputs with headless Chromium.

    Returns:
        The gallery entry.

    Example:
        >>> from sampan.hub.gallery import publish
        >>> publish("apps/digits.ipynb", name="digits")  # doctest: +SKIP
    """
    path = check_notebook(notebook)
    if name is None:
        name = default_name(path)
        if _plain_name(path.stem) is None:
            print(f"sampan publish: a dashboard name is part of its URL (ASCII letters, digits, '_', '-'); "
                  f"publishing {path.name} as {name} (choose another with --name)", file=sys.stderr)
    name = _check_name(name)
    if title is not None and not isinstance(title, str):
        raise ValueError(bad_argument("title", title, "a string", "pass --title 我的应用"))
    title = clean_title(title or "") or clean_title(path.stem) or name
    folder = gallery_dir()
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / f"{name}.ipynb", lambda tmp: shutil.copyfile(path, tmp))
    thumb = None
    if thumbnail:
        png = take_thumbnail(folder / f"{name}.ipynb", folder / "thumbs" / f"{name}.png")
        thumb = f"thumbs/{name}.png" if png is not None else None
    entry = Published(name=name, source=str(path.relative_to(learner_root())),
                      published_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                      thumbnail=thumb, title=title)
    catalog = _load_catalog()
    catalog[name] = asdict(entry)
    _save(catalog)
    return entry


def remove(name: str) -> None:
    """Removes a dashboard from the gallery (its copy and thumbnail; the learner's notebook stays)."""
    catalog = _load_catalog()
    if name not in catalog:
        raise KeyError(bad_argument("name", name, f"one of {', '.join(sorted(catalog)) or '(gallery is empty)'}",
                                    "run `sampan publish --list`"))
    del catalog[name]
    for leftover in (gallery_dir() / f"{name}.ipynb", gallery_dir() / "thumbs" / f"{name}.png"):
        leftover.unlink(missing_ok=True)
    _save(catalog)


def _save(catalog: dict[str, dict]) -> None:
    atomic_write_json(_catalog_file(), {"version": 1, "dashboards": catalog})
    atomic_write_text(gallery_dir() / INDEX, json.dumps(index_notebook(catalog), indent=1) + "\n")


def ensure_index() -> Path:
    """Writes the gallery page when it is missing (an empty gallery); returns its path."""
    page = gallery_dir() / INDEX
    if not page.is_file():
        _save(_load_catalog())
    return page


def _thumb_uri(entry: dict) -> str:
    """The entry's thumbnail as a data URI: only ``thumbs/<name>.png`` inside the gallery (what ``publish``
    writes), never another file a hand-edited entry names; else the placeholder."""
    png = gallery_dir() / "thumbs" / f"{entry['name']}.png"
    if entry.get("thumbnail") == f"thumbs/{entry['name']}.png" and png.is_file() and not png.is_symlink():
        return "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode("ascii")
    return "data:image/svg+xml;base64," + base64.b64encode(PLACEHOLDER_SVG.encode()).decode("ascii")


def index_notebook(catalog: dict[str, dict]) -> dict:
    """The gallery page: one markdown cell with a card (thumbnail, title, name, date, link) per dashboard."""
    from html import escape

    cards = [
        f'<a class="sampan-card" href="{escape(n)}.ipynb" style="display:inline-block;margin:8px;width:260px;'
        f'text-decoration:none;color:inherit;border:1px solid #ccd;border-radius:6px;padding:6px">'
        f'<img alt="{escape(n)}" src="{_thumb_uri(e)}" style="width:100%;height:160px;object-fit:cover"/>'
        f'<div class="tex2jax_ignore mathjax_ignore" dir="auto" style="font-weight:600">'
        f'{_markdown_text(title_of(e))}</div>'
        f'<div style="font-size:80%"><code>{escape(n)}</code> {escape(e.get("published_at") or "")}</div></a>'
        for n, e in sorted((e["name"], e) for e in catalog.values() if well_formed(e))
    ]
    body = "".join(cards) if cards else "<p>Nothing published yet: <code>sampan publish NOTEBOOK.ipynb</code></p>"
    return {
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "cells": [{"cell_type": "markdown", "id": "gallery", "metadata": {},
                   "source": f"# Dashboard gallery\n\n<div class=\"sampan-gallery\">{body}</div>\n"}],
    }


def _markdown_text(text: str) -> str:
    """``text`` as literal text in a markdown cell's HTML: HTML's (``<>&"'``), markdown's and MathJax's (``$``)
    special characters as character references."""
    return "".join(f"&#{ord(ch)};" if ch in "<>&\"'\\`*_{}[]()#+-.!|~$" else ch for ch in text)


def take_thumbnail(notebook: Path, png: Path) -> Path | None:
    """Renders the notebook's saved outputs (no code runs: JavaScript off, no kernel) and screenshots them.

    Returns None (the gallery shows a placeholder) when Playwright or Chromium is missing or rendering fails.
    """
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    try:
        from nbconvert import HTMLExporter
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not Path(chromium).is_file():
        return None
    html, _ = HTMLExporter(exclude_input=True, exclude_input_prompt=True,
                           exclude_output_prompt=True).from_filename(str(notebook))
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
            try:
                page = browser.new_page(viewport={"width": 960, "height": 600}, java_script_enabled=False)
                page.route("**/*", lambda route: route.abort() if not route.request.url.startswith("data:")
                           else route.continue_())  # no network: the page may only use inline data
                page.set_content(html, wait_until="domcontentloaded", timeout=20_000)
                png.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(png, lambda tmp: page.screenshot(path=str(tmp), type="png"))
            finally:
                browser.close()
    except (PlaywrightError, OSError) as exc:
        print(f"sampan publish: no thumbnail ({first_line(exc)})", file=sys.stderr)
        return None
    return png


def voila_command(*, port: int, pool_size: int = 1) -> list[str]:
    """The ``voila`` command serving the gallery on 127.0.0.1: ``sampan dashboard``'s security settings
    (:func:`sampan.cli.dashboard.command`) plus preheated kernels and the live dashboards'
    Content-Security-Policy (:func:`sampan.hub.live.content_security_policy`).

    Each dashboard keeps ``pool_size`` kernels started and its page pre-rendered
    (Voilà's ``preheat_kernel``), so opening it does not wait for a kernel. Voilà
    requires a token, given in its environment (:func:`sampan.cli._servers.server_env`).
    """
    from sampan.cli.dashboard import command
    from sampan.hub.live import content_security_policy

    # whoever is given the link opens what the learner published: the live dashboards' policy runs Voilà's own
    # scripts and none of the notebook's in their browser
    policy = {"headers": {"Content-Security-Policy": content_security_policy()}}
    return [*command(gallery_dir(), port=port),
            "--VoilaConfiguration.preheat_kernel=True",
            f"--VoilaConfiguration.default_pool_size={pool_size}",
            f"--Voila.tornado_settings={json.dumps(policy)}"]
