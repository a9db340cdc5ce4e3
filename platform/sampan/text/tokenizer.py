"""Vocabularies and tokenizers for text classification, with no external segmenter.

:class:`CharTokenizer` splits into characters, which suits Chinese (each
character a token); :class:`WordTokenizer` splits with a regular expression,
which suits space-separated languages. Both build a :class:`Vocab` and
``encode`` batches into padded int64 tensors (padding id 0).

Example:
    >>> from sampan.text import CharTokenizer
    >>> tok = CharTokenizer()
    >>> vocab = tok.build_vocab(["很好看", "不好看"])
    >>> tok.encode(["很好", "不好看啊"], max_len=4).tolist()
    [[5, 2, 0, 0], [4, 2, 3, 1]]
"""
from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sampan.errors import bad_argument, check_int
from sampan.utils.io import atomic_write_json

__all__ = ["CharTokenizer", "Tokenizer", "Vocab", "WordTokenizer"]

_FORMAT = "sampan.vocab"
# The longest character n-gram a tokenizer file may ask for: tokenizing n characters builds n tokens of up to
# ``ngram`` characters each, so a file with ngram=10**9 made one 100,000-character text take 10 GB.
MAX_FILE_NGRAM = 16


class Vocab:
    """Token <-> id table with ``<pad>`` at id 0 and ``<unk>`` at id 1.

    Args:
        tokens: the other tokens, in id order (duplicates and the special tokens are skipped).
        pad_token: the padding token (id 0).
        unk_token: the token for anything unknown (id 1).

    Example:
        >>> from sampan.text import Vocab
        >>> v = Vocab.build([["a", "b", "a"], ["c"]], min_freq=1)
        >>> v.tokens, v["a"], v["zzz"]
        (['<pad>', '<unk>', 'a', 'b', 'c'], 2, 1)
    """

    def __init__(self, tokens: Iterable[str] = (), *, pad_token: str = "<pad>", unk_token: str = "<unk>"):
        self.pad_token, self.unk_token = pad_token, unk_token
        self.tokens: list[str] = [pad_token, unk_token]
        self._ids: dict[str, int] = {pad_token: 0, unk_token: 1}
        for token in tokens:
            if token not in self._ids:
                self._ids[token] = len(self.tokens)
                self.tokens.append(token)

    pad_id = 0
    unk_id = 1

    @classmethod
    def build(
        cls, token_lists: Iterable[Iterable[str]], *, min_freq: int = 1, max_size: int | None = None, **kwargs: Any
    ) -> "Vocab":
        """Counts tokens and keeps the frequent ones, most frequent first (ties in code-point order).

        Args:
            token_lists: one list of tokens per text.
            min_freq: drop tokens seen fewer times.
            max_size: the largest vocabulary, the two special tokens included.
            **kwargs: ``pad_token`` / ``unk_token``.
        """
        if not isinstance(min_freq, int) or min_freq < 1:
            raise ValueError(bad_argument("min_freq", min_freq, "an int >= 1", "pass min_freq=1 to keep every token"))
        if max_size is not None and (not isinstance(max_size, int) or max_size < 2):
            raise ValueError(bad_argument("max_size", max_size, "None or an int >= 2 (room for <pad> and <unk>)",
                                          "pass max_size=None for no limit"))
        counts = Counter(token for tokens in token_lists for token in tokens)
        ranked = sorted((t for t, c in counts.items() if c >= min_freq), key=lambda t: (-counts[t], t))
        vocab = cls(ranked, **kwargs)
        if max_size is not None:
            vocab = cls(vocab.tokens[2:max_size], **kwargs)
        return vocab

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: str) -> bool:
        return token in self._ids

    def __getitem__(self, token: str) -> int:
        return self._ids.get(token, 1)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and (self.tokens, self.pad_token, self.unk_token) == (
            other.tokens, other.pad_token, other.unk_token)

    def __repr__(self) -> str:
        return f"Vocab(size={len(self)}, pad={self.pad_token!r}, unk={self.unk_token!r})"

    def to_ids(self, tokens: Iterable[str]) -> list[int]:
        """Ids of ``tokens``; unknown ones map to :attr:`unk_id`."""
        return [self._ids.get(t, 1) for t in tokens]

    def to_tokens(self, ids: Iterable[int]) -> list[str]:
        """Tokens of ``ids``."""
        return [self.tokens[int(i)] for i in ids]

    def to_dict(self) -> dict[str, Any]:
        return {"format": _FORMAT, "version": 1, "pad_token": self.pad_token, "unk_token": self.unk_token,
                "tokens": self.tokens[2:]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Vocab":
        """A vocabulary from :meth:`to_dict`'s dict; refuses, by name, a dict of another shape and a token list
        with a repeat or a special token in it (the ids after it would shift, and a trained model's embedding
        rows with them)."""
        fix = "load a file written by Vocab.save (or Tokenizer.save)"
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise ValueError(bad_argument("data", _brief(data), f"a dict written by Vocab.to_dict "
                                          f"(format {_FORMAT!r})", fix))
        for key, kind in (("pad_token", str), ("unk_token", str), ("tokens", list)):
            if not isinstance(data.get(key), kind):
                raise ValueError(bad_argument(f"data[{key!r}]", _brief(data.get(key)), f"a {kind.__name__}", fix))
        seen = {data["pad_token"], data["unk_token"]}
        for i, token in enumerate(data["tokens"]):
            if not isinstance(token, str) or token in seen:
                raise ValueError(bad_argument(f"data['tokens'][{i}]", token, "a string listed once, not <pad> or "
                                              "<unk>", f"{fix}: each token's id is its place in the list"))
            seen.add(token)
        return cls(data["tokens"], pad_token=data["pad_token"], unk_token=data["unk_token"])

    def save(self, path: str | Path) -> Path:
        """Writes the vocabulary as JSON, atomically."""
        return atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> "Vocab":
        """Reads a vocabulary written by :meth:`save`."""
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


def _str_list(texts: Any) -> list[str]:
    """``texts`` (any iterable of str but a str itself: a list, a NumPy array, a pandas Series) as a list."""
    if not isinstance(texts, (bytes, dict)) and isinstance(texts, Iterable):
        items = list(texts)
        if all(isinstance(t, str) for t in items):
            return items
    raise TypeError(bad_argument("texts", texts, "a str (one text) or an iterable of str (list, array, Series)",
                                 "pass [text] for one text, or list(texts)"))


class Tokenizer:
    """Base class: split text into tokens (:meth:`tokenize`), map them through a :class:`Vocab`.

    Args:
        vocab: an existing vocabulary, or None to build one with :meth:`build_vocab`.
        lower: lower-case text before splitting.
    """

    kind = "base"

    def __init__(self, vocab: Vocab | None = None, *, lower: bool = True):
        self.vocab = vocab
        self.lower = lower

    def tokenize(self, text: str) -> list[str]:
        raise NotImplementedError

    def build_vocab(self, texts: Iterable[str], *, min_freq: int = 1, max_size: int | None = None) -> Vocab:
        """Builds, keeps and returns the vocabulary of ``texts`` (see :meth:`Vocab.build`)."""
        self.vocab = Vocab.build((self.tokenize(t) for t in texts), min_freq=min_freq, max_size=max_size)
        return self.vocab

    def _require_vocab(self) -> Vocab:
        if self.vocab is None:
            raise RuntimeError(f"{type(self).__name__} has no vocabulary yet. HINT: call "
                               "tokenizer.build_vocab(train_texts) first, or pass vocab=Vocab.load(path).")
        return self.vocab

    def __call__(self, text: str) -> list[int]:
        """Ids of one text, without padding or truncation."""
        return self._require_vocab().to_ids(self.tokenize(text))

    def encode(self, texts: str | Iterable[str], max_len: int | None = None) -> torch.Tensor:
        """Token ids as an int64 tensor, truncated to / right-padded with 0 up to ``max_len``.

        Args:
            texts: one text (gives ``[max_len]``) or several (gives ``[B, max_len]``): a list, a tuple,
                a NumPy array or a pandas Series of str, any iterable of str.
            max_len: the length; None pads to the longest text.
        """
        single = isinstance(texts, str)
        if not single:
            texts = _str_list(texts)
        if max_len is not None and (not isinstance(max_len, int) or isinstance(max_len, bool) or max_len < 1):
            raise ValueError(bad_argument("max_len", max_len, "None or a positive int", "pass max_len=128"))
        rows = [self(t) for t in ([texts] if single else texts)]
        length = max_len or max((len(r) for r in rows), default=1) or 1
        out = torch.zeros(len(rows), length, dtype=torch.int64)
        for i, row in enumerate(rows):
            row = row[:length]
            out[i, : len(row)] = torch.tensor(row, dtype=torch.int64)
        return out[0] if single else out

    def decode(self, ids: Sequence[int] | torch.Tensor, *, skip_pad: bool = True) -> str:
        """Tokens of one id sequence joined back into text (pads dropped, unknown tokens as ``<unk>``)."""
        vocab = self._require_vocab()
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < len(vocab)]
        if bad:
            raise ValueError(bad_argument("ids", bad[0], f"ids of this vocabulary, 0 to {len(vocab) - 1}",
                                          "decode ids that this tokenizer's encode gave"))
        return self._join(vocab.to_tokens(i for i in ids if not (skip_pad and i == vocab.pad_id)))

    def _join(self, tokens: list[str]) -> str:
        return "".join(tokens)

    def _config(self) -> dict[str, Any]:
        return {"lower": self.lower}

    def save(self, path: str | Path) -> Path:
        """Writes the tokenizer's settings and vocabulary as one JSON file, atomically."""
        return atomic_write_json(path, {"tokenizer": self.kind, **self._config(),
                                        "vocab": self._require_vocab().to_dict()})

    @staticmethod
    def load(path: str | Path) -> "Tokenizer":
        """Reads a tokenizer written by :meth:`save` (a :class:`CharTokenizer` or :class:`WordTokenizer`)."""
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        kinds = {cls.kind: cls for cls in (CharTokenizer, WordTokenizer)}
        kind = data.pop("tokenizer", None) if isinstance(data, dict) else None
        if kind not in kinds:
            raise ValueError(bad_argument("path", str(path), f"a tokenizer file of kind {sorted(kinds)}",
                                          "load a file written by Tokenizer.save"))
        settings = kinds[kind](None)._config()  # the settings this kind saves
        unknown = sorted(set(data) - set(settings) - {"vocab"})
        if unknown or "vocab" not in data:
            raise ValueError(bad_argument("path", str(path), f"a {kind} tokenizer file with the keys "
                                          f"{sorted(['tokenizer', 'vocab', *settings])}",
                                          "load a file written by Tokenizer.save" + (
                                              f" (this one has {unknown})" if unknown else " (no 'vocab')")))
        vocab = Vocab.from_dict(data.pop("vocab"))
        ngram = data.get("ngram", 1)
        if isinstance(ngram, bool) or not isinstance(ngram, int) or not 1 <= ngram <= MAX_FILE_NGRAM:
            raise ValueError(bad_argument("path", str(path), f"a tokenizer file whose ngram is an int from 1 to "
                                          f"{MAX_FILE_NGRAM}", f"its ngram {_brief(ngram)} makes the token at each "
                                          "character that many characters long, so a text of n characters takes "
                                          "up to n x ngram (a file from someone else could freeze the kernel on a "
                                          "long text); build the tokenizer in code with the ngram you want"))
        if "pattern" in data:
            problem = _slow_pattern(data["pattern"])
            if problem:
                raise ValueError(bad_argument("path", str(path), "a tokenizer file whose pattern matches in time "
                                              "linear in the text", f"its pattern {_brief(data['pattern'])} {problem} "
                                              "(a file from someone else could hang the kernel on a long text); "
                                              "build the tokenizer in code with the pattern you want"))
        return kinds[kind](vocab, **data)


