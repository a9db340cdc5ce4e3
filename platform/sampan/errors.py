"""Sampan's exceptions and the one helper that words a bad-input message.

Every user-facing error says which argument was wrong, the value received,
what was expected and how to fix it. Build such messages with
:func:`bad_argument` so their wording cannot drift apart.
"""
from __future__ import annotations

from typing import Any


class SampanError(Exception):
    """Root of Sampan's own exceptions (not raised for plain bad arguments)."""


class CheckpointError(SampanError):
    """A checkpoint file is missing, corrupt, truncated or belongs to another network.

    Attributes:
        path: the checkpoint file.
        missing: parameter names the network has but the checkpoint lacks.
        unexpected: names in the checkpoint the network does not have.
        mismatched: ``(name, checkpoint_shape, network_shape)`` triples.
    """

    def __init__(self, message: str, *, path: str | None = None, missing=(), unexpected=(), mismatched=()):
        super().__init__(message)
        self.path = path
        self.missing = list(missing)
        self.unexpected = list(unexpected)
        self.mismatched = list(mismatched)


class DatasetNotFoundError(SampanError, FileNotFoundError):
    """Files of a catalog dataset are absent; the message says what to put where."""


class DatasetFileError(SampanError, ValueError):
    """A file of a catalog dataset is there but cannot be read; the message names it.

    Attributes:
        path: the unreadable file.
    """

    def __init__(self, message: str, *, path: str):
        super().__init__(message)
        self.path = path


class DataDirectoryError(SampanError, OSError):
    """The data directory (``$SAMPAN_DATA``, else ``~/.cache/sampan``) is not a folder Sampan can write."""


class UnsafeFileError(SampanError, ValueError):
    """A file from outside would run code or write outside its folder if opened; Sampan refuses it.

    Raised for pickled entries in an exported model, archive members that are links, devices,
    absolute or contain ``..``, and manifest entries pointing outside their folder.

    Attributes:
        path: the file refused.
        entry: the entry inside it that is unsafe (an archive member, a weight name, a manifest key).
    """

    def __init__(self, message: str, *, path: str | None = None, entry: str | None = None):
        super().__init__(message)
        self.path, self.entry = path, entry


class NonFiniteLossError(SampanError, FloatingPointError):
    """The loss became NaN or infinite.

    Attributes:
        epoch: the epoch (0-based) where it happened.
        step: the batch index within the epoch.
        value: the loss value.
    """

    def __init__(self, message: str, *, epoch: int, step: int, value: float):
        super().__init__(message)
        self.epoch, self.step, self.value = epoch, step, value


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def bad_argument(name: str, value: Any, expected: str, fix: str | None = None) -> str:
    """Words a bad-input message: argument, value received, expectation, fix.

    Example:
        >>> from sampan.errors import bad_argument
        >>> bad_argument("epochs", -1, "a positive int", "pass epochs=1 or more")
        'Expected `epochs` to be a positive int. Received: epochs=-1. HINT: pass epochs=1 or more.'
    """
    msg = f"Expected `{name}` to be {expected}. Received: {name}={_short(value)}."
    if fix:
        msg += f" HINT: {fix.rstrip('.')}."
    return msg


def is_number(value: Any) -> bool:
    """Whether ``value`` is a finite real number: an int or a float, not a bool, a string of digits, NaN or inf.

    Example:
        >>> from sampan.errors import is_number
        >>> is_number(0.5), is_number("0.5"), is_number(True), is_number(float("nan"))
        (True, False, False, False)
    """
    import math

    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_int(name: str, value: Any, *, minimum: int = 1, fix: str | None = None) -> int:
    """Returns ``value`` when it is an int (not a bool) of at least ``minimum``; else a ValueError naming it.

    Example:
        >>> from sampan.errors import check_int
        >>> check_int("epochs", 3)
        3
        >>> check_int("epochs", 0)
        Traceback (most recent call last):
        ...
        ValueError: Expected `epochs` to be an int >= 1. Received: epochs=0. HINT: pass epochs=1 or more.
    """
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(bad_argument(name, value, f"an int >= {minimum}", fix or f"pass {name}={minimum} or more"))
    return value


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message, or its class name when the message is empty.

    Example:
        >>> from sampan.errors import first_line
        >>> first_line(RuntimeError("shapes do not match\\n  at layer 3"))
        'shapes do not match'
        >>> first_line(IndexError())
        'IndexError'
    """
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()
    return type(exc).__name__


def outside_sampan() -> int:
    """The ``stacklevel`` that makes ``warnings.warn(..., stacklevel=outside_sampan())`` name the first caller outside
    Sampan, however deep inside Sampan the warning is raised: the learner's own line (a notebook cell, a script),
    not a Sampan helper nor, from a cell's top level, IPython's ``exec``.

    Example:
        >>> import warnings
        >>> from sampan.errors import outside_sampan
        >>> warnings.warn("heads up", stacklevel=outside_sampan())  # doctest: +SKIP
    """
    import os
    import sys

    root = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 1  # the function that warns is level 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(root):
        frame, level = frame.f_back, level + 1
    return level
