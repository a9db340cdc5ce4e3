"""The course in two languages: one source notebook per lesson, single-language notebooks built from it.

A bilingual lesson declares ``{"sampan": {"languages": ["en", "zh"]}}`` in its notebook metadata. Its code
cells are shared; every English Markdown cell (cell metadata ``{"sampan": {"lang": "en"}}``) is followed by
its Chinese counterpart (``{"sampan": {"lang": "zh"}}``). :func:`build_notebook` keeps the shared cells
and the cells of one language, so the two generated notebooks cannot differ in code; the comments of the shared
code, and the text it prints or draws, are translated from the notebook's metadata (:func:`translate_comments`,
:func:`translate_strings`). A lesson that is not
bilingual yet builds unchanged in both languages (``sampan path list --lang zh`` marks it "（英文）").
``notebooks/CONTRIBUTING.md`` tells course authors how to write one.

Example:
    >>> from sampan.path.lang import localized, normalize_language
    >>> normalize_language("zh")
    'zh'
    >>> localized({"en": "Beginner", "zh": "入门"}, "zh")
    '入门'
"""
from __future__ import annotations

import ast
import copy
import functools
import json
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

# the language switch lives with Sampan's own words (sampan.utils.i18n), below every package that speaks
from sampan.utils.i18n import DEFAULT_LANGUAGE, LANGUAGES, default_language, normalize_language  # noqa: F401

Language = Literal["en", "zh"]
UNTRANSLATED_MARK = "（英文）"   # shown after a title that has no Chinese text yet
MIN_CJK_SHARE = 0.6           # of the prose in a Chinese cell (code, links and bracketed terms aside)
_GENERATED = "sampan-nav"          # a Markdown cell generated for both languages


def localized(value: Any, lang: str) -> str:
    """The text of a manifest field in ``lang``: a plain string, or ``{en: ..., zh: ...}`` (English fallback).

    Example:
        >>> from sampan.path.lang import localized
        >>> localized("Environment check", "zh")
        'Environment check'
    """
    if isinstance(value, Mapping):
        return str(value.get(lang) or value.get(DEFAULT_LANGUAGE) or next(iter(value.values()), ""))
    return "" if value is None else str(value)


def has_language(value: Any, lang: str) -> bool:
    """True when a manifest field has text of its own in ``lang`` (a plain string counts as English)."""
    return bool(value.get(lang)) if isinstance(value, Mapping) else lang == DEFAULT_LANGUAGE


def cell_language(cell: Mapping) -> str | None:
    """A cell's ``metadata.sampan.lang`` (``None``: shared by both languages)."""
    return (cell.get("metadata") or {}).get("sampan", {}).get("lang")


def notebook_languages(nb: Mapping) -> tuple[str, ...]:
    """The languages a notebook declares in ``metadata.sampan.languages`` (empty: English only)."""
    return tuple((nb.get("metadata") or {}).get("sampan", {}).get("languages") or ())


def is_bilingual(nb: Mapping) -> bool:
    """True when the notebook declares every language of :data:`LANGUAGES`."""
    return set(LANGUAGES) <= set(notebook_languages(nb))