def _slow_pattern(pattern: Any) -> str | None:
    """Why a token pattern read from a file could take exponential time on some text (a repeat inside a repeat,
    alternatives inside a repeat, back-references or look-arounds), or None; Python's ``re`` has no time limit.

    Example:
        >>> _slow_pattern(r"\\w+|[^\\w\\s]") is None, _slow_pattern(r"(a+)+$")
        (True, 'repeats a group that repeats or branches')
    """
    try:
        import re._parser as sre_parse  # the parser behind re.compile (Python 3.11+)
    except ImportError:  # Python 3.10
        import sre_parse

    if not isinstance(pattern, str) or len(pattern) > 200:
        return "is not a string of at most 200 characters"
    try:
        tree = sre_parse.parse(pattern)
    except re.error as exc:
        return f"does not compile ({exc})"
    # possessive repeats and atomic groups came with Python 3.11
    repeats = {sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT, getattr(sre_parse, "POSSESSIVE_REPEAT", None)}
    groups = {sre_parse.SUBPATTERN, getattr(sre_parse, "ATOMIC_GROUP", None)}

    def walk(items, inside_repeat: bool) -> str | None:
        for op, arg in items:
            if op in (sre_parse.GROUPREF, sre_parse.GROUPREF_EXISTS, sre_parse.ASSERT, sre_parse.ASSERT_NOT):
                return "uses a back-reference or a look-around"
            if op in repeats:
                low, high, body = arg
                if inside_repeat and high > 1:
                    return "repeats a group that repeats or branches"
                found = walk(body, inside_repeat or high > 1)
            elif op is sre_parse.BRANCH:
                if inside_repeat:
                    return "repeats a group that repeats or branches"
                found = next((w for branch in arg[1] if (w := walk(branch, inside_repeat))), None)
            elif op in groups:
                found = walk(arg[-1], inside_repeat)
            else:
                found = None
            if found:
                return found
        return None

    return walk(tree, False)


