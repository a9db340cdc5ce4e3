"""The teacher dashboard: a JupyterHub service behind hub login (``python -m sampan.hub.service``).

Pages under the service prefix (``/services/progress/``):

- ``/`` the class: roster, per learner and lesson not started / in progress / done,
  exercises passed, last activity; per lesson completion and the most-failed
  exercises. Needs the custom scope ``custom:progress:read`` (roles ``teacher``
  and ``assistant``); a student gets 403.
- ``/me`` a learner's own progress (any hub user).
- ``/progress.csv`` the class as CSV; ``/api/progress`` as JSON (``custom:progress:read``).
- ``POST /api/events`` a learner's server reports an event with its hub-issued token
  (scope ``custom:progress:write``); the event is stored for that token's user only.
- ``/gallery`` the dashboards learners published (``sampan publish``) and ``/gallery/USER/NAME``
  one of them, for every hub user: a read-only snapshot of its saved outputs, served with a
  Content-Security-Policy that runs no script (nothing a learner opens from someone else runs code).
  One machine only: it reads the learners' galleries under ``$SAMPAN_HUB_USERS``. When the hub runs
  the ``live`` service (``$SAMPAN_LIVE_DIR`` set, :mod:`sampan.hub.live`), each entry also links to its
  live Voilà dashboard, and this service refreshes the live service's read-only copies every few seconds.

JupyterHub and tornado are imported in :func:`make_app`, so ``import sampan.hub.service``
stays headless. The hub starts this module with the environment of a managed service
(``JUPYTERHUB_SERVICE_URL``, ``JUPYTERHUB_SERVICE_PREFIX``, ``JUPYTERHUB_API_TOKEN``).

Example:
    >>> python -m sampan.hub.service  # doctest: +SKIP
"""
from __future__ import annotations

import json
import os
import stat
import sys
from html import escape
from pathlib import Path
from typing import Any, Awaitable, Callable, NamedTuple
from urllib.parse import urlencode

READ_SCOPE = "custom:progress:read"
WRITE_SCOPE = "custom:progress:write"
STORE_ENV = "SAMPAN_PROGRESS_DB"
COURSE_ENV = "SAMPAN_HUB_COURSE"  # the course folder the hub hands out (its path.yaml lists the lessons)
STYLE = ("body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;margin:1em 0}"
         "td,th{border:1px solid #ccd;padding:4px 8px}.done{background:#d7f5dd}.in-progress{background:#fff3c4}"
         ".not-started{color:#889}"
         # the roster: one narrow column a lesson (its number; the title on hover and in the lessons table below)
         "#roster td.cell,#roster th.n{text-align:center;padding:4px 2px;min-width:1.6em}#roster th.stage{font-weight:"
         "normal;color:#556}.when{white-space:nowrap}.staff{color:#889;font-style:italic}.bar{display:inline-block;"
         "width:4em;height:.6em;background:#e4e6ee;margin-left:.4em;vertical-align:middle}.bar i{display:block;"
         "height:100%;background:#3a9a5b}.legend{color:#556}.num{color:#889;text-align:right}")


