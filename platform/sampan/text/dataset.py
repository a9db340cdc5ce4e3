"""Texts and labels as token-id tensors, ready for ``sampan.Model.fit`` or a ``DataLoader``."""
from __future__ import annotations

from collections.abc import Sequence

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
        labels: one int per text.
        tokenizer: a tokenizer with a vocabulary (call ``build_vocab`` on training texts first),
            or a sequence of them.
        max_len: the padded / truncated length.
        classes: optional class names.

    Example:
        >>> from sampan.text import CharTokenizer
        >>> tok = CharTokenizer(); _ = tok.build_vocab(["好看", "难看"])
        >>> ds = TextClassificationDataset(["好看", "难看"], [1, 0], tok, max_len=4)
        >>> ds[0]
        (tensor([3, 2, 0, 0]), tensor(1))
    """

    def __init__(self, texts: Sequence[str], labels: Sequence[int] | torch.Tensor,
                 tokenizer: Tokenizer | Sequence[Tokenizer], max_len: int, *, classes: Sequence[str] | None = None):
        if len(texts) != len(labels):
            raise ValueError(bad_argument("labels", f"<{len(labels)} labels>", f"one label per text ({len(texts)})",
                                          "pass labels of the same length as texts"))
        tokenizers = [tokenizer] if isinstance(tokenizer, Tokenizer) else list(tokenizer)
        if not tokenizers or not all(isinstance(t, Tokenizer) for t in tokenizers):
            raise TypeError(bad_argument("tokenizer", tokenizer, "a sampan.text Tokenizer or a list of them",
                                         "pass CharTokenizer() (after build_vocab) or [chars, bigrams]"))
        self.inputs = tuple(t.encode(list(texts), max_len) for t in tokenizers)
        self.ids = self.inputs[0]
        self.labels = torch.as_tensor(labels, dtype=torch.int64)
        self.classes = list(classes) if classes is not None else None
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
