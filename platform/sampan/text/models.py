"""Text classifiers over int64 token ids ``[B, L]`` (padding id 0) returning logits ``[B, num_classes]``;
one text's ids ``[L]`` count as a batch of one.

Example:
    >>> import torch
    >>> from sampan.text import TextCNN
    >>> net = TextCNN(vocab_size=100, num_classes=2)
    >>> net(torch.randint(1, 100, (4, 20))).shape
    torch.Size([4, 2])
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from sampan.errors import bad_argument, check_int

__all__ = ["BiGRU", "TextCNN"]


def _as_batch(name: str, ids: torch.Tensor) -> torch.Tensor:
    """Token ids as ``[B, L]``: one text's ``[L]`` (what ``tokenizer.encode(text)`` gives) as a batch of one."""
    if not isinstance(ids, torch.Tensor) or ids.dim() not in (1, 2) or ids.is_floating_point() or ids.is_complex():
        shown = f"tensor of shape {tuple(ids.shape)}, dtype {ids.dtype}" if isinstance(ids, torch.Tensor) else ids
        raise ValueError(bad_argument(name, shown, "an integer tensor of token ids, [B, L] or one text's [L]",
                                      "pass tokenizer.encode(texts), or ids.long()"))
    return ids.unsqueeze(0) if ids.dim() == 1 else ids


def _check_ids_fit(name: str, ids: torch.Tensor, embedding: nn.Embedding, size_name: str) -> None:
    """Ids outside ``[0, vocab_size)`` would fail inside ``nn.Embedding`` with "index out of range in self" (on a
    GPU, a device-side assert that spoils the process): name the id and the table's size instead."""
    if ids.numel() == 0 or torch.compiler.is_compiling():
        return
    low, high = (int(v) for v in torch.aminmax(ids))
    rows = embedding.num_embeddings
    if low >= 0 and high < rows:
        return
    bad = high if high >= rows else low
    raise ValueError(bad_argument(name, f"<ids up to {high}, from {low}>", f"token ids in [0, {size_name}={rows})",
                                  f"build the network with {size_name}=len(tokenizer.vocab) of the tokenizer that "
                                  f"encoded these ids (id {bad} is outside the table)"))