# Every word of the pages, per language; a request gets the language its browser asks for (request_language).
WORDS: dict[str, dict[str, str]] = {
    "en": {"html_lang": "en", "not started": "not started", "in progress": "in progress", "done": "done",
           "exercises": " ({n} ex.)", "class_title": "Sampan class progress", "class_heading": "Class progress",
           "learner": "learner", "role": "role", "last_activity_utc": "last activity (UTC)", "lessons": "Lessons",
           "lesson": "lesson", "done_col": "done", "most_failed": "most failed exercises",
           "csv": "Download CSV", "own_title": "My progress", "own_heading": "Progress of {name}",
           "status": "status", "nothing_yet": "nothing yet",
           "gallery_title": "Class gallery", "gallery_heading": "Dashboards published by the class",
           "dashboard": "dashboard", "live": "live", "open_live": "open live", "by": "by",
           "published_utc": "published (UTC)", "lessons_done": "lessons done", "colon": ": ",
           "legend": "✓ done · ◐ in progress, with the exercises passed · – not started. A lesson's number shows its "
                     "title on hover; the table below lists them. Teachers and assistants are not counted.",
           "student": "student", "teacher": "teacher", "assistant": "assistant",
           "staff_row": "not counted (not a student)"},
    "zh": {"html_lang": "zh-CN", "not started": "未开始", "in progress": "进行中", "done": "已完成",
           "exercises": "（{n} 道练习）", "class_title": "Sampan 班级学习进度", "class_heading": "班级学习进度",
           "learner": "学员", "role": "角色", "last_activity_utc": "最近活动（UTC）", "lessons": "课程",
           "lesson": "课程", "done_col": "已完成", "most_failed": "出错最多的练习",
           "csv": "下载 CSV", "own_title": "我的学习进度", "own_heading": "{name} 的学习进度",
           "status": "状态", "nothing_yet": "暂无记录",
           "gallery_title": "班级作品廊", "gallery_heading": "全班发布的仪表盘",
           "dashboard": "仪表盘", "live": "实时", "open_live": "打开实时页面", "by": "作者",
           "published_utc": "发布时间（UTC）", "lessons_done": "已完成课程", "colon": "：",
           "legend": "✓ 已完成 · ◐ 进行中（数字为答对的练习数）· – 未开始。鼠标停在课程编号上可看到课程名，下表列出全部课程。"
                     "教师和助教不计入统计。",
           "student": "学员", "teacher": "教师", "assistant": "助教",
           "staff_row": "不计入统计（非学员）"},
}


def request_language(accept_language: str | None) -> str:
    """The page language for a browser's ``Accept-Language``: its most preferred of Chinese (``zh*``) and English;
    the service's :func:`sampan.path.lang.default_language` when it names neither.

    Example:
        >>> from sampan.hub.service import request_language
        >>> request_language("zh-CN,zh;q=0.9,en;q=0.8")
        'zh'
    """
    ranked = []
    for i, part in enumerate((accept_language or "").split(",")):
        tag, _, params = part.strip().partition(";")
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        ranked.append((-q, i, tag.strip().lower()))
    for neg_q, _, tag in sorted(ranked):
        if neg_q < 0 and tag.split("-")[0] in WORDS:
            return tag.split("-")[0]
    from sampan.path.lang import default_language

    return default_language()


def _cell(entry: dict[str, Any] | None, t: dict[str, str]) -> str:
    status = entry["status"] if entry else "not started"
    extra = t["exercises"].format(n=entry["exercises_passed"]) if entry and entry["exercises_passed"] else ""
    return f'<td class="{escape(status.replace(" ", "-"))}">{escape(t.get(status, status))}{escape(extra)}</td>'


def _when(stamp: str | None) -> str:
    """``2026-12-03T04:00:18.123Z`` → ``2026-12-03 04:00:18`` (UTC); ``-`` when never."""
    return stamp[:19].replace("T", " ") if stamp else "-"


def _lesson(lesson: str, titles: dict[str, str] | None) -> str:
    """A lesson's title (its id on hover), or its id where the course gives no title in the page's language."""
    title = (titles or {}).get(lesson)
    return f'<span title="{escape(lesson)}">{escape(title)}</span>' if title else escape(lesson)


MARKS = {"done": "✓", "in progress": "◐", "not started": "–"}  # the roster's cells; the words are on hover


def _mark(entry: dict[str, Any] | None, t: dict[str, str], title: str) -> str:
    """One roster cell: a mark (◐ with the exercises passed so far), the lesson and the status in words on hover."""
    status = entry["status"] if entry else "not started"
    passed = entry["exercises_passed"] if entry else 0
    words = t.get(status, status) + (t["exercises"].format(n=passed) if passed else "")
    mark = MARKS.get(status, "?") + (str(passed) if status == "in progress" and passed else "")
    return (f'<td class="cell {escape(status.replace(" ", "-"))}" title="{escape(title + t["colon"] + words)}">'
            f"{mark}</td>")


def _bar(done: int, total: int) -> str:
    width = round(100 * done / total) if total else 0
    return f'{done}/{total}<span class="bar"><i style="width:{width}%"></i></span>'