def build_notebook(nb: Mapping, lang: str, nav: str | None = None) -> dict:
    """The single-language notebook: shared cells plus the cells of ``lang``, in order; ``nav`` replaces the
    generated navigation line (``sampan-nav``: :func:`sampan.path.navigation.nav_line` in ``lang``).

    Example:
        >>> from sampan.path.lang import build_notebook
        >>> nb = {"metadata": {}, "cells": [{"cell_type": "markdown", "source": "Hi",
        ...       "metadata": {"sampan": {"lang": "en"}}}, {"cell_type": "markdown", "source": "你好",
        ...       "metadata": {"sampan": {"lang": "zh"}}}]}
        >>> [c["source"] for c in build_notebook(nb, "zh")["cells"]]
        ['你好']
    """
    lang = normalize_language(lang)
    out = copy.deepcopy(dict(nb))
    cells = [(i, c) for i, c in enumerate(out["cells"]) if cell_language(c) in (None, lang)]
    out["cells"] = [c for _, c in cells]
    table, strings = comment_table(nb, lang), string_table(nb, lang)
    for i, cell in cells:
        if nav is not None and _GENERATED in (cell.get("metadata") or {}).get("tags", []):
            cell["source"] = nav
        elif (table or strings) and cell.get("cell_type") == "code":
            source = _source(cell)
            built = translate_strings(translate_comments(source, table), strings)
            problem = _translation_problem(source, built) if built != source else None
            if problem:
                from sampan.errors import UnsafeFileError

                raise UnsafeFileError(
                    f"The translations in metadata.sampan.comments.{lang} / metadata.sampan.strings.{lang} change "
                    f"what code cell {i} does, not only its words: {problem}. A translation may replace a comment's "
                    "text (one line) or a string literal (by another with the same f-string fields), nothing else: "
                    f"code hidden in the metadata would run in the {lang} course without being seen in the "
                    "notebook. HINT: fix the entry that touches this cell (check_bilingual lists what is wrong).",
                    entry=f"cells[{i}]")
            cell["source"] = built
    out.setdefault("metadata", {}).setdefault("sampan", {})["language"] = lang
    return out


# What IPython (str.splitlines) ends a line at besides "\n": a translation must not start a line of its own, where
# a "!" or "%" would run as a shell command or magic although Python sees a comment or a string.
_OTHER_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def _translation_problem(source: str, built: str) -> str | None:
    """Why ``built`` (a code cell with its comments and strings translated) does something ``source`` does not, or
    None: its shell and magic lines must be the same, and its Python the same but for the text of its strings
    (an f-string's fields included, in any order), so a translation cannot run code of its own."""
    if source.lstrip().startswith("%%"):
        return "it is a cell magic (not Python), whose text is run as it is"
    if any(built.count(ch) != source.count(ch) for ch in _OTHER_BREAKS):
        return "it adds a line break other than \\n (IPython starts a new line there)"

    def magics(code: str) -> list[str]:
        return [line for line in code.split("\n") if line.lstrip().startswith(("%", "!"))]

    if magics(built) != magics(source):
        return "it changes a shell (!) or magic (%) line"
    trees = []
    for code in (source, built):
        try:
            trees.append(ast.dump(_WordsBlanked().visit(ast.parse(_as_python(code)))))
        except SyntaxError as exc:
            return f"{'it' if code is built else 'the cell before translation'} does not parse as Python ({exc.msg})"
    return None if trees[0] == trees[1] else "its Python differs in more than the text of its strings"


def _as_python(code: str) -> str:
    """The Python that IPython runs for a code cell: its own transformations (``x = !ls`` is ``x =
    get_ipython().getoutput('ls')``, ``%time f()`` a ``run_line_magic`` call), so that a cell using IPython's syntax
    is compared as IPython runs it; without IPython, the cell with its shell and magic lines left out."""
    transformer = _ipython_transformer()
    if transformer is None:
        return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in code.split("\n"))
    return transformer.transform_cell(code)


@functools.cache
def _ipython_transformer() -> Any:
    """IPython's ``TransformerManager`` (it keeps no state between cells), or None without IPython."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        return None
    return TransformerManager()


class _WordsBlanked(ast.NodeTransformer):
    """A tree with every string's text left out (an f-string keeps its fields, sorted): two cells that differ only
    in the words they show give the same tree. The strings given to ``get_ipython()``'s methods (what IPython's
    syntax becomes: shell commands, magics) are code and stay as they are."""

    def visit_Call(self, node: Any) -> Any:
        owner = node.func.value if isinstance(node.func, ast.Attribute) else None
        if (isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "get_ipython"
                and not owner.args and not owner.keywords):
            return node  # kept whole: its arguments run as a shell command or a magic
        return self.generic_visit(node)

    def visit_Constant(self, node: Any) -> Any:
        return ast.JoinedStr(values=[]) if isinstance(node.value, str) else node

    def visit_JoinedStr(self, node: Any) -> Any:
        fields = [self.visit(v) for v in node.values if isinstance(v, ast.FormattedValue)]
        return ast.JoinedStr(values=sorted(fields, key=ast.dump))


# The code cells are shared; their comments are written in English and translated in the notebook's metadata,
# ``{"sampan": {"comments": {"zh": {"<English comment>": "<its Chinese>"}}}}`` (key: the text after "#").
# not translated: tool directives, and the exercise marker that the feedback names (sampan.path.exercise)
_DIRECTIVE = re.compile(r"^(noqa|type:|pragma|fmt:|pylint|doctest|isort|ruff)\b|^YOUR ANSWER$")
_LETTERS = re.compile(r"[A-Za-z]{2,}")
# IPython's `x = !ls` and `t = %time f()`: the rest of the line, comment included, is the command's
_IPYTHON_ASSIGN = re.compile(r"^\s*[\w.,\s]+=\s*[!%]")


def comment_table(nb: Mapping, lang: str) -> dict[str, str]:
    """The notebook's translations of its code comments into ``lang`` (empty for English or when it has none)."""
    return dict(((nb.get("metadata") or {}).get("sampan", {}).get("comments") or {}).get(lang) or {})


