import os

import numpy as np
import pytest
import torch

import sampan.data as data
from sampan.data import generated
from sampan.data.synthetic import content_sha256


def test_make_shapes_is_deterministic_and_balanced():
    a_images, a_labels = data.make_shapes(50, seed=11)
    b_images, b_labels = data.make_shapes(50, seed=11)
    assert a_images.shape == (50, 32, 32, 3) and a_images.dtype == np.uint8
    assert np.array_equal(a_images, b_images) and np.array_equal(a_labels, b_labels)
    assert np.bincount(a_labels).tolist() == [5] * 10
    c_images, _ = data.make_shapes(50, seed=12)
    assert not np.array_equal(a_images, c_images)
    assert len(data.SHAPE_CLASSES) >= 10


def test_shape_classes_differ_in_what_is_drawn():
    images, labels = data.make_shapes(200, seed=0)
    # the fraction of pixels far from the background colour (corner pixel) per class
    corner = images[:, :1, :1, :].astype(int)
    ink = (np.abs(images.astype(int) - corner).sum(axis=3) > 90).mean(axis=(1, 2))
    per_class = [ink[labels == c].mean() for c in range(10)]
    assert min(per_class) > 0.03 and max(per_class) < 0.6
    ring, circle = per_class[data.SHAPE_CLASSES.index("ring")], per_class[data.SHAPE_CLASSES.index("circle")]
    assert ring < circle


def test_make_defects_is_imbalanced_and_deterministic():
    images, labels = data.make_defects(1000, seed=5)
    assert np.bincount(labels).tolist() == [700, 120, 100, 80]
    again, _ = data.make_defects(1000, seed=5)
    assert np.array_equal(images, again)
    _, custom = data.make_defects(100, seed=5, weights=(1, 1, 1, 1))
    assert np.bincount(custom).tolist() == [25, 25, 25, 25]
    # defects darken or brighten pixels against the surface: clean images vary least
    spread = images.reshape(len(images), -1).astype(float).std(axis=1)
    assert spread[labels == 0].mean() < spread[labels == 3].mean()


def test_make_defects_rejects_bad_weights():
    with pytest.raises(ValueError, match=r"`weights`.*4 non-negative proportions.*Received: weights=\(1, 2\)"):
        data.make_defects(10, weights=(1, 2))
    with pytest.raises(ValueError, match=r"`num_samples` to be a positive int"):
        data.make_shapes(0)


def test_generated_splits_match_the_card_checksums(data_home):
    for split in ("train", "val", "test"):
        images, labels = generated.shapes_arrays(split)
        assert content_sha256(images, labels) == generated.SHAPES_SHA256[split]
        assert len(labels) == generated.SHAPES_SPLIT_SIZES[split]
        images, labels = generated.defects_arrays(split)
        assert content_sha256(images, labels) == generated.DEFECTS_SHA256[split]
    files = sorted(p.relative_to(data_home).as_posix() for p in data_home.rglob("*") if p.is_file())
    assert files == [f"{n}/v1/{s}.npz" for n in ("defects", "shapes") for s in ("test", "train", "val")]


def test_shapes_dataset_items_and_cache_reuse(data_home):
    ds = data.load_dataset("shapes", "val")
    image, label = ds[0]
    assert len(ds) == 1000 and image.shape == (3, 32, 32) and image.dtype == torch.float32
    assert label.dtype == torch.int64 and 0.0 <= image.min() and image.max() <= 1.0
    assert ds.classes == list(data.SHAPE_CLASSES)
    cached = data_home / "shapes" / "v1" / "val.npz"
    stamp = cached.stat().st_mtime_ns
    again = data.load_dataset("shapes", "val")
    assert cached.stat().st_mtime_ns == stamp  # read, not rewritten
    assert torch.equal(again.images, ds.images)


def test_a_corrupt_cache_file_is_regenerated(data_home):
    first = data.load_dataset("defects", "test")
    cached = data_home / "defects" / "v1" / "test.npz"
    cached.write_bytes(cached.read_bytes()[:1000])  # truncated
    assert torch.equal(data.load_dataset("defects", "test").images, first.images)
    images, labels = generated.defects_arrays("test")
    tampered = images.copy()
    tampered[0, 0, 0, 0] ^= 1
    with open(cached, "wb") as fh:
        np.savez(fh, images=tampered, labels=labels)
    repaired, _ = generated.defects_arrays("test")
    assert np.array_equal(repaired, images)
    assert content_sha256(*generated.defects_arrays("test")) == generated.DEFECTS_SHA256["test"]


@pytest.mark.parametrize("alter", ["float32", "int32 labels", "another shape"])
def test_a_cache_file_with_the_right_values_in_another_type_or_shape_is_regenerated(data_home, alter):
    """The checksum covers values only: the same pixels as float32 (unscaled 0..255 floats in the dataset), int32
    labels, or the same bytes reshaped to (N, 32, 3, 32) hashed alike and were used as they were."""
    first = data.load_dataset("defects", "val")
    images, labels = generated.defects_arrays("val")
    altered = {"float32": (images.astype(np.float32), labels), "int32 labels": (images, labels.astype(np.int32)),
               "another shape": (images.reshape(len(images), 32, 3, 32), labels)}[alter]
    assert content_sha256(*altered) == generated.DEFECTS_SHA256["val"]
    with open(data_home / "defects" / "v1" / "val.npz", "wb") as fh:
        np.savez(fh, images=altered[0], labels=altered[1])
    again = data.load_dataset("defects", "val")
    assert again.images.dtype == torch.uint8 and again.labels.dtype == torch.int64
    assert torch.equal(again.images, first.images) and again[0][0].max() <= 1.0


def test_defects_dataset_is_imbalanced_with_named_classes():
    ds = data.load_dataset("defects", "train")
    assert ds.classes == ["clean", "scratch", "spot", "crack"]
    assert torch.bincount(ds.labels).tolist() == [1400, 240, 200, 160]


def test_nothing_is_written_outside_the_data_directory(data_home, tmp_path):
    data.load_dataset("shapes", "test")
    outside = [p for p in tmp_path.rglob("*") if p.is_file() and data_home not in p.parents]
    assert outside == []
    assert os.environ["SAMPAN_DATA"] == str(data_home)
