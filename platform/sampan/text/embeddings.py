"""Token embeddings pretrained without labels: PPMI co-occurrence factorised with a truncated SVD.

Levy, Goldberg and Dagan (2015) showed that a positive pointwise mutual information
matrix, factorised by SVD, gives embeddings on a par with word2vec on small corpora,
and it takes seconds on a CPU. :func:`ppmi_embeddings` counts, for every token of
``tokenizer`` (characters or character n-grams), the characters within ``window``
positions of it, and returns one ``dim``-wide row per vocabulary id, ready to copy
into an ``nn.Embedding`` (Kim's 2014 "CNN-static/non-static" starting point).

Example:
    >>> from sampan.text import CharTokenizer, ppmi_embeddings
    >>> texts = ["这个很好", "这个不好", "很好看", "不好看"] * 5
    >>> tok = CharTokenizer(); _ = tok.build_vocab(texts)
    >>> ppmi_embeddings(texts, tok, dim=3, window=1).shape
    torch.Size([8, 3])
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from sampan.errors import bad_argument, check_int
from sampan.text.tokenizer import CharTokenizer, Tokenizer
from sampan.utils.io import atomic_write, data_home

__all__ = ["ppmi_embeddings"]


def ppmi_embeddings(texts: Sequence[str], tokenizer: Tokenizer, *, dim: int = 64, window: int = 3,
                    context: CharTokenizer | None = None, alpha: float = 0.75, scale: float = 1.0,
                    cache: bool = True) -> torch.Tensor:
    """Embeddings of ``tokenizer``'s vocabulary from character co-occurrence in ``texts``.

    Args:
        texts: unlabelled text (training texts, or a larger corpus such as
            :func:`sampan.text.corpus.peoples_daily`).
        tokenizer: a tokenizer with a vocabulary whose tokens line up with characters
            (``CharTokenizer`` with any ``ngram``); row ``i`` of the result embeds id ``i``.
        dim: embedding width.
        window: characters on each side counted as context.
        context: the tokenizer of context characters (default: a character tokenizer with
            ``tokenizer``'s vocabulary when it is one, else one built on ``texts``).
        alpha: context-distribution smoothing (0.75 as in word2vec).
        scale: every row is L2-normalised, then multiplied by ``scale``.
        cache: keep the result in the data directory (``$SAMPAN_DATA/cache/ppmi``), keyed by a hash of the
            texts, both vocabularies and the settings, so that running the same cell again (a notebook re-run)
            reads it back in a moment instead of factorising again; ``False`` always computes.

    Returns:
        float32 ``[len(tokenizer.vocab), dim]``; the padding row and rows of tokens never seen are zero.
    """
    if not isinstance(tokenizer, CharTokenizer):
        raise TypeError(bad_argument("tokenizer", type(tokenizer).__name__, "a CharTokenizer (any ngram)",
                                     "pass CharTokenizer() or CharTokenizer(ngram=2) after build_vocab"))
    vocab = tokenizer._require_vocab()
    check_int("dim", dim, fix="pass dim=64")
    check_int("window", window, fix="pass window=3")
    if dim >= len(vocab) - 1:
        raise ValueError(bad_argument("dim", dim, f"less than the vocabulary size minus one ({len(vocab) - 1})",
                                      "pass a smaller dim or build the vocabulary on more text"))
    if context is None:
        context = CharTokenizer(lower=tokenizer.lower)
        if tokenizer.ngram == 1:
            context.vocab = vocab
        else:
            context.build_vocab(texts, min_freq=2)
    path = _cache_path(texts, tokenizer, context, dim=dim, window=window, alpha=alpha, scale=scale) if cache else None
    cached = _read_cached(path, (len(vocab), dim))
    if cached is not None:
        return cached
    emb = _ppmi(texts, tokenizer, context, dim=dim, window=window, alpha=alpha, scale=scale)
    if path is not None:
        try:
            def write(tmp):
                with open(tmp, "wb") as handle:
                    np.save(handle, emb, allow_pickle=False)

            atomic_write(path, write)
        except OSError:  # a read-only data directory: the cache only saves time
            pass
    return torch.from_numpy(emb)


def _cache_path(texts: Sequence[str], tokenizer: CharTokenizer, context: CharTokenizer, **settings) -> Path:
    digest = hashlib.sha256(json.dumps({"v": 1, **settings, "ngram": tokenizer.ngram, "lower": tokenizer.lower,
                                        "context_lower": context.lower, "texts": len(texts)}).encode())
    for tokens in (tokenizer.vocab.tokens, context._require_vocab().tokens, texts):
        digest.update("\x00".join(tokens).encode("utf-8", "surrogatepass"))
        digest.update(b"\xff")  # never in UTF-8: the three parts cannot run into each other
    return data_home() / "cache" / "ppmi" / f"{digest.hexdigest()[:32]}.npy"


def _read_cached(path: Path | None, shape: tuple[int, int]) -> torch.Tensor | None:
    """A cached result (plain array, never pickle), or None when absent, unreadable or not the shape expected."""
    if path is None or not path.is_file():
        return None
    try:
        emb = np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None
    if emb.shape != shape or emb.dtype != np.float32 or not np.isfinite(emb).all():
        return None
    return torch.from_numpy(emb)


def _ppmi_matrix(texts: Sequence[str], tokenizer: CharTokenizer, context: CharTokenizer, *, window: int,
                 alpha: float):
    """The CSR ``[len(tokenizer.vocab), len(context.vocab)]`` positive PMI of each token with the context
    characters within ``window`` of it on either side (outside the token itself, never across two texts)."""
    from scipy import sparse

    vocab = tokenizer.vocab
    span = tokenizer.ngram
    gap = window + span  # padding between texts: no window crosses from one text into the next
    rows_all = tokenizer._corpus_ids(texts, gap)
    # characters in their own context (the default for ngram=1): the same ids, looked up once
    same = context.vocab is vocab and context._config() == tokenizer._config()
    ctx_all = rows_all if same else context._corpus_ids(texts, gap)
    n = len(rows_all)
    n_ctx = len(context.vocab)
    keys = []  # each (token, context) pair as one int64, row-major: counted by one sort, no sparse matrix
    for d in (*range(-window, 0), *range(span, span + window)):  # characters outside the token itself
        lo, hi = max(0, -d), min(n, n - d)
        r, c = rows_all[lo:hi], ctx_all[lo + d:hi + d]
        keep = (r > 0) & (c > 0)  # neither padding nor a gap
        keys.append(r[keep].astype(np.int64, copy=False) * n_ctx + c[keep])
    pairs, counts = np.unique(np.concatenate(keys), return_counts=True)
    total = counts.sum()
    if total == 0:
        raise ValueError(bad_argument("texts", f"<{len(texts)} texts>", "texts with known tokens and context",
                                      "pass the training texts, or a larger corpus"))
    rows, cols = np.divmod(pairs, n_ctx)
    p_row = np.bincount(rows, weights=counts, minlength=len(vocab)) / total
    p_ctx = np.bincount(cols, weights=counts, minlength=n_ctx) ** alpha
    p_ctx /= p_ctx.sum()
    pmi = np.log(counts / total / (p_row[rows] * p_ctx[cols]))
    keep = pmi > 0
    if not keep.any():  # a zero matrix: the SVD would fail with ARPACK's "starting vector is zero"
        raise ValueError(bad_argument(
            "texts", f"<{len(texts)} texts>",
            f"a corpus where some token and a context character within window={window} occur together more often "
            "than chance (positive PMI)", "pass more text (the training texts, or sampan.text.peoples_daily()), "
            "a larger window, or a vocabulary built on these texts"))
    return sparse.csr_matrix((pmi[keep], (rows[keep], cols[keep])), shape=(len(vocab), n_ctx))


def _ppmi(texts: Sequence[str], tokenizer: CharTokenizer, context: CharTokenizer, *, dim: int, window: int,
          alpha: float, scale: float) -> np.ndarray:
    from scipy.sparse.linalg import svds

    ppmi = _ppmi_matrix(texts, tokenizer, context, window=window, alpha=alpha)
    k = min(dim, min(ppmi.shape) - 1)
    u, s, _ = svds(ppmi, k=k, random_state=0)
    emb = u * np.sqrt(s)
    if k < dim:
        emb = np.pad(emb, ((0, 0), (0, dim - k)))
    norms = np.linalg.norm(emb, axis=1, keepdims=True)
    emb = np.where(norms > 0, emb / np.maximum(norms, 1e-12), 0.0) * scale
    emb[0] = 0.0
    return emb.astype(np.float32)