def code_comments(source: str) -> list[tuple[int, int, str]]:
    """The Python comments of a code cell that are prose: ``(line index, column of "#", text after "#")``.

    Tool directives (``# noqa``, ``# type: ...``) and comments without a word are left out; so is a cell that is
    not Python (a ``%%`` cell magic such as ``%%writefile``); a line magic or shell line (``%``, ``!``, and
    ``x = !ls`` / ``t = %time f()``, whose comment IPython hands to the shell or the magic) is skipped.

    Example:
        >>> from sampan.path.lang import code_comments
        >>> code_comments('x = "#1"  # the first\\n# ----\\ny = x  # noqa: F841\\nfiles = !ls  # the shell')
        [(0, 10, 'the first')]
    """
    import io
    import tokenize

    if source.lstrip().startswith("%%"):
        return []
    lines = source.split("\n")
    masked = "\n".join("" if line.lstrip().startswith(("%", "!")) or _IPYTHON_ASSIGN.match(line) else line
                        for line in lines)
    found = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(masked).readline):
            if token.type == tokenize.COMMENT:
                text = token.string.lstrip("#").strip()
                if text and _LETTERS.search(text) and not _DIRECTIVE.match(text):
                    found.append((token.start[0] - 1, token.start[1], text))
    except (tokenize.TokenError, SyntaxError):  # not Python after all: its comments stay as written
        return []
    return found


def translate_comments(source: str, table: Mapping[str, str]) -> str:
    """``source`` with each comment found in ``table`` (by its text after "#") replaced by its translation; the
    code, the "#" and its column stay, so aligned comments stay aligned.

    Example:
        >>> from sampan.path.lang import translate_comments
        >>> translate_comments("QUICK = True  # skip the slow checks", {"skip the slow checks": "跳过较慢的检查"})
        'QUICK = True  # 跳过较慢的检查'
    """
    lines = source.split("\n")
    for row, col, text in reversed(code_comments(source)):
        if text in table:
            line = lines[row]
            marks = len(line[col:]) - len(line[col:].lstrip("#"))
            lines[row] = f"{line[:col]}{'#' * marks} {table[text]}"
    return "\n".join(lines)


def string_table(nb: Mapping, lang: str) -> dict[str, str]:
    """The notebook's translations of the text its code shows (``metadata.sampan.strings.<lang>``): ``{string
    literal as written in the code: the literal that replaces it}``, e.g. ``{'f"test accuracy: {acc:.2%}"':
    'f"测试准确率：{acc:.2%}"'}``; empty for English or when it has none."""
    return dict(((nb.get("metadata") or {}).get("sampan", {}).get("strings") or {}).get(lang) or {})


def translate_strings(source: str, table: Mapping[str, str]) -> str:
    """``source`` with every occurrence of each string literal of ``table`` replaced by its translation (the
    longest first, so a literal inside a longer one is not cut).

    Example:
        >>> from sampan.path.lang import translate_strings
        >>> translate_strings('print(f"{n} images")', {'f"{n} images"': 'f"{n} 张图像"'})
        'print(f"{n} 张图像")'
    """
    for literal in sorted(table, key=len, reverse=True):
        source = source.replace(literal, table[literal])
    return source


