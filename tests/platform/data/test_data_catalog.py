from pathlib import Path

import pytest
import yaml

import sampan.data as data
from sampan.data import generated, reviews
from sampan.data._splits import stratified_split
import numpy as np

CATALOG_DIR = Path(__file__).resolve().parents[3] / "datasets"
NAMES = ["cifar10", "defects", "digits", "fashion-mnist", "mnist", "peoples-daily", "reviews-zh", "shapes"]


def test_list_datasets_names_the_whole_catalog():
    assert data.list_datasets() == NAMES


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"Received: name='mnsit'.*") as err:
        data.load_dataset("mnsit")
    for name in NAMES:
        assert name in str(err.value)


def test_unknown_split_names_the_splits():
    with pytest.raises(ValueError, match=r"`split`.*\['train', 'val', 'test'\].*Received: split='dev'"):
        data.load_dataset("digits", "dev")
    with pytest.raises(ValueError, match=r"\['train', 'test'\] for 'mnist'"):
        data.load_dataset("mnist", "val")


def test_mode_is_paddles_name_for_split():
    test = data.load_dataset("digits", mode="test")  # paddle.vision.datasets.MNIST(mode="test")
    assert test.split == "test" and len(test) == data.dataset_info("digits").splits["test"]
    assert data.load_dataset("digits", "test", mode="test").split == "test"
    with pytest.raises(ValueError, match=r"Expected `mode` to be one of \['train', 'val', 'test'\].*mode='dev'"):
        data.load_dataset("digits", mode="dev")
    with pytest.raises(ValueError, match=r"Expected `mode` to be the same as split='val'.*HINT: pass only split"):
        data.load_dataset("digits", "val", mode="test")


def test_unknown_option_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match=r"Expected `sz` to be an option that 'digits' accepts \(size\)"):
        data.load_dataset("digits", sz=28)
    with pytest.raises(TypeError, match=r"'shapes' accepts \(no options\)"):
        data.load_dataset("shapes", size=28)


def test_names_are_case_and_underscore_insensitive():
    assert data.dataset_info("Reviews_ZH").name == "reviews-zh"
    assert data.dataset_info("FASHION_MNIST").name == "fashion-mnist"


@pytest.mark.parametrize("name", NAMES)
def test_card_agrees_with_the_code(name):
    folder = CATALOG_DIR / name
    card = yaml.safe_load((folder / "card.yaml").read_text(encoding="utf-8"))
    assert (folder / "README.md").read_text(encoding="utf-8").startswith(f"# {name}\n")
    for key in ("name", "source", "license", "size", "splits", "citation", "num_classes"):
        assert card.get(key) or card.get(key) == 0, f"{name}: card lacks {key}"  # a corpus has 0 classes
    info = data.dataset_info(name)
    assert card["name"] == info.name
    assert card["splits"] == info.splits
    assert card["num_classes"] == info.num_classes
    assert card["license"] == info.license
    assert card["ships_offline"] is info.ships_offline


def test_cards_hold_the_checksums_the_code_verifies():
    def sha(name):
        return yaml.safe_load((CATALOG_DIR / name / "card.yaml").read_text(encoding="utf-8"))["sha256"]

    assert sha("shapes") == generated.SHAPES_SHA256
    assert sha("defects") == generated.DEFECTS_SHA256
    assert sha("reviews-zh") == reviews.SOURCE_SHA256


def test_stratified_split_is_exact_disjoint_and_proportional():
    labels = np.repeat(np.arange(3), [500, 300, 200])
    parts = stratified_split(labels, val=100, test=100, seed=3)
    assert [len(parts[s]) for s in ("train", "val", "test")] == [800, 100, 100]
    assert len(np.unique(np.concatenate(list(parts.values())))) == 1000
    assert np.bincount(labels[parts["test"]]).tolist() == [50, 30, 20]
    again = stratified_split(labels, val=100, test=100, seed=3)
    assert all(np.array_equal(parts[s], again[s]) for s in parts)
    other = stratified_split(labels, val=100, test=100, seed=4)
    assert not np.array_equal(parts["test"], other["test"])


def test_non_string_name_or_split_is_a_value_error():
    with pytest.raises(ValueError, match=r"Received: name=\['digits'\]"):
        data.load_dataset(["digits"])
    with pytest.raises(ValueError, match=r"Received: split=0"):
        data.load_dataset("digits", 0)


def test_reached_through_the_sampan_package():
    import sampan

    assert sampan.data.list_datasets() == NAMES
    assert sampan.vision.models.LeNet is sampan.vision.LeNet
    assert "TextCNN" in sampan.text.__all__



def _uint8_images():
    import torch
    from sampan.data._base import ImageDataset

    g = torch.Generator().manual_seed(0)
    return ImageDataset(torch.randint(0, 256, (20, 1, 4, 4), dtype=torch.uint8, generator=g),
                        torch.randint(0, 3, (20,), generator=g), ["a", "b", "c"])


@pytest.mark.parametrize("make", [lambda: data.load_dataset("digits", "train"),
                                  lambda: data.load_dataset("digits", "train", size=28), _uint8_images],
                         ids=["digits", "digits-28", "uint8"])
def test_a_dataloader_batch_is_the_items_of_getitem_and_a_fresh_copy(make):
    import torch
    from torch.utils.data import DataLoader, Subset

    ds = make()
    indices = [5, 0, 17, 3]
    for source in (ds, Subset(ds, list(range(20)))):
        batched = next(iter(DataLoader(source, batch_size=4, sampler=indices)))
        one_by_one = [source[i] for i in indices]
        assert batched[0].dtype == torch.float32 and batched[1].dtype == torch.int64
        assert torch.equal(batched[0], torch.stack([x for x, _ in one_by_one]))
        assert torch.equal(batched[1], torch.stack([y for _, y in one_by_one]))
        batched[0].add_(1.0)  # a learner's in-place change to a batch
    assert torch.equal(ds[5][0], one_by_one[0][0])  # never reaches the dataset
