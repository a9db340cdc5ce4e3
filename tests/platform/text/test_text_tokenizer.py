import json

import pytest
import torch

from sampan.text import CharTokenizer, TextClassificationDataset, Tokenizer, Vocab, WordTokenizer


def test_vocab_orders_by_frequency_with_pad_and_unk_first():
    vocab = Vocab.build([["b", "a", "b"], ["c", "b", "a"], ["d"]])
    assert vocab.tokens == ["<pad>", "<unk>", "b", "a", "c", "d"]
    assert (vocab.pad_id, vocab.unk_id) == (0, 1)
    assert vocab.to_ids(["a", "zz"]) == [3, 1]
    assert vocab.to_tokens([2, 0]) == ["b", "<pad>"]
    assert "c" in vocab and "zz" not in vocab


def test_vocab_min_freq_and_max_size():
    lists = [["x"] * 5 + ["y"] * 3 + ["z"]]
    assert Vocab.build(lists, min_freq=2).tokens == ["<pad>", "<unk>", "x", "y"]
    assert Vocab.build(lists, max_size=3).tokens == ["<pad>", "<unk>", "x"]
    assert len(Vocab.build(lists, max_size=100)) == 5
    with pytest.raises(ValueError, match=r"`min_freq` to be an int >= 1. Received: min_freq=0"):
        Vocab.build(lists, min_freq=0)
    with pytest.raises(ValueError, match=r"`max_size`.*Received: max_size=1"):
        Vocab.build(lists, max_size=1)