def _literal_fields(literal: Any) -> list[str] | None:
    """The replacement fields of a string literal's source (``[]`` for a plain string), or None when it is not
    exactly one string literal."""
    import ast

    try:
        node = ast.parse(literal, mode="eval").body if isinstance(literal, str) else None
    except SyntaxError:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return []
    if isinstance(node, ast.JoinedStr):
        return sorted(ast.dump(v) for v in node.values if isinstance(v, ast.FormattedValue))
    return None


def string_problems(nb: Mapping, lang: str) -> list[str]:
    """What is wrong with ``nb``'s string translations into ``lang``: an entry that is not one string literal on
    both sides, a translation whose f-string fields (``{expression:format}``) differ from the original's, an entry
    for a literal no code cell has, a code cell that no longer parses once translated."""
    import ast

    table, problems = string_table(nb, lang), []
    where = f"metadata.sampan.strings.{lang}"
    codes = [(i, _source(c)) for i, c in enumerate(nb.get("cells", [])) if c.get("cell_type") == "code"]
    for literal, translated in table.items():
        fields, new = _literal_fields(literal), _literal_fields(translated)
        if fields is None or new is None:
            problems.append(f"{where}[{literal!r}]: both sides must be one string literal as written in Python, "
                            f"quotes included; got {translated!r}")
        elif fields != new:
            problems.append(f"{where}[{literal!r}]: the translation {translated!r} changes the f-string's fields")
        if not any(literal in code for _, code in codes):
            problems.append(f"{where} translates {literal!r}, which no code cell has")
    for i, code in codes if table else ():
        built = translate_strings(code, table)
        if built == code or code.lstrip().startswith("%%"):
            continue
        try:
            ast.parse(_as_python(built))
        except SyntaxError as exc:
            problems.append(f"cell {i} does not parse once its strings are translated ({lang}): {exc.msg}, "
                            f"line {exc.lineno}")
    return problems


def comment_problems(nb: Mapping, lang: str) -> list[str]:
    """The comments of ``nb``'s code cells with no translation into ``lang`` in its metadata, and the translations
    of comments it no longer has (an empty list when the table matches the code)."""
    table = comment_table(nb, lang)
    texts = {text for cell in nb.get("cells", []) if cell.get("cell_type") == "code"
             for _, _, text in code_comments(_source(cell))}
    problems = [f"the code comment {text!r} has no {lang} translation in metadata.sampan.comments.{lang}"
                for text in sorted(texts - set(table))]
    problems += [f"metadata.sampan.comments.{lang} translates {text!r}, a comment no code cell has"
                 for text in sorted(set(table) - texts)]
    problems += [f"metadata.sampan.comments.{lang}[{text!r}] is not one line of text" for text, value in table.items()
                 if not isinstance(value, str) or not value.strip() or "\n" in value]
    return problems


