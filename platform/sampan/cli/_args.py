"""Argument types shared by the ``sampan`` subcommands: each refuses a bad value at parse time.

A type here raises ``argparse.ArgumentTypeError`` worded by
:func:`sampan.errors.bad_argument`, so ``sampan lab --port 99999`` exits with
status 2 and ``argument --port: Expected `--port` to be ...`` instead of a
traceback from deep inside a server.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> _ = parser.add_argument("--port", type=port, default=8888)
    >>> parser.parse_args(["--port", "8890"]).port
    8890
"""
from __future__ import annotations

import argparse
import math

from sampan.errors import bad_argument

MAX_PORT = 65535


def port(text: str) -> int:
    """A TCP port: an int from 0 to 65535 (0 lets the system pick a free one).

    Example:
        >>> port("8866")
        8866
        >>> port("99999")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: Expected `--port` to be an int from 0 to 65535 ...
    """
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not 0 <= value <= MAX_PORT:
        raise argparse.ArgumentTypeError(bad_argument(
            "--port", text, f"an int from 0 to {MAX_PORT} (0 picks a free port)", "pass --port 8888, for example"))
    return value


def positive_seconds(text: str) -> float:
    """A duration in seconds greater than 0 (``--timeout``).

    Example:
        >>> positive_seconds("90")
        90.0
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(bad_argument(
            "--timeout", text, "a number of seconds greater than 0", "pass --timeout 600, or leave it out to use "
            "each lesson's timeout from path.yaml"))
    return value


def language(text: str) -> str:
    """A course language for ``--lang``: ``en`` or ``zh`` (``zh-CN``/``zh_CN`` read as ``zh``).

    Example:
        >>> language("zh-CN")
        'zh'
        >>> language("fr")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: Expected `--lang` to be one of en, zh. Received: --lang='fr'. ...
    """
    from sampan.path.lang import normalize_language

    try:
        return normalize_language(text, "--lang")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_lang_argument(parser: argparse.ArgumentParser) -> None:
    """Adds ``--lang en|zh`` to ``parser``; its default follows the locale (``LANG``/``LC_ALL``/``LC_MESSAGES``
    starting with ``zh`` give ``zh``) and ``$SAMPAN_LANG``, read when the command runs.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_lang_argument(parser)
        >>> parser.parse_args(["--lang", "zh"]).lang
        'zh'
    """
    parser.add_argument("--lang", type=language, default=None, metavar="{en,zh}",
                        help="language of the course, UI and reports (default from the locale: LANG=zh_CN.UTF-8 → zh)")


def chosen_language(args: argparse.Namespace) -> str:
    """``args.lang``, or the locale's language when ``--lang`` was not given.

    Example:
        >>> chosen_language(argparse.Namespace(lang="zh"))
        'zh'
    """
    from sampan.path.lang import default_language

    return getattr(args, "lang", None) or default_language()
