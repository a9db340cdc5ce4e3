import pytest
import torch
from torch.utils.data import DataLoader

import sampan.data as data


def _all(ds):
    return torch.stack([ds[i][0] for i in range(len(ds))])


def test_digits_splits_are_fixed_disjoint_and_stratified():
    splits = {s: data.load_dataset("digits", s) for s in ("train", "val", "test")}
    assert {s: len(d) for s, d in splits.items()} == {"train": 1257, "val": 270, "test": 270}
    total = torch.cat([d.labels for d in splits.values()])
    assert torch.bincount(total).sum() == 1797
    counts = torch.bincount(splits["test"].labels, minlength=10)
    assert counts.min() >= 26 and counts.max() <= 28
    image, label = splits["train"][0]
    assert image.shape == (1, 8, 8) and image.dtype == torch.float32
    assert label.dtype == torch.int64
    pixels = _all(splits["val"])
    assert pixels.min() == 0.0 and pixels.max() == 1.0
    # the same images in the same order every time
    assert torch.equal(_all(data.load_dataset("digits", "test")), _all(splits["test"]))
    # no image shared by train and test (digits has a few exact duplicates; allow those)
    train_keys = {tuple(x.flatten().tolist()) for x in splits["train"].images}
    shared = sum(tuple(x.flatten().tolist()) in train_keys for x in splits["test"].images)
    assert shared <= 3


def test_digits_resized_to_28_for_lenet_and_batches_feed_cross_entropy():
    ds = data.load_dataset("digits", "train", size=28)
    images, labels = next(iter(DataLoader(ds, batch_size=16)))
    assert images.shape == (16, 1, 28, 28) and labels.shape == (16,) and labels.dtype == torch.int64
    assert 0.0 <= images.min() and images.max() <= 1.0
    loss = torch.nn.functional.cross_entropy(torch.zeros(16, 10), labels)
    assert loss.item() == pytest.approx(torch.log(torch.tensor(10.0)).item())


def test_digits_transform_applies_to_the_image():
    ds = data.load_dataset("digits", "val", transform=lambda x: x * 2 - 1)
    plain = data.load_dataset("digits", "val")
    assert torch.equal(ds[5][0], plain[5][0] * 2 - 1)
    assert ds.classes == [str(d) for d in range(10)]


def test_digits_bad_size_says_what_to_pass():
    with pytest.raises(ValueError, match=r"`size`.*at least 8.*Received: size=4.*size=28"):
        data.load_dataset("digits", size=4)


def test_reviews_zh_is_deduplicated_and_split_without_overlap():
    splits = {s: data.load_dataset("reviews-zh", s) for s in ("train", "val", "test")}
    assert {s: len(d) for s, d in splits.items()} == {"train": 13891, "val": 1736, "test": 1736}
    texts = [t for d in splits.values() for t in d.texts]
    assert len(set(texts)) == len(texts) == 17363
    text, label = splits["train"][0]
    assert isinstance(text, str) and text and isinstance(label, int) and label in (0, 1)
    assert splits["test"].classes == ["negative", "positive"]
    positive = splits["test"].labels.float().mean().item()
    overall = torch.cat([d.labels for d in splits.values()]).float().mean().item()
    assert positive == pytest.approx(overall, abs=0.005)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in text)


def test_reviews_zh_transform_applies_to_the_text():
    ds = data.load_dataset("reviews-zh", "val", transform=len)
    plain = data.load_dataset("reviews-zh", "val")
    assert ds[3] == (len(plain[3][0]), plain[3][1])


def test_items_are_copies_so_in_place_edits_do_not_reach_the_dataset():
    ds = data.load_dataset("digits", "test")
    before = ds.images[0].clone()
    image, _ = ds[0]
    image.mul_(0)
    assert torch.equal(ds.images[0], before)


def test_image_dataset_checks_its_inputs():
    with pytest.raises(ValueError, match=r"`images` to be a tensor \[N, C, H, W\]"):
        data.ImageDataset(torch.zeros(3, 8, 8), torch.zeros(3), ["a"])
    with pytest.raises(ValueError, match=r"`labels` to be one label per image \(3\)"):
        data.ImageDataset(torch.zeros(3, 1, 8, 8), torch.zeros(2), ["a"])
    with pytest.raises(ValueError, match=r"one label per text \(1\)"):
        data.TextDataset(["a"], [0, 1], ["x", "y"])