def check_bilingual(nb: Mapping) -> list[str]:
    """What keeps a bilingual notebook from being complete (an empty list when nothing does).

    Every Markdown cell must be marked ``en`` or ``zh`` (the generated ``sampan-nav`` line aside);
    each ``en`` cell is followed by its ``zh`` cell;
    a ``zh`` cell is Chinese (:func:`cjk_share` at least :data:`MIN_CJK_SHARE`); only Markdown cells
    carry a language, so the code of the two built notebooks is the same; every comment of the shared code has
    its Chinese in ``metadata.sampan.comments.zh``, and nothing else is there (:func:`comment_problems`); the
    translations of the text the code shows are sound (:func:`string_problems`).

    Example:
        >>> from sampan.path.lang import check_bilingual
        >>> check_bilingual({"metadata": {}, "cells": [{"cell_type": "markdown", "source": "Hi",
        ...                  "metadata": {"sampan": {"lang": "en"}}}]})
        ['cell 0 (en) has no zh counterpart after it']
    """
    problems, cells = [], list(nb.get("cells", []))
    for i, cell in enumerate(cells):
        lang = cell_language(cell)
        if cell.get("cell_type") != "markdown":
            if lang is not None:
                problems.append(f"cell {i} is a {cell.get('cell_type')} cell marked {lang!r}: code is shared, "
                                "only Markdown cells carry a language")
            continue
        if _GENERATED in (cell.get("metadata") or {}).get("tags", []):
            continue  # the navigation line, generated from path.yaml (sampan.path.navigation)
        if lang not in LANGUAGES:
            problems.append(f"cell {i} is a Markdown cell marked {lang!r}; mark it 'en' or 'zh'")
        elif lang == "en" and (i + 1 == len(cells) or cell_language(cells[i + 1]) != "zh"):
            problems.append(f"cell {i} (en) has no zh counterpart after it")
        elif lang == "zh":
            if i == 0 or cell_language(cells[i - 1]) != "en":
                problems.append(f"cell {i} (zh) does not follow an en cell")
            share = cjk_share(_source(cell))
            if share < MIN_CJK_SHARE:
                problems.append(f"cell {i} (zh) reads as English: {share:.0%} of its prose is Chinese, "
                                f"expected at least {MIN_CJK_SHARE:.0%}")
    return problems + comment_problems(nb, "zh") + string_problems(nb, "zh")


_STRIP = [re.compile(p, re.S) for p in (
    r"<!-- sampan-path:begin -->.*?<!-- sampan-path:end -->",  # the course listing, generated from path.yaml
    r"```.*?```", r"`[^`]*`", r"\$\$.*?\$\$", r"\$[^$]*\$", r"<[^>]+>", r"\]\([^)]*\)", r"https?://\S+",
    r"（[^）]*）", r"\([^)]*\)")]
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"[A-Za-z]{2,}")


def cjk_share(text: str) -> float:
    """The share of Chinese in ``text``'s prose: CJK characters / (CJK characters + Latin words), after
    removing code, math, HTML tags, link targets, bracketed terms and the generated course listing
    (:mod:`sampan.path.index`); 1.0 when no prose is left.

    Example:
        >>> from sampan.path.lang import cjk_share
        >>> cjk_share("动态图（dynamic graph）便于调试，`to_static` 转为静态图。")
        1.0
        >>> cjk_share("This paragraph was left in English.")
        0.0
    """
    for pattern in _STRIP:
        text = pattern.sub(" ", text)
    cjk, words = len(_CJK.findall(text)), len(_WORD.findall(text))
    return 1.0 if cjk + words == 0 else cjk / (cjk + words)


def build_course(lang: str, dest: str | Path, source: str | Path | None = None) -> Path:
    """Copies the course folder ``source`` (default ``notebooks/``) to ``dest`` with every notebook built in
    ``lang``; a built notebook newer than its source is kept (a learner's edits survive). Returns ``dest``.

    Example:
        >>> from sampan.path.lang import build_course
        >>> from sampan.utils.io import data_home
        >>> build_course("zh", data_home() / "courses" / "zh")  # doctest: +SKIP
        PosixPath('.../courses/zh')
    """
    lang = normalize_language(lang)
    source = Path(source) if source is not None else _course_root()
    dest = Path(dest)
    navs = _nav_lines(source / "path.yaml", lang)
    for file in sorted(source.rglob("*")):
        rel = file.relative_to(source)
        if file.is_dir() or any(p.startswith(".") for p in rel.parts) or "__pycache__" in rel.parts:
            continue
        _refuse_link_out(source, file, rel)
        build_file(file, dest / rel, lang, nav=navs.get(file.resolve()))
    return dest


def _refuse_link_out(source: Path, file: Path, rel: Path) -> None:
    """A course from elsewhere may ship ``notes.txt`` as a link to ``~/.ssh/id_rsa``: copying follows it, and the
    built course (on a hub, every learner's copy: :func:`sampan.hub.course.sync_course`, which skips links, gets
    a plain file) would hold the key. A link whose target lies inside the course folder is copied as its file."""
    from sampan.errors import UnsafeFileError

    if not file.is_symlink():
        return
    target = file.resolve()
    if not target.is_relative_to(source.resolve()):
        raise UnsafeFileError(
            f"The course folder {str(source)!r} holds {rel.as_posix()!r}, a link to {str(target)!r} outside it: "
            "building the course would copy that file into the built course (and every learner's copy). "
            "HINT: replace the link with the file itself, or remove it.", path=str(source), entry=rel.as_posix())