def test_vocab_save_and_load_round_trip(tmp_path):
    vocab = Vocab.build([list("今天天气很好")])
    path = vocab.save(tmp_path / "vocab.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["format"] == "sampan.vocab" and "天" in data["tokens"]  # readable UTF-8, not escapes
    assert Vocab.load(path) == vocab
    (tmp_path / "other.json").write_text('{"tokens": []}', encoding="utf-8")
    with pytest.raises(ValueError, match="written by Vocab.to_dict"):
        Vocab.load(tmp_path / "other.json")


def test_char_tokenizer_handles_chinese_without_a_segmenter():
    tok = CharTokenizer()
    assert tok.tokenize("质量 很好，OK") == ["质", "量", "很", "好", "，", "o", "k"]
    tok.build_vocab(["质量很好", "质量太差"])
    ids = tok.encode(["质量很好啊", "差"], max_len=4)
    assert ids.dtype == torch.int64 and ids.shape == (2, 4)
    assert ids[1, 1:].tolist() == [0, 0, 0]  # right padding with id 0
    assert tok.decode(ids[0]) == "质量很好"  # truncated to max_len
    assert tok.encode("啊啊", max_len=3).tolist() == [1, 1, 0]  # unknown -> 1, one text -> 1-D


def test_encode_without_max_len_pads_to_the_longest():
    tok = CharTokenizer()
    tok.build_vocab(["abc"])
    assert tok.encode(["a", "abc", ""]).tolist() == [[2, 0, 0], [2, 3, 4], [0, 0, 0]]


def test_word_tokenizer_splits_words_and_punctuation():
    tok = WordTokenizer()
    assert tok.tokenize("Not bad, NOT bad at all!") == ["not", "bad", ",", "not", "bad", "at", "all", "!"]
    tok.build_vocab(["not bad", "bad movie"])
    assert tok.decode(tok.encode("not a bad movie", max_len=6)) == "not <unk> bad movie"
    custom = WordTokenizer(pattern=r"[a-z]+", lower=False)
    assert custom.tokenize("ab Cd ef") == ["ab", "d", "ef"]


def test_encode_errors_name_the_argument():
    tok = CharTokenizer()
    with pytest.raises(RuntimeError, match="build_vocab"):
        tok.encode(["x"])
    tok.build_vocab(["x"])
    with pytest.raises(ValueError, match=r"`max_len` to be None or a positive int. Received: max_len=0"):
        tok.encode(["x"], max_len=0)
    with pytest.raises(TypeError, match=r"`texts` to be a str \(one text\) or an iterable of str"):
        tok.encode([1, 2])
    with pytest.raises(ValueError, match=r"`ids` to be ids of this vocabulary, 0 to 2. Received: ids=99"):
        tok.decode([2, 99])


def test_encode_takes_an_array_or_a_series_of_texts():
    """Audit: a NumPy array or a pandas Series of str was refused as "not a sequence"."""
    import numpy as np
    import pandas as pd

    tok = CharTokenizer()
    tok.build_vocab(["很好", "不好"])
    expected = tok.encode(["很好", "不好"]).tolist()
    assert tok.encode(np.array(["很好", "不好"])).tolist() == expected
    assert tok.encode(pd.Series(["很好", "不好"], index=[7, 3])).tolist() == expected
    assert tok.encode(t for t in ("很好", "不好")).tolist() == expected
    assert tok.encode("很好").tolist() == expected[0]  # a bare str is one text, not an iterable of characters
    with pytest.raises(TypeError, match=r"`texts` to be .*iterable of str.*Received: texts=b'ab'"):
        tok.encode(b"ab")


@pytest.mark.parametrize("ngram", [2, 3])
def test_ngram_decode_gives_the_text_back(ngram):
    """Audit: decode joined whole n-grams, giving '不好好看看</s>' for '不好看'."""
    tok = CharTokenizer(ngram=ngram)
    tok.build_vocab(["不好看", "很好"])
    assert tok.decode(tok.encode("不好看")) == "不好看"
    assert tok.decode(tok.encode(["好", "不好看"], max_len=5)[0]) == "好"  # padding dropped
    assert tok.decode(tok.encode("不好看", max_len=2)) == "不好看"[:2 + ngram - 1]  # the last n-gram holds more
    assert tok.decode(tok.encode("坏好看")) == "<unk>好看"  # an unknown n-gram stands for its one character
    assert tok.decode(tok.encode("好", max_len=3), skip_pad=False) == "好<pad><pad>"


@pytest.mark.parametrize("tokenizer", [CharTokenizer(lower=False), WordTokenizer(pattern=r"\w+")])
def test_tokenizer_save_and_load_keeps_settings_and_vocab(tmp_path, tokenizer):
    tokenizer.build_vocab(["Hello world", "hello there"])
    loaded = Tokenizer.load(tokenizer.save(tmp_path / "tok.json"))
    assert type(loaded) is type(tokenizer) and loaded.vocab == tokenizer.vocab
    assert loaded.lower == tokenizer.lower
    assert torch.equal(loaded.encode(["Hello there!"], 8), tokenizer.encode(["Hello there!"], 8))


def test_text_classification_dataset_from_reviews(data_home):
    from sampan.data import load_dataset

    reviews = load_dataset("reviews-zh", "val")
    tok = CharTokenizer()
    tok.build_vocab(reviews.texts, min_freq=2)
    ds = TextClassificationDataset.from_dataset(reviews, tok, max_len=64)
    assert len(ds) == len(reviews) and ds.classes == ["negative", "positive"]
    ids, label = ds[0]
    assert ids.shape == (64,) and ids.dtype == torch.int64 and label.dtype == torch.int64
    assert label.item() == reviews[0][1]
    assert ids.tolist() == (tok(reviews[0][0]) + [0] * 64)[:64]
    assert (ds.ids[:, 0] != 0).all()  # no empty review
    with pytest.raises(ValueError, match="one label per text"):
        TextClassificationDataset(["a", "b"], [1], tok, max_len=4)


def test_dataset_labels_given_as_class_names():
    """Audit: string labels failed with torch's "too many dimensions 'str'"."""
    import pandas as pd

    tok = CharTokenizer()
    tok.build_vocab(["很好", "不好"])
    ds = TextClassificationDataset(["很好", "不好"], pd.Series(["pos", "neg"]), tok, 4, classes=["neg", "pos"])
    assert ds.labels.tolist() == [1, 0] and ds.labels.dtype == torch.int64 and ds.classes == ["neg", "pos"]
    with pytest.raises(ValueError, match=r"`labels` to be class ids.*Received: labels=\['pos', 'neg'\].*"
                                         r"HINT: pass classes=\['neg', 'pos'\]"):
        TextClassificationDataset(["很好", "不好"], ["pos", "neg"], tok, 4)
    with pytest.raises(ValueError, match=r"`labels` to be one of classes=\['neg', 'pos'\]. Received: labels='ok'"):
        TextClassificationDataset(["很好", "不好"], ["pos", "ok"], tok, 4, classes=["neg", "pos"])
    with pytest.raises(ValueError, match=r"`labels` to be one class id \(an int\) per text. .*labels=\[1.5, 0\]"):
        TextClassificationDataset(["很好", "不好"], [1.5, 0], tok, 4)
    with pytest.raises(ValueError, match=r"`labels` to be class ids >= 0 and < len\(classes\) = 2. .*labels=2"):
        TextClassificationDataset(["很好", "不好"], [2, 0], tok, 4, classes=["neg", "pos"])


def test_char_ngrams_line_up_with_characters(tmp_path):
    chars, bigrams = CharTokenizer(), CharTokenizer(ngram=2)
    text = "不 好看"
    assert bigrams.tokenize(text) == ["不好", "好看", "看</s>"]
    assert len(bigrams.tokenize(text)) == len(chars.tokenize(text))
    bigrams.build_vocab(["不好看", "很好看"])
    loaded = Tokenizer.load(bigrams.save(tmp_path / "bigrams.json"))
    assert loaded.ngram == 2 and torch.equal(loaded.encode("好看", 4), bigrams.encode("好看", 4))
    with pytest.raises(ValueError, match=r"`ngram` to be an int >= 1. Received: ngram=0"):
        CharTokenizer(ngram=0)


def test_dataset_with_two_tokenizers_yields_two_inputs():
    chars, bigrams = CharTokenizer(), CharTokenizer(ngram=2)
    texts = ["很好看", "不好"]
    chars.build_vocab(texts)
    bigrams.build_vocab(texts)
    ds = TextClassificationDataset(texts, [1, 0], [chars, bigrams], max_len=4)
    c, b, label = ds[1]
    assert c.tolist() == chars.encode("不好", 4).tolist() and b.tolist() == bigrams.encode("不好", 4).tolist()
    assert label.item() == 0 and ds.ids is ds.inputs[0]
    with pytest.raises(TypeError, match="`tokenizer` to be a sampan.text Tokenizer or a list of them"):
        TextClassificationDataset(texts, [1, 0], ["chars"], max_len=4)


def test_one_string_as_texts_or_a_column_of_labels_is_refused_by_name():
    """``TextClassificationDataset("好看", [1, 0], ...)`` made the characters two texts; a column of labels
    (``df[["label"]].to_numpy()``, shape [N, 1]) passed and failed later in the loss."""
    tok = CharTokenizer()
    tok.build_vocab(["好看", "难看"])
    with pytest.raises(TypeError, match=r"Expected `texts` to be a list of texts.*Received: texts='好看'.*pass \[text\]"):
        TextClassificationDataset("好看", [1, 0], tok, max_len=4)
    with pytest.raises(TypeError, match=r"`texts`.*list\(texts\) for a generator"):
        TextClassificationDataset((t for t in ["好看", "难看"]), [1, 0], tok, max_len=4)
    with pytest.raises(ValueError, match=r"`labels`.*a 1-D sequence.*shape \[2, 1\].*labels.ravel\(\)"):
        TextClassificationDataset(["好看", "难看"], torch.tensor([[1], [0]]), tok, max_len=4)
    assert TextClassificationDataset(["好看", "难看"], torch.tensor([[1], [0]]).ravel(), tok, max_len=4).labels.tolist() \
        == [1, 0]


@pytest.mark.parametrize("edit, refused", [
    (lambda d: d.update(max_len=100), r"keys \['lower', 'ngram', 'tokenizer', 'vocab'\].*this one has \['max_len'\]"),
    (lambda d: d["vocab"].pop("pad_token"), r"`data\['pad_token'\]` to be a str"),
    (lambda d: d["vocab"]["tokens"].insert(3, d["vocab"]["tokens"][0]), r"`data\['tokens'\]\[3\]` to be a string "
                                                                       r"listed once.*each token's id is its place"),
    (lambda d: d["vocab"]["tokens"].insert(0, "<unk>"), r"`data\['tokens'\]\[0\]`"),
    (lambda d: d.pop("vocab"), r"no 'vocab'"),
])
def test_a_tokenizer_file_of_another_shape_is_refused_by_name(tmp_path, edit, refused):
    """A hand-edited or foreign file gave a bare TypeError or KeyError; a token listed twice shifted every id after
    it by one, silently (a trained model's embedding rows no longer matched its characters)."""
    tok = CharTokenizer(ngram=2)
    tok.build_vocab(["好看的书", "难看的书"])
    path = tok.save(tmp_path / "tok.json")
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data, ensure_ascii=False))
    with pytest.raises(ValueError, match=refused):
        Tokenizer.load(path)


def test_a_tokenizer_file_that_is_not_an_object_is_refused(tmp_path):
    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"`path` to be a tokenizer file of kind \['char', 'word'\]"):
        Tokenizer.load(path)
