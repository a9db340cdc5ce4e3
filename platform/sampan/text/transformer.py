"""A small Transformer encoder over characters, pretrained by masked-character prediction.

A stand-in for ERNIE / BERT that a CPU can pretrain in minutes: token and
position embeddings, ``torch.nn.TransformerEncoder`` (pre-norm), a final
LayerNorm. :class:`MaskedLMHead` predicts masked characters with the embedding
table as output weights (tied); :class:`TransformerClassifier` averages the
encoder's outputs over the real (non-padding) characters and classifies.
:func:`save_pretrained` / :func:`load_pretrained` keep the encoder and its
vocabulary together in the local model zoo (``<data dir>/zoo/<name>.pt``).

Example:
    >>> from sampan.text import MASK_TOKEN, CharTokenizer, CharTransformer, TransformerConfig, Vocab
    >>> tok = CharTokenizer(Vocab([MASK_TOKEN, "好", "差"]))
    >>> enc = CharTransformer(TransformerConfig(vocab_size=len(tok.vocab), dim=32, heads=2, layers=1, max_len=8))
    >>> enc(tok.encode(["好差"], max_len=8)).shape
    torch.Size([1, 8, 32])
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from sampan.errors import CheckpointError, bad_argument, check_int
from sampan.text.tokenizer import CharTokenizer, Vocab
from sampan.utils.io import atomic_write, writing_data_home, zoo_dir

__all__ = ["CharTransformer", "MASK_TOKEN", "MaskedLMHead", "TransformerClassifier", "TransformerConfig",
           "load_pretrained", "mask_tokens", "save_pretrained"]

MASK_TOKEN = "[MASK]"
IGNORE = -100  # the label of positions that are not predicted (torch's cross_entropy ignore_index)
_FORMAT = "sampan.char-transformer"


@dataclass(frozen=True)
class TransformerConfig:
    """Sizes of a :class:`CharTransformer`.

    Args:
        vocab_size: rows of the embedding table (``len(tokenizer.vocab)``).
        dim: width of every token's vector.
        heads: attention heads (``dim`` must divide by it).
        layers: encoder layers.
        ffn: hidden width of each layer's feed-forward block; 0 means ``4 * dim``.
        max_len: the longest sequence (rows of the learned position table).
        dropout: dropout inside the layers.
    """

    vocab_size: int
    dim: int = 64
    heads: int = 4
    layers: int = 2
    ffn: int = 0
    max_len: int = 128
    dropout: float = 0.1

    def __post_init__(self):
        for name in ("vocab_size", "dim", "heads", "layers", "max_len"):
            check_int(name, getattr(self, name), minimum=1)
        if self.dim % self.heads:
            raise ValueError(bad_argument("heads", self.heads, f"a divisor of dim={self.dim}", "pass heads=4 with dim=64"))


class CharTransformer(nn.Module):
    """The encoder: ``ids [B, T]`` (0 = padding) -> hidden states ``[B, T, dim]``.

    Calls ``torch.nn.TransformerEncoder`` with ``norm_first=True`` and a key padding mask, so
    padding is never attended to (in a row of padding only, the first position is, so that its
    outputs stay finite); the role of ERNIE / BERT's encoder in PaddleNLP.

    Example:
        >>> import torch
        >>> from sampan.text import CharTransformer, TransformerConfig
        >>> net = CharTransformer(TransformerConfig(vocab_size=10, dim=16, heads=2, layers=1, max_len=6))
        >>> net(torch.tensor([[3, 4, 0]])).shape
        torch.Size([1, 3, 16])
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.dim, padding_idx=0)
        self.position = nn.Embedding(config.max_len, config.dim)
        layer = nn.TransformerEncoderLayer(config.dim, config.heads, config.ffn or 4 * config.dim, config.dropout,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, config.layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(config.dim)
        for table in (self.embedding, self.position):
            nn.init.normal_(table.weight, std=0.02)
        with torch.no_grad():
            self.embedding.weight[0].zero_()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if ids.shape[-1] > self.config.max_len:
            raise ValueError(bad_argument("ids", f"<ids of length {ids.shape[-1]}>",
                                          f"at most max_len={self.config.max_len} positions",
                                          f"encode with max_len={self.config.max_len}"))
        hidden = self.embedding(ids) + self.position.weight[: ids.shape[-1]]
        padding = ids == 0
        # a row of padding only (a blank text) leaves attention no key: torch's fused inference kernel
        # (eval + no_grad) then returns NaN. Its first position may attend, so the row stays finite.
        padding[..., 0] &= ~padding.all(-1)
        return self.norm(self.encoder(hidden, src_key_padding_mask=padding))


class MaskedLMHead(nn.Module):
    """Encoder + output layer tied to the embedding table: logits over the vocabulary.

    ``forward(ids)`` gives ``[B, T, vocab]``; ``loss(ids, labels)`` scores only the positions whose
    label is not -100 (what :func:`mask_tokens` returns), which is all pretraining needs.

    Example:
        >>> import torch
        >>> from sampan.text import CharTransformer, MaskedLMHead, TransformerConfig
        >>> enc = CharTransformer(TransformerConfig(vocab_size=10, dim=16, heads=2, layers=1, max_len=6))
        >>> MaskedLMHead(enc)(torch.tensor([[3, 2, 4]])).shape
        torch.Size([1, 3, 10])
    """

    def __init__(self, encoder: CharTransformer):
        super().__init__()
        self.encoder = encoder
        self.bias = nn.Parameter(torch.zeros(encoder.config.vocab_size))

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden @ self.encoder.embedding.weight.T + self.bias

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self._logits(self.encoder(ids))

    def loss(self, ids: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-entropy and accuracy over the predicted positions (``labels != -100``)."""
        chosen = labels != IGNORE
        logits = self._logits(self.encoder(ids)[chosen])
        target = labels[chosen]
        return nn.functional.cross_entropy(logits, target), (logits.argmax(-1) == target).float().mean()


class TransformerClassifier(nn.Module):
    """Encoder + mean over the non-padding positions + a linear layer: ``ids [B, T]`` -> logits ``[B, classes]``.

    A row of padding only (a blank text) averages nothing and gets the head's bias as logits.

    Example:
        >>> import torch
        >>> from sampan.text import CharTransformer, TransformerClassifier, TransformerConfig
        >>> enc = CharTransformer(TransformerConfig(vocab_size=10, dim=16, heads=2, layers=1, max_len=6))
        >>> TransformerClassifier(enc, 2)(torch.tensor([[3, 4, 0]])).shape
        torch.Size([1, 2])
    """

    def __init__(self, encoder: CharTransformer, num_classes: int):
        super().__init__()
        check_int("num_classes", num_classes, minimum=2)
        self.encoder = encoder
        self.head = nn.Linear(encoder.config.dim, num_classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder(ids)
        keep = (ids != 0).unsqueeze(-1).to(hidden.dtype)
        return self.head((hidden * keep).sum(1) / keep.sum(1).clamp(min=1))


def mask_tokens(ids: torch.Tensor, mask_id: int, vocab_size: int, *, rate: float = 0.15,
                generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking: choose ``rate`` of the real tokens; of those 80 % become ``mask_id``, 10 % a random
    token, 10 % stay as they are. Returns ``(inputs, labels)``; ``labels`` is -100 where nothing is predicted.

    Ids 0 and 1 (``<pad>``, ``<unk>``) and ``mask_id`` itself are never chosen; random replacements are
    ordinary tokens (ids 2 .. ``vocab_size - 1`` except ``mask_id``). The same rule as Hugging Face's
    ``DataCollatorForLanguageModeling`` and PaddleNLP's ERNIE pretraining.

    Args:
        ids: int64 token ids, any shape.
        mask_id: the id of ``[MASK]``.
        vocab_size: ``len(tokenizer.vocab)``.
        rate: the share of real tokens to predict.
        generator: a ``torch.Generator`` for reproducible masks.

    Example:
        >>> import torch
        >>> from sampan.text import mask_tokens
        >>> inputs, labels = mask_tokens(torch.tensor([[5, 6, 7, 0]]), mask_id=2, vocab_size=9, rate=1.0,
        ...                              generator=torch.Generator().manual_seed(0))
        >>> labels.tolist()
        [[5, 6, 7, -100]]
    """
    check_int("mask_id", mask_id, minimum=2, fix="pass mask_id=tokenizer.vocab[MASK_TOKEN]")
    check_int("vocab_size", vocab_size, minimum=4, fix="pass vocab_size=len(tokenizer.vocab)")
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 < rate <= 1.0:
        raise ValueError(bad_argument("rate", rate, "a share in (0, 1]", "pass rate=0.15"))
    chosen = (torch.rand(ids.shape, generator=generator) < rate) & (ids >= 2) & (ids != mask_id)
    labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE))
    roll = torch.rand(ids.shape, generator=generator)
    draws = torch.randint(2, vocab_size - 1, ids.shape, generator=generator)
    draws = draws + (draws >= mask_id).long()  # skip mask_id
    inputs = torch.where(chosen & (roll < 0.8), torch.full_like(ids, mask_id), ids)
    return torch.where(chosen & (roll >= 0.8) & (roll < 0.9), draws, inputs), labels