def _stage_row(lessons: list[str], stages: dict[str, str] | None) -> str:
    """The roster's first header row: each stage's title over its lessons (runs of consecutive columns); empty when
    the course gives no stages."""
    if not stages:
        return ""
    runs: list[list[Any]] = []
    for lesson in lessons:
        stage = stages.get(lesson, "")
        if runs and runs[-1][0] == stage:
            runs[-1][1] += 1
        else:
            runs.append([stage, 1])
    return "".join(f'<th class="stage" colspan="{n}">{escape(stage)}</th>' for stage, n in runs)


def render_class(summary: dict[str, Any], roster: list[dict[str, Any]], last: dict[str, str], lang: str = "en",
                 titles: dict[str, str] | None = None, stages: dict[str, str] | None = None) -> str:
    """The teacher's page as HTML (every value escaped), in ``lang``; ``titles``: ``{lesson id: title}`` in
    ``lang`` (:func:`course`), the id for a lesson without one; ``stages``: ``{lesson id: stage title}`` in
    ``lang``, shown over the lesson columns.

    The roster has one narrow column a lesson, numbered in the course's order (a course of 20 lessons fits a
    laptop's screen): ✓ done, ◐ in progress with the exercises passed, – not started; each cell names the lesson
    and its status on hover. The students come first, with how many lessons each has done; teachers and
    assistants are listed after them, not counted."""
    t = WORDS[lang]
    lessons = list(summary["lessons"])
    names = [(titles or {}).get(lesson) or lesson for lesson in lessons]
    stage_row = _stage_row(lessons, stages)
    span = ' rowspan="2"' if stage_row else ""
    numbers = "".join(f'<th class="n" title="{escape(name)}">{i}</th>' for i, name in enumerate(names, 1))
    head = (f"<tr><th{span}>{t['learner']}</th><th{span}>{t['role']}</th><th{span}>{t['last_activity_utc']}</th>"
            f"<th{span}>{t['lessons_done']}</th>" + (f"{stage_row}</tr><tr>{numbers}</tr>" if stage_row else
                                                      f"{numbers}</tr>"))
    rows = []
    for u in sorted(roster, key=lambda u: u["role"] != "student"):  # students first, each group in its order
        when = max((_when(w) for w in (last.get(u["name"]), u.get("last_activity")) if w), default="-")
        row = (f"<tr><td>{escape(u['name'])}</td><td>{escape(t.get(u['role'], u['role']))}</td>"
               f'<td class="when">{escape(when)}</td>')
        if u["role"] == "student":
            mine = summary["learners"].get(u["name"], {})
            done = sum(1 for lesson in lessons if (mine.get(lesson) or {}).get("status") == "done")
            row += f'<td class="when">{_bar(done, len(lessons))}</td>' + "".join(
                _mark(mine.get(lesson), t, name) for lesson, name in zip(lessons, names))
        else:
            row += f'<td class="staff" colspan="{len(lessons) + 1}">{t["staff_row"]}</td>'
        rows.append(row + "</tr>")
    per_lesson = "".join(
        f'<tr><td class="num">{i}</td><td>{_lesson(lesson, titles)}</td>'
        f'<td class="when">{_bar(s["done"], s["learners"])}</td>'
        f"<td>{escape(', '.join(s['most_failed']) or '-')}</td></tr>"
        for i, (lesson, s) in enumerate(summary["lessons"].items(), 1))
    return (f"<!doctype html><html lang=\"{t['html_lang']}\"><head><meta charset=\"utf-8\">"
            f"<title>{t['class_title']}</title><style>{STYLE}</style></head><body>"
            f"<h1>{t['class_heading']}</h1><p class=\"legend\">{escape(t['legend'])}</p>"
            f"<table id=\"roster\">{head}{''.join(rows)}</table><h2>{t['lessons']}</h2>"
            f"<table id=\"lessons\"><tr><th>#</th><th>{t['lesson']}</th><th>{t['done_col']}</th>"
            f"<th>{t['most_failed']}</th></tr>{per_lesson}</table>"
            f"<p><a href=\"progress.csv\">{t['csv']}</a></p></body></html>")