def _nav_lines(manifest: Path, lang: str) -> dict[Path, str]:
    """``{notebook: its navigation line in lang}`` for the lessons of ``manifest`` (none when it is missing or
    invalid: the lines stay as written; `sampan path list` names what is wrong with it)."""
    from sampan.path.manifest import PathManifestError, load_path
    from sampan.path.navigation import nav_line

    try:
        path = load_path(manifest, check_files=False)
    except (PathManifestError, FileNotFoundError):
        return {}
    return {lesson.notebook: nav_line(path, lesson.id, lang) for lesson in path.lessons}


def build_file(source: str | Path, target: str | Path, lang: str, nav: str | None = None) -> Path:
    """Writes ``source`` built in ``lang`` (a notebook: :func:`build_notebook`; any other file: a copy) to
    ``target``, unless ``target`` is already newer than ``source``; ``nav``: see :func:`build_notebook`.
    Returns ``target``.

    Example:
        >>> from sampan.path.lang import build_file
        >>> build_file("notebooks/dashboards/digit_playground.ipynb", "zh/digit_playground.ipynb", "zh")  # doctest: +SKIP
        PosixPath('zh/digit_playground.ipynb')
    """
    from sampan.utils.io import atomic_write_text

    source, target = Path(source), Path(target)
    if target.is_file() and target.stat().st_mtime >= source.stat().st_mtime:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    _keep_learners_edits(target)
    if source.suffix == ".ipynb":
        nb = build_notebook(json.loads(source.read_text(encoding="utf-8")), lang, nav)
        atomic_write_text(target, json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    else:
        shutil.copy2(source, target)
    atomic_write_text(_stamp(target), _sha256(target))
    return target


def _stamp(target: Path) -> Path:
    """Beside each built file, the sha256 of what was built: a copy that differs was edited by the learner."""
    return target.with_name(f".{target.name}.built")


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _keep_learners_edits(target: Path) -> None:
    """A course update never overwrites a learner's work: an edited copy is moved aside first and named."""
    import time
    import warnings

    stamp = _stamp(target)
    if not target.is_file() or (stamp.is_file() and stamp.read_text().strip() == _sha256(target)):
        return
    kept = target.with_name(f"{target.stem}.mine-{time.strftime('%Y%m%d-%H%M%S')}{target.suffix}")
    target.rename(kept)
    warnings.warn(f"The course's {target.name} was updated; your edited copy is kept as {kept.name}.",
                  UserWarning, stacklevel=3)


def built_course_dir(lang: str) -> Path:
    """Where ``sampan lab --lang`` and ``sampan dashboard --lang`` keep the built course:
    ``<data home>/courses/<lang>``."""
    from sampan.utils.io import data_home

    return data_home() / "courses" / normalize_language(lang)


def _course_root() -> Path:
    from sampan.path.manifest import default_manifest

    return default_manifest().parent


def _source(cell: Mapping) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def lesson_title(lesson, lang: str) -> str:
    """A lesson's title in ``lang``; in Chinese, a lesson not translated yet (its notebook not bilingual or
    no Chinese title in ``path.yaml``) shows its English title followed by :data:`UNTRANSLATED_MARK`.

    Example:
        >>> from sampan.path.lang import lesson_title
        >>> from sampan.path import load_path
        >>> lesson_title(load_path().lesson("environment_check"), "zh")
        '环境检查'
    """
    if lang == DEFAULT_LANGUAGE:
        return lesson.text("title", lang)
    translated = has_language(lesson.texts.get("title"), lang) and lang in notebook_languages(_read(lesson.notebook))
    return lesson.text("title", lang) if translated else lesson.text("title", DEFAULT_LANGUAGE) + UNTRANSLATED_MARK


def _read(notebook: Path) -> dict:
    try:
        return json.loads(Path(notebook).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