class TextCNN(nn.Module):
    """Kim (2014) convolutional sentence classifier: embeddings, parallel 1-D convolutions, max over time.

    Like PaddleNLP's ``CNNEncoder`` plus a linear classifier. Inputs shorter than
    the widest kernel are right-padded.

    Args:
        vocab_size: number of token ids (``len(vocab)``).
        num_classes: output logits.
        embed_dim: embedding width.
        num_filters: convolution channels per kernel size.
        kernel_sizes: widths of the convolutions.
        dropout: dropout before the classifier.
        padding_idx: the padding id, whose embedding stays zero.
        ngram_vocab_size: when given, a second embedding table for n-gram ids aligned with the
            token ids (``CharTokenizer(ngram=2)``); ``forward(ids, ngram_ids)`` concatenates both
            embeddings at each position, as Chinese models do with character + bigram embeddings.

    Example:
        >>> import torch
        >>> from sampan.text import TextCNN
        >>> TextCNN(50, 3, kernel_sizes=(2, 3))(torch.zeros(2, 1, dtype=torch.long)).shape
        torch.Size([2, 3])
        >>> net = TextCNN(50, 2, ngram_vocab_size=80)
        >>> net(torch.ones(2, 5, dtype=torch.long), torch.ones(2, 5, dtype=torch.long)).shape
        torch.Size([2, 2])
    """

    def __init__(self, vocab_size: int, num_classes: int, *, embed_dim: int = 128, num_filters: int = 64,
                 kernel_sizes: Sequence[int] = (2, 3, 4), dropout: float = 0.5, padding_idx: int = 0,
                 ngram_vocab_size: int | None = None):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("num_classes", num_classes), ("embed_dim", embed_dim),
                            ("num_filters", num_filters)):
            check_int(name, value)
        if ngram_vocab_size is not None:
            check_int("ngram_vocab_size", ngram_vocab_size)
        if not kernel_sizes or not all(isinstance(k, int) and k >= 1 for k in kernel_sizes):
            raise ValueError(bad_argument("kernel_sizes", kernel_sizes, "a non-empty sequence of positive ints",
                                          "pass kernel_sizes=(2, 3, 4)"))
        self.max_kernel = max(kernel_sizes)
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=padding_idx)
        self.ngram_embedding = (nn.Embedding(ngram_vocab_size, embed_dim, padding_idx=padding_idx)
                                if ngram_vocab_size is not None else None)
        width = embed_dim * (2 if ngram_vocab_size is not None else 1)
        self.convs = nn.ModuleList(ChannelsLastConv1d(width, num_filters, k) for k in kernel_sizes)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(num_filters * len(kernel_sizes), num_classes)

    def forward(self, ids: torch.Tensor, ngram_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Logits ``[B, num_classes]`` of ids ``[B, L]``; one text's ids ``[L]`` (``tok.encode(text)``) give
        ``[1, num_classes]``."""
        ids = _as_batch("ids", ids)
        _check_ids_fit("ids", ids, self.embedding, "vocab_size")
        if ngram_ids is not None:
            ngram_ids = _as_batch("ngram_ids", ngram_ids)
            if self.ngram_embedding is not None:
                _check_ids_fit("ngram_ids", ngram_ids, self.ngram_embedding, "ngram_vocab_size")
        x = self.embedding(ids)
        if (ngram_ids is None) != (self.ngram_embedding is None):
            raise ValueError(bad_argument(
                "ngram_ids", None if ngram_ids is None else tuple(ngram_ids.shape),
                "n-gram ids exactly when the model was built with ngram_vocab_size",
                "pass forward(ids, ngram_ids) with TextCNN(..., ngram_vocab_size=len(ngram_vocab)), "
                "or forward(ids) without it"))
        if ngram_ids is not None:
            if ngram_ids.shape != ids.shape:
                expected = f"the shape of ids {tuple(ids.shape)}"
                raise ValueError(bad_argument("ngram_ids", tuple(ngram_ids.shape), expected,
                                              "encode both with the same max_len"))
            x = torch.cat([x, self.ngram_embedding(ngram_ids)], dim=-1)
        x = x.transpose(1, 2)  # [B, E, L], a view: ChannelsLastConv1d reads it as it lies, no copy
        if x.shape[-1] < self.max_kernel:
            x = F.pad(x, (0, self.max_kernel - x.shape[-1]))
        pooled = [F.relu(conv(x)).amax(dim=-1) for conv in self.convs]
        return self.classifier(self.dropout(torch.cat(pooled, dim=1)))


class ChannelsLastConv1d(nn.Conv1d):
    """``nn.Conv1d`` over ``[B, C, L]``, run as a 2-D convolution of ``[B, C, 1, L]``: same parameters and
    ``state_dict``, the same results up to float rounding.

    TextCNN passes the transposed view of its embeddings ``[B, L, C]``. Seen as ``[B, C, 1, L]`` that view is
    channels-last, which oneDNN convolves as it lies; ``nn.Conv1d`` wants it contiguous, a copy forward and backward.
    The sentiment lesson's three convolutions, forward and backward, took 36 -> 27.5 ms this way (one thread,
    BENCHMARKS.md "make test", nineteenth session). Only what TextCNN builds: zero padding given as ints.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x.unsqueeze(2), self.weight.unsqueeze(2), self.bias, (1, *self.stride), (0, *self.padding),
                        (1, *self.dilation), self.groups).squeeze(2)


class BiGRU(nn.Module):
    """Bidirectional GRU classifier: the final forward and backward states of the last layer, then linear.

    Padding is skipped with ``pack_padded_sequence``, so the backward direction
    starts at each text's last real token. Like PaddleNLP's ``GRUEncoder(direction="bidirect")``.

    Args:
        vocab_size: number of token ids.
        num_classes: output logits.
        embed_dim: embedding width.
        hidden_size: GRU state size per direction.
        num_layers: stacked GRU layers.
        dropout: dropout between GRU layers and before the classifier.
        padding_idx: the padding id.

    Example:
        >>> import torch
        >>> from sampan.text import BiGRU
        >>> BiGRU(50, 2, hidden_size=8)(torch.tensor([[3, 4, 0], [5, 0, 0]])).shape
        torch.Size([2, 2])
    """

    def __init__(self, vocab_size: int, num_classes: int, *, embed_dim: int = 128, hidden_size: int = 128,
                 num_layers: int = 1, dropout: float = 0.0, padding_idx: int = 0):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("num_classes", num_classes), ("embed_dim", embed_dim),
                            ("hidden_size", hidden_size), ("num_layers", num_layers)):
            check_int(name, value)
        self.padding_idx = padding_idx
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=padding_idx)
        self.gru = nn.GRU(embed_dim, hidden_size, num_layers=num_layers, batch_first=True, bidirectional=True,
                          dropout=dropout if num_layers > 1 else 0.0)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(2 * hidden_size, num_classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits ``[B, num_classes]`` of ids ``[B, L]``; one text's ids ``[L]`` give ``[1, num_classes]``."""
        ids = _as_batch("ids", ids)
        _check_ids_fit("ids", ids, self.embedding, "vocab_size")
        lengths = (ids != self.padding_idx).sum(dim=1).clamp(min=1)
        packed = nn.utils.rnn.pack_padded_sequence(
            self.embedding(ids), lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, hidden = self.gru(packed)  # [num_layers * 2, B, H]
        return self.classifier(self.dropout(torch.cat([hidden[-2], hidden[-1]], dim=1)))
