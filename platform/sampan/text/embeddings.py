"""Token embeddings pretrained without labels: PPMI co-occurrence factorised with a truncated SVD.

Levy, Goldberg and Dagan (2015) showed that a positive pointwise mutual information
matrix, factorised by SVD, gives embeddings on a par with word2vec on small corpora,
and it takes seconds on a CPU. :func:`ppmi_embeddings` counts, for every token of
``tokenizer`` (characters or character n-grams), the characters within ``window``
positions of it, and returns one ``dim``-wide row per vocabulary id, ready to copy
into an ``nn.Embedding`` (Kim's 2014 "CNN-static/non-static" starting point).

Example:
    >>> from sampan.text import CharTokenizer
    >>> texts = ["这个很好", "这个不好", "很好看", "不好看"] * 5
    >>> tok = CharTokenizer(); _ = tok.build_vocab(texts)
    >>> ppmi_embeddings(texts, tok, dim=3, window=1).shape
    torch.Size([8, 3])
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from sampan.errors import bad_argument, check_int
from sampan.text.tokenizer import CharTokenizer, Tokenizer

__all__ = ["ppmi_embeddings"]


def ppmi_embeddings(texts: Sequence[str], tokenizer: Tokenizer, *, dim: int = 64, window: int = 3,
                    context: CharTokenizer | None = None, alpha: float = 0.75, scale: float = 1.0) -> torch.Tensor:
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

    Returns:
        float32 ``[len(tokenizer.vocab), dim]``; the padding row and rows of tokens never seen are zero.
    """
    from scipy import sparse
    from scipy.sparse.linalg import svds

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
    span = tokenizer.ngram
    gap = window + span  # padding between texts: no window crosses from one text into the next
    rows_list, ctx_list = [], []
    for text in texts:
        rows_list.append(np.asarray(tokenizer(text), dtype=np.int64))
        ctx_list.append(np.asarray(context(text), dtype=np.int64))
        rows_list.append(np.zeros(gap, dtype=np.int64))
        ctx_list.append(np.zeros(gap, dtype=np.int64))
    rows_all, ctx_all = np.concatenate(rows_list), np.concatenate(ctx_list)
    n = len(rows_all)
    pairs_r, pairs_c = [], []
    offsets = [*range(-window, 0), *range(span, span + window)]  # characters outside the token itself
    for d in offsets:
        lo, hi = max(0, -d), min(n, n - d)
        r, c = rows_all[lo:hi], ctx_all[lo + d:hi + d]
        keep = (r > 0) & (c > 0)  # neither padding nor a gap
        pairs_r.append(r[keep])
        pairs_c.append(c[keep])
    r, c = np.concatenate(pairs_r), np.concatenate(pairs_c)
    counts = sparse.coo_matrix((np.ones(len(r), np.float64), (r, c)),
                               shape=(len(vocab), len(context.vocab))).tocsr()
    counts.sum_duplicates()
    total = counts.sum()
    if total == 0:
        raise ValueError(bad_argument("texts", f"<{len(texts)} texts>", "texts with known tokens and context",
                                      "pass the training texts, or a larger corpus"))
    p_row = np.asarray(counts.sum(axis=1)).ravel() / total
    p_ctx = np.asarray(counts.sum(axis=0)).ravel() ** alpha
    p_ctx /= p_ctx.sum()
    coo = counts.tocoo()
    pmi = np.log(coo.data / total / (p_row[coo.row] * p_ctx[coo.col]))
    keep = pmi > 0
    ppmi = sparse.csr_matrix((pmi[keep], (coo.row[keep], coo.col[keep])), shape=counts.shape)
    k = min(dim, min(ppmi.shape) - 1)
    u, s, _ = svds(ppmi, k=k, random_state=0)
    emb = u * np.sqrt(s)
    if k < dim:
        emb = np.pad(emb, ((0, 0), (0, dim - k)))
    norms = np.linalg.norm(emb, axis=1, keepdims=True)
    emb = np.where(norms > 0, emb / np.maximum(norms, 1e-12), 0.0) * scale
    emb[0] = 0.0
    return torch.from_numpy(emb.astype(np.float32))