def render_own(name: str, lessons: dict[str, dict[str, Any]], lang: str = "en",
               titles: dict[str, str] | None = None, course_lessons: list[str] | None = None) -> str:
    """A learner's own page, in ``lang`` (``titles`` as for :func:`render_class`): with the course's lesson ids
    ``course_lessons``, every lesson of the course in its order (the ones not started too) under a count of those
    done; without, the lessons the learner posted, by id."""
    t = WORDS[lang]
    order = course_lessons if course_lessons is not None else sorted(lessons)
    rows = "".join(f"<tr><td>{_lesson(lesson, titles)}</td>{_cell(lessons.get(lesson), t)}"
                   f"<td>{escape(_when((lessons.get(lesson) or {}).get('last')))}</td></tr>" for lesson in order)
    done = sum(1 for lesson in order if (lessons.get(lesson) or {}).get("status") == "done")
    count = (f'<p class="when">{t["lessons_done"]}{t["colon"]}{_bar(done, len(order))}</p>'
             if course_lessons else "")
    empty = f"<tr><td colspan=3>{t['nothing_yet']}</td></tr>"
    return (f"<!doctype html><html lang=\"{t['html_lang']}\"><head><meta charset=\"utf-8\">"
            f"<title>{t['own_title']}</title><style>{STYLE}</style></head><body>"
            f"<h1>{t['own_heading'].format(name=escape(name))}</h1>{count}<table id=\"mine\"><tr><th>{t['lesson']}</th>"
            f"<th>{t['status']}</th><th>{t['last_activity_utc']}</th></tr>{rows or empty}</table></body></html>")


CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; font-src data:; sandbox"
USERS_ENV = "SAMPAN_HUB_USERS"
LIVE_DIR_ENV = "SAMPAN_LIVE_DIR"


CATALOG_BYTES = 1 << 20  # a gallery.json `sampan publish` writes is a few kB
NOTEBOOK_BYTES = 64 << 20  # a published dashboard with its pictures; nbconvert renders larger ones slowly


def _open_beneath(home: Path, rel: str, flags: int) -> int | None:
    """A descriptor of ``home/rel`` opened with ``flags``, every folder on the way (``home`` too) opened without
    following a link, or None. The service may run as root and the learner controls everything in their home:
    a swapped-in link cannot take the open outside it, however timed."""
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    parts = rel.split("/")
    try:
        folder = os.open(home, os.O_RDONLY | os.O_DIRECTORY | nofollow)
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | nofollow, dir_fd=folder)
            os.close(folder)
            folder = inner
        return os.open(parts[-1], flags | nofollow, dir_fd=folder)
    except OSError:
        return None
    finally:
        os.close(folder)


def read_learner_file(home: Path, rel: str, limit: int) -> bytes | None:
    """The bytes of the regular file ``rel`` under a learner's ``home``, or None: reached without following a
    link (:func:`_open_beneath`), opened without blocking (a FIFO would hang the service for the class), of at
    most ``limit`` bytes."""
    fd = _open_beneath(home, rel, os.O_RDONLY | os.O_NONBLOCK)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        data = fh.read(limit + 1)
    return data if len(data) <= limit else None


def learner_folder(home: Path, rel: str) -> list[str]:
    """The names in the folder ``rel`` under a learner's ``home``, reached without following a link ([] when
    there is none)."""
    fd = _open_beneath(home, rel, os.O_RDONLY | os.O_DIRECTORY)
    if fd is None:
        return []
    try:
        return os.listdir(fd)
    finally:
        os.close(fd)


def published(users_dir: Path) -> list[tuple[str, dict[str, Any]]]:
    """``[(user, gallery entry)]`` of every learner's ``sampan publish`` gallery under ``users_dir``."""
    homes = sorted(p for p in users_dir.iterdir() if p.is_dir()) if users_dir.is_dir() else []
    return [(home.name, entry) for home in homes for entry in _catalog(home)]


