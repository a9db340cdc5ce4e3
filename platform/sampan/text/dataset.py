"""Texts and labels as token-id tensors, ready for ``sampan.Model.fit`` or a ``DataLoader``."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from sampan.errors import bad_argument
from sampan.text.tokenizer import Tokenizer


class TextClassificationDataset(Dataset):
    """Encodes every text once (``tokenizer.encode(texts, max_len)``); items are ``(ids, label)``.

    ``ids`` is int64 ``[max_len]`` (padding id 0), ``label`` a 0-d int64 tensor. With several
    tokenizers (say characters and character bigrams) items are ``(ids_1, ids_2, ..., label)``,
    one input per tokenizer, which ``Model.fit`` passes to the network as several inputs.

    Args:
        texts: the texts.
        labels: one class id (int) per text, or one class name per text when ``classes`` lists them
            (``labels=["pos", "neg"], classes=["neg", "pos"]`` gives ids ``[1, 0]``).
        tokenizer: a tokenizer with a vocabulary (call ``build_vocab`` on training texts first),
            or a sequence of them.
        max_len: the padded / truncated length.
        classes: optional class names, in id order; needed for labels given as names.

    Example:
        >>> from sampan.text import CharTokenizer, TextClassificationDataset
        >>> tok = CharTokenizer(); _ = tok.build_vocab(["好看", "难看"])
        >>> ds = TextClassificationDataset(["好看", "难看"], [1, 0], tok, max_len=4)
        >>> ds[0]
        (tensor([3, 2, 0, 0]), tensor(1))
    """

    def __init__(self, texts: Sequence[str], labels: Sequence[int] | torch.Tensor,
                 tokenizer: Tokenizer | Sequence[Tokenizer], max_len: int, *, classes: Sequence[str] | None = None):
        if isinstance(texts, (str, bytes)) or not hasattr(texts, "__len__"):
            raise TypeError(bad_argument("texts", texts[:60] if isinstance(texts, (str, bytes)) else texts,
                                         "a list of texts (one string per example)",
                                         "pass [text] for one text, or list(texts) for a generator"))
        if len(texts) != len(labels):
            raise ValueError(bad_argument("labels", f"<{len(labels)} labels>", f"one label per text ({len(texts)})",
                                          "pass labels of the same length as texts"))
        tokenizers = [tokenizer] if isinstance(tokenizer, Tokenizer) else list(tokenizer)
        if not tokenizers or not all(isinstance(t, Tokenizer) for t in tokenizers):
            raise TypeError(bad_argument("tokenizer", tokenizer, "a sampan.text Tokenizer or a list of them",
                                         "pass CharTokenizer() (after build_vocab) or [chars, bigrams]"))
        self.classes = list(classes) if classes is not None else None
        self.labels = _label_ids(labels, self.classes)  # checked before the texts are encoded
        self.inputs = tuple(t.encode(list(texts), max_len) for t in tokenizers)
        self.ids = self.inputs[0]
        self.max_len = max_len

    @classmethod
    def from_dataset(cls, dataset, tokenizer: Tokenizer | Sequence[Tokenizer],
                     max_len: int) -> "TextClassificationDataset":
        """Wraps a catalog text dataset (``load_dataset("reviews-zh", ...)``): its texts, labels, classes."""
        return cls(dataset.texts, dataset.labels, tokenizer, max_len, classes=dataset.classes)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int):
        return (*(ids[index] for ids in self.inputs), self.labels[index])


def _label_ids(labels, classes: list | None) -> torch.Tensor:
    """``labels`` as int64 class ids ``[N]``: names are looked up in ``classes``; anything else is refused by name."""
    values = labels.tolist() if isinstance(labels, (torch.Tensor, np.ndarray)) else list(labels)
    if any(isinstance(v, str) for v in values):
        if classes is None:
            names = sorted({v for v in values if isinstance(v, str)})
            raise ValueError(bad_argument("labels", _preview(values), "class ids (ints), or class names with classes=",
                                          f"pass classes={names!r} (a label's id is its index there), "
                                          "or map the labels to ints yourself"))
        index = {name: i for i, name in enumerate(classes)}
        unknown = [v for v in values if not isinstance(v, str) or v not in index]
        if unknown:
            raise ValueError(bad_argument("labels", unknown[0], f"one of classes={classes!r}",
                                          "add the name to classes, or correct the label"))
        return torch.tensor([index[v] for v in values], dtype=torch.int64)
    try:
        ids = torch.as_tensor(values)
    except (TypeError, ValueError, RuntimeError):
        ids = None
    fractional = ids is not None and ids.is_floating_point() and not torch.equal(ids, ids.trunc())
    if ids is None or ids.dim() == 0 or ids.is_complex() or fractional:
        raise ValueError(bad_argument("labels", _preview(values), "one class id (an int) per text",
                                      "pass labels such as [1, 0, 1], or class names with classes=[...]"))
    if ids.dim() != 1:
        raise ValueError(bad_argument("labels", f"<labels of shape {list(ids.shape)}>", "one class id per text, "
                                      "a 1-D sequence", "pass labels.ravel() (a column such as df[['label']] is 2-D)"))
    ids = ids.to(torch.int64)
    limit = len(classes) if classes is not None else None
    if len(ids) and (ids.min() < 0 or (limit is not None and ids.max() >= limit)):
        bad = int(ids.min()) if ids.min() < 0 else int(ids.max())
        expected = "class ids >= 0" + (f" and < len(classes) = {limit}" if limit is not None else "")
        raise ValueError(bad_argument("labels", bad, expected, "count classes from 0, one id per class name"))
    return ids


def _preview(values: list):
    return values if len(values) <= 6 else [*values[:6], "..."]