_LAYER_KEY = re.compile(r"encoder\.layers\.(0|[1-9][0-9]*)\.(.+)")


def _config_beyond_weights(config: TransformerConfig, state: Any) -> str | None:
    """Why ``config`` describes a network larger than the weights ``state`` saved with it, or None.

    The network is built from the config before the weights are copied in, so a zoo file of a few KB whose config
    says ``layers=10**8`` (hours of building) or ``vocab_size=2**20, dim=2**14`` (64 GB, touched as it is
    initialised) would freeze the kernel. Each tensor the config implies must be in ``state`` with its shape, and
    each saved tensor must hold bytes of its own (no two views of one buffer, no stride-0 broadcasts), so the
    network never takes more memory than the file's weights already do."""
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                              for k, v in state.items()):
        return "comes with a state_dict that is not a dict of tensors"
    with torch.device("meta"):  # shapes only: nothing is allocated
        template = CharTransformer(replace(config, layers=1)).state_dict()
    outer = {k: v.shape for k, v in template.items() if not k.startswith("encoder.layers.")}
    per_layer = {k.removeprefix("encoder.layers.0."): v.shape for k, v in template.items() if k not in outer}
    if len(state) != len(outer) + config.layers * len(per_layer):
        return (f"implies {len(outer) + config.layers * len(per_layer)} tensors, but the file holds {len(state)}")
    for key, tensor in state.items():
        layer = _LAYER_KEY.fullmatch(key)
        expected = (per_layer.get(layer.group(2)) if int(layer.group(1)) < config.layers else None) if layer else \
            outer.get(key)
        if expected is None or tensor.shape != expected:
            return (f"does not imply the file's tensor {key!r}" if expected is None else
                    f"implies {key!r} of shape {tuple(expected)}, but the file's is {tuple(tensor.shape)}")
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in state.values()}
    if sum(t.numel() * t.element_size() for t in state.values()) > sum(storages.values()):
        return "comes with tensors that repeat the same bytes (shared or broadcast storage)"
    return None