def _catalog(home: Path) -> list[dict[str, Any]]:
    """The well-formed entries of one learner's gallery.json (none when it is missing or of another shape)."""
    raw = read_learner_file(home, ".sampan/gallery/gallery.json", CATALOG_BYTES)
    try:
        entries = json.loads(raw).get("dashboards", {}) if raw is not None else {}
    except (ValueError, AttributeError):
        return []
    if not isinstance(entries, dict):
        return []
    from sampan.hub.gallery import well_formed

    return [entry for _, entry in sorted(entries.items()) if well_formed(entry)]


def render_gallery(entries: list[tuple[str, dict[str, Any]]], live: bool = False, lang: str = "en") -> str:
    """The class gallery page: one link per published dashboard (its snapshot) showing its title, with its URL name
    in small text, and its live page when ``live``. Titles are the learners' text: escaped, on one line, capped
    (:func:`sampan.hub.gallery.title_of`). The page's own words are in ``lang``."""
    from sampan.hub.gallery import title_of

    t = WORDS[lang]

    def links(user: str, e: dict[str, Any]) -> str:
        name = e["name"]
        snapshot = (f'<a href="gallery/{escape(user)}/{escape(name)}"><bdi>{escape(title_of(e))}</bdi></a> '
                    f'<small><code>{escape(name)}</code></small>')
        if not live:
            return f"<td>{snapshot}</td>"
        live_page = f"../live/voila/render/{escape(user)}/{escape(name)}.ipynb"  # sampan.hub.live.live_url
        return f'<td>{snapshot}</td><td><a class="live" href="{live_page}">{t["open_live"]}</a></td>'

    rows = "".join(f"<tr>{links(user, e)}"
                   f"<td>{escape(user)}</td><td>{escape(_when(e.get('published_at')))}</td></tr>"
                   for user, e in entries)
    live_head, span = (f"<th>{t['live']}</th>", 4) if live else ("", 3)
    empty = f"<tr><td colspan={span}>{t['nothing_yet']}</td></tr>"
    return (f"<!doctype html><html lang=\"{t['html_lang']}\"><head><meta charset=\"utf-8\">"
            f"<title>{t['gallery_title']}</title><style>{STYLE}</style></head><body>"
            f"<h1>{t['gallery_heading']}</h1><table id=\"gallery\"><tr><th>{t['dashboard']}</th>{live_head}"
            f"<th>{t['by']}</th><th>{t['published_utc']}</th></tr>{rows or empty}</table></body></html>")


def render_dashboard(users_dir: Path, user: str, name: str) -> str | None:
    """A published dashboard's saved outputs as HTML (no code cells, no execution); None when unknown."""
    import nbformat
    from nbconvert import HTMLExporter

    home = users_dir / user
    if not any(entry["name"] == name for entry in _catalog(home)):
        return None
    # no link followed on the way: a learner cannot publish a link to a classmate's file (or, as root, any file)
    raw = read_learner_file(home, f".sampan/gallery/{name}.ipynb", NOTEBOOK_BYTES)
    if raw is None:
        return None
    try:
        nb = nbformat.reads(raw.decode("utf-8"), as_version=4)
    except (ValueError, UnicodeDecodeError, nbformat.reader.NotJSONError):
        return None
    html, _ = HTMLExporter(exclude_input=True, exclude_input_prompt=True,
                           exclude_output_prompt=True).from_notebook_node(nb)
    return html


def students(people: list[dict[str, Any]]) -> list[str]:
    """The names of the roster's students: completion counts them, not teachers or assistants."""
    return [u["name"] for u in people if u["role"] == "student"]


def _role(user: dict[str, Any]) -> str:
    roles = set(user.get("roles") or [])
    return next((r for r in ("teacher", "assistant") if r in roles), "teacher" if user.get("admin") else "student")


PAGED = "application/jupyterhub-pagination+json"  # JupyterHub answers one page (200 users at most) at a time