def _brief(value: Any) -> Any:
    """A value short enough for an error message."""
    text = repr(value)
    return value if len(text) <= 80 else text[:77] + "..."


class CharTokenizer(Tokenizer):
    """One token per character, whitespace dropped; works for Chinese without a segmenter.

    With ``ngram=n`` the token at each character is the ``n`` characters starting there
    (the last ones end with ``</s>``), so an n-gram sequence lines up position by position
    with the character sequence: feed both to ``TextCNN(..., ngram_vocab_size=...)``.

    Args:
        vocab: an existing vocabulary, or None.
        lower: lower-case first.
        ngram: characters per token, 1 (characters) or more (character n-grams).

    Example:
        >>> from sampan.text import CharTokenizer
        >>> CharTokenizer().tokenize("很 好Ok")
        ['很', '好', 'o', 'k']
        >>> CharTokenizer(ngram=2).tokenize("不好看")
        ['不好', '好看', '看</s>']
    """

    kind = "char"
    END = "</s>"

    def __init__(self, vocab: Vocab | None = None, *, lower: bool = True, ngram: int = 1):
        check_int("ngram", ngram, fix="pass ngram=1 (characters) or ngram=2")
        super().__init__(vocab, lower=lower)
        self.ngram = ngram

    def tokenize(self, text: str) -> list[str]:
        text = text.lower() if self.lower else text
        chars = [ch for ch in text if not ch.isspace()]
        if self.ngram == 1:
            return chars
        joined = "".join(chars)
        return [joined[i:i + self.ngram] + (self.END if i + self.ngram > len(joined) else "")
                for i in range(len(joined))]

    def _join(self, tokens: list[str]) -> str:
        """The text again: with n-grams, each token's first character (one token per character), then what the
        last token holds past it, which is more text when ``encode`` truncated. ``<unk>`` / ``<pad>`` stay whole."""
        if self.ngram == 1 or not tokens:
            return "".join(tokens)
        vocab = self._require_vocab()
        special = {vocab.unk_token, vocab.pad_token}
        text = "".join(t if t in special else t[:1] for t in tokens)
        last = tokens[-1]
        if last not in special:
            text += last[1:].split(self.END, 1)[0]
        return text

    def _config(self) -> dict[str, Any]:
        return {"lower": self.lower, "ngram": self.ngram}

    _END_KEY = 0x110000  # one past the last code point: stands for END (and what follows it) in an n-gram's key

    def _corpus_ids(self, texts: Sequence[str], gap: int) -> np.ndarray:
        """``self(text)`` for every text, each followed by ``gap`` zeros, as one int64 array (``ppmi_embeddings``).

        :meth:`tokenize`'s rule, on the whole corpus at once: the texts' characters (lower-cased, whitespace
        dropped) become code points in one array, every n-gram of up to 3 characters an integer key (its code points
        in base 0x110001, END as 0x110000), found in the vocabulary's sorted keys. Millions of characters take a
        fraction of a second, where calling the tokenizer text by text took seconds. Longer n-grams go text by text.
        """
        vocab, n = self._require_vocab(), self.ngram
        if n > 3:  # the keys would not fit in int64
            return np.concatenate([np.zeros(0, dtype=np.int64)] + [
                np.r_[np.asarray(self(text), dtype=np.int64), np.zeros(gap, dtype=np.int64)] for text in texts])
        cleaned = ["".join((text.lower() if self.lower else text).split()) for text in texts]
        keys, lengths = self._ngram_keys(cleaned)
        known, ids = self._vocab_keys()
        found = np.searchsorted(known, keys)  # the last key is larger than any: every index is in range
        out = np.zeros(len(keys) + gap * len(cleaned), dtype=np.int64)
        out[np.arange(len(keys)) + np.repeat(np.arange(len(cleaned)) * gap, lengths)] = np.where(
            known[found] == keys, ids[found], vocab.unk_id)
        return out

    def _ngram_keys(self, strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """The key of the n-gram that starts at each character of ``strings`` (its code points in base 0x110001,
        END and what follows it as 0x110000), one array for all of them; and each string's length."""
        lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
        points = np.frombuffer("".join(strings).encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.int64)
        total = len(points)
        # characters left in its string at each position (itself included): an n-gram that runs past it ends in END
        left = np.repeat(np.cumsum(lengths), lengths) - np.arange(total)
        padded = np.concatenate([points, np.full(self.ngram, self._END_KEY, dtype=np.int64)])
        keys = np.zeros(total, dtype=np.int64)
        for k in range(self.ngram):
            keys = keys * (self._END_KEY + 1) + np.where(left > k, padded[k:k + total], self._END_KEY)
        return keys, lengths

    def _vocab_keys(self) -> tuple[np.ndarray, np.ndarray]:
        """The keys of the vocabulary's tokens that :meth:`tokenize` can give, sorted, and their ids; then one key
        larger than any (an unknown token's place)."""
        vocab = self._require_vocab()
        chars, ids = [], []
        for token, i in vocab._ids.items():  # special tokens too: one of one character is a text's
            if len(token) == self.ngram:
                chars.append(token)
            elif token.endswith(self.END) and 1 <= len(token) - len(self.END) < self.ngram:  # a text's last characters
                chars.append(token[:-len(self.END)])
            else:  # e.g. <pad> and <unk>: no text gives them
                continue
            ids.append(i)
        keys, lengths = self._ngram_keys(chars)
        keys = keys[np.cumsum(lengths) - lengths]  # each token's own n-gram: the one at its first character
        order = np.argsort(keys, kind="stable")
        return np.r_[keys[order], np.iinfo(np.int64).max], np.r_[np.array(ids, dtype=np.int64)[order], vocab.unk_id]


class WordTokenizer(Tokenizer):
    """Tokens matched by a regular expression: by default words and single punctuation marks.

    A run of Chinese characters counts as one ``\\w+`` word; use :class:`CharTokenizer` for Chinese.

    Args:
        vocab: an existing vocabulary, or None.
        lower: lower-case first.
        pattern: the token regular expression.

    Example:
        >>> from sampan.text import WordTokenizer
        >>> WordTokenizer().tokenize("Great movie, 10/10!")
        ['great', 'movie', ',', '10', '/', '10', '!']
    """

    kind = "word"

    def __init__(self, vocab: Vocab | None = None, *, lower: bool = True, pattern: str = r"\w+|[^\w\s]"):
        super().__init__(vocab, lower=lower)
        self.pattern = pattern
        self._regex = re.compile(pattern)

    def tokenize(self, text: str) -> list[str]:
        return self._regex.findall(text.lower() if self.lower else text)

    def _join(self, tokens: list[str]) -> str:
        return " ".join(tokens)

    def _config(self) -> dict[str, Any]:
        return {"lower": self.lower, "pattern": self.pattern}