def _zoo_file(name: str) -> Path:
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name.startswith("."):
        raise ValueError(bad_argument("name", name, "a plain zoo name such as 'char-transformer-zh'"))
    return zoo_dir() / f"{name}.pt"


def save_pretrained(encoder: CharTransformer, tokenizer: CharTokenizer, name: str) -> Path:
    """Writes the encoder's weights, its config and the tokenizer's vocabulary to ``zoo/<name>.pt``, atomically.

    Example:
        >>> from sampan.text import save_pretrained
        >>> save_pretrained(encoder, tokenizer, "char-transformer-zh")  # doctest: +SKIP
    """
    if not isinstance(encoder, CharTransformer):
        raise TypeError(bad_argument("encoder", encoder, "a CharTransformer", "pass the pretrained encoder"))
    if encoder.config.vocab_size != len(tokenizer.vocab):
        raise ValueError(bad_argument("tokenizer", tokenizer, f"a vocabulary of {encoder.config.vocab_size} tokens",
                                      "pass the tokenizer the encoder was trained with"))
    state = {"format": _FORMAT, "version": 1, "config": asdict(encoder.config),
             "vocab": tokenizer.vocab.to_dict(), "lower": tokenizer.lower,
             "state_dict": {k: v.detach().cpu() for k, v in encoder.state_dict().items()}}
    with writing_data_home(f"save {name!r} to the model zoo"):
        return atomic_write(_zoo_file(name), lambda tmp: torch.save(state, tmp))


def load_pretrained(name: str) -> tuple[CharTransformer, CharTokenizer]:
    """The encoder and tokenizer saved by :func:`save_pretrained` (read with ``weights_only=True``).

    Raises:
        FileNotFoundError: nothing under that name; the message says which lesson produces it.
        sampan.errors.CheckpointError: the file is not a saved CharTransformer.

    Example:
        >>> from sampan.text import load_pretrained
        >>> encoder, tokenizer = load_pretrained("char-transformer-zh")  # doctest: +SKIP
    """
    path = _zoo_file(name)
    if not path.is_file():
        raise FileNotFoundError(
            f"No pretrained Transformer {name!r} in the local zoo: {path} does not exist. Sampan never downloads "
            f"weights. HINT: run the lesson that pretrains it (`sampan path run --lesson transformer_zh`) or "
            f"save one with sampan.text.save_pretrained(encoder, tokenizer, {name!r}).")
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
        if saved.get("format") != _FORMAT:
            raise ValueError(f"format {saved.get('format')!r}, expected {_FORMAT!r}")
        config = TransformerConfig(**saved["config"])
        problem = _config_beyond_weights(config, saved["state_dict"])
        if problem:
            raise ValueError(f"its config {asdict(config)} {problem}; building that network would take memory (or "
                             "time) the file does not hold. HINT: load only weights written by save_pretrained")
        encoder = CharTransformer(config)
        encoder.load_state_dict(saved["state_dict"])
    except Exception as exc:  # truncated, another format or another architecture
        raise CheckpointError(f"Cannot read the pretrained Transformer {path}: {exc}", path=str(path)) from exc
    return encoder, CharTokenizer(Vocab.from_dict(saved["vocab"]), lower=saved["lower"])