async def hub_users(get_json: Callable[[str], Awaitable[Any]], url: str) -> list[dict[str, Any]]:
    """Every user of ``GET url`` (JupyterHub's ``/hub/api/users``), page after page: ``get_json(url)`` fetches
    one page with the ``Accept`` header :data:`PAGED` and follows ``_pagination.next`` until there is none."""
    users: list[dict[str, Any]] = []
    page = await get_json(url)
    while True:
        if isinstance(page, list):  # a hub that does not page answers the plain list
            return users + page
        users += page["items"]
        after = (page.get("_pagination") or {}).get("next")
        if not after or not page["items"]:
            return users
        page = await get_json(f"{url}?{urlencode({'offset': after['offset'], 'limit': after['limit']})}")


class Course(NamedTuple):
    """The course the hub hands out, as the teacher's page shows it (:func:`course`)."""

    lessons: list[str] | None  # its lesson ids in its order; None: every lesson posted is shown, by id
    titles: dict[str, dict[str, str]]  # {lang: {lesson id: title}}, only titles the manifest gives in that language
    stages: dict[str, dict[str, str]]  # {lang: {lesson id: its stage's title}} (English where a stage has no other)


def course(course_dir: str | os.PathLike | None) -> Course:
    """The course the hub hands out (``<course_dir>/path.yaml``), read once: its lesson ids in its order (the
    teacher's page shows these columns only), their titles in each language the manifest gives (the pages show the
    id for the others) and their stages' titles. ``Course(None, {}, {})`` without a readable manifest: every posted
    lesson is shown, by id."""
    manifest = Path(course_dir) / "path.yaml" if course_dir else None
    if manifest is None or not manifest.is_file():
        return Course(None, {}, {})
    from sampan.errors import SampanError
    from sampan.path.lang import has_language
    from sampan.path.manifest import load_path

    try:
        path = load_path(manifest, check_files=False)
    except (SampanError, OSError, ValueError) as exc:
        print(f"progress service: {manifest} not read ({exc}); the teacher's page shows every lesson posted",
              file=sys.stderr, flush=True)
        return Course(None, {}, {})
    lessons = path.lessons
    titles = {lang: {x.id: x.text("title", lang) for x in lessons if has_language(x.texts.get("title", x.title), lang)}
              for lang in WORDS}
    stages = {lang: {x.id: stage.text("title", lang) for stage in path.stages for x in stage.lessons} for lang in WORDS}
    return Course([x.id for x in lessons], titles, stages)


def make_app(store_path: str | os.PathLike):
    """The tornado application of the service (JupyterHub's ``HubOAuthenticated`` handlers)."""
    from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
    from jupyterhub.utils import url_path_join
    from tornado import web
    from tornado.httpclient import AsyncHTTPClient
    from tornado.ioloop import IOLoop

    from sampan.hub.progress_store import ProgressStore, StoreFullError

    store = ProgressStore(str(store_path))
    lessons, titles, stages = course(os.environ.get(COURSE_ENV))  # the columns: the course's lessons, in its order
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/services/progress/")
    api_url, token = os.environ["JUPYTERHUB_API_URL"], os.environ["JUPYTERHUB_API_TOKEN"]

    async def get_json(url: str) -> Any:
        response = await AsyncHTTPClient().fetch(url, headers={"Authorization": f"token {token}", "Accept": PAGED})
        return json.loads(response.body)

    async def roster() -> list[dict[str, Any]]:
        users = await hub_users(get_json, url_path_join(api_url, "users"))
        return [{"name": u["name"], "role": _role(u), "last_activity": u.get("last_activity")}
                for u in sorted(users, key=lambda u: u["name"])]

    class Base(HubOAuthenticated, web.RequestHandler):
        def scopes(self) -> set[str]:
            return set(self.current_user.get("scopes", []))

        def lang(self) -> str:
            return request_language(self.request.headers.get("Accept-Language"))

        def require(self, scope: str) -> None:
            if scope not in self.scopes():
                raise web.HTTPError(403, f"needs the scope {scope}")

    class ClassHandler(Base):
        @web.authenticated
        async def get(self):
            self.require(READ_SCOPE)
            people = await roster()
            summary = await IOLoop.current().run_in_executor(None, store.class_summary, students(people), lessons)
            lang = self.lang()
            self.finish(render_class(summary, people, store.last_activity(), lang, titles.get(lang), stages.get(lang)))

    class OwnHandler(Base):
        @web.authenticated
        def get(self):
            name = self.current_user["name"]
            lang = self.lang()
            self.finish(render_own(name, store.lesson_status(name), lang, titles.get(lang), lessons))

    class JsonHandler(Base):
        @web.authenticated
        async def get(self):
            self.require(READ_SCOPE)
            people = await roster()
            summary = await IOLoop.current().run_in_executor(None, store.class_summary, students(people), lessons)
            self.finish({"roster": people, "last_activity": store.last_activity(), **summary})

    class CsvHandler(Base):
        @web.authenticated
        async def get(self):
            self.require(READ_SCOPE)
            people = await roster()
            self.set_header("Content-Type", "text/csv; charset=utf-8")
            self.set_header("Content-Disposition", 'attachment; filename="progress.csv"')
            self.finish(await IOLoop.current().run_in_executor(None, store.csv_export, students(people), lessons))

    class EventHandler(Base):
        @web.authenticated
        def post(self):
            # a valid hub token only: a browser's cookie (with or without a bogus Authorization header) may not post
            if not getattr(self, "_token_authenticated", False):
                raise web.HTTPError(403, "post events with the server's hub token")
            self.require(WRITE_SCOPE)
            try:
                event = store.add(self.current_user["name"], json.loads(self.request.body or b"null"))
            except StoreFullError as exc:
                self.set_status(429)
                self.finish({"error": str(exc)})
                return
            except (ValueError, json.JSONDecodeError) as exc:
                self.set_status(400)
                self.finish({"error": str(exc)})
                return
            self.set_status(201)
            self.finish(event)

    users_dir = Path(os.environ.get(USERS_ENV, "users"))
    live_dir = Path(os.environ[LIVE_DIR_ENV]) if os.environ.get(LIVE_DIR_ENV) else None

    # reading the learners' files and rendering a notebook take a while: off the IOLoop, which serves the class
    class GalleryHandler(Base):
        @web.authenticated
        async def get(self):
            entries = await IOLoop.current().run_in_executor(None, published, users_dir)
            self.finish(render_gallery(entries, live=live_dir is not None, lang=self.lang()))

    class DashboardHandler(Base):
        @web.authenticated
        async def get(self, user: str, name: str):
            html = await IOLoop.current().run_in_executor(None, render_dashboard, users_dir, user, name)
            if html is None:
                raise web.HTTPError(404)
            self.set_header("Content-Security-Policy", CSP)
            self.finish(html)

    return web.Application([
        (prefix, ClassHandler),
        (url_path_join(prefix, "gallery"), GalleryHandler),
        (url_path_join(prefix, r"gallery/([a-z0-9][a-z0-9._-]*)/([A-Za-z0-9][A-Za-z0-9_-]*)"), DashboardHandler),
        (url_path_join(prefix, "me"), OwnHandler),
        (url_path_join(prefix, "api/progress"), JsonHandler),
        (url_path_join(prefix, "progress.csv"), CsvHandler),
        (url_path_join(prefix, "api/events"), EventHandler),
        (url_path_join(prefix, "oauth_callback"), HubOAuthCallbackHandler),
    ], cookie_secret=os.urandom(32))


def main() -> None:
    """Serves the app on the host and port of ``JUPYTERHUB_SERVICE_URL``."""
    from urllib.parse import urlparse

    from tornado.ioloop import IOLoop

    url = urlparse(os.environ["JUPYTERHUB_SERVICE_URL"])
    store_path = Path(os.environ.get(STORE_ENV, "progress.sqlite"))
    make_app(store_path).listen(url.port, url.hostname)
    if os.environ.get(LIVE_DIR_ENV):  # keep the live service's copies of the published notebooks fresh
        from tornado.ioloop import PeriodicCallback

        from sampan.hub.live import SYNC_SECONDS, sync

        users, live = Path(os.environ.get(USERS_ENV, "users")), Path(os.environ[LIVE_DIR_ENV])
        sync(users, live)
        PeriodicCallback(lambda: sync(users, live), SYNC_SECONDS * 1000).start()
    IOLoop.current().start()


if __name__ == "__main__":  # pragma: no cover
    main()
