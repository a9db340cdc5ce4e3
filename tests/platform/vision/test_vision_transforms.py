import numpy as np
import pytest
import torch
from PIL import Image

from sampan.vision import transforms as T


def test_to_tensor_converts_hwc_uint8_to_chw_float_in_unit_range():
    array = np.zeros((4, 5, 3), dtype=np.uint8)
    array[0, 1] = [255, 0, 51]
    out = T.ToTensor()(array)
    assert type(out) is torch.Tensor and out.dtype == torch.float32 and out.shape == (3, 4, 5)
    assert out[:, 0, 1].tolist() == pytest.approx([1.0, 0.0, 0.2])
    pil = T.ToTensor()(Image.fromarray(array))
    assert torch.equal(pil, out)
    assert T.ToTensor()(np.zeros((6, 7), dtype=np.uint8)).shape == (1, 6, 7)
    assert T.ToTensor(data_format="HWC")(array).shape == (4, 5, 3)


def test_to_tensor_leaves_float_tensors_unchanged():
    x = torch.rand(1, 8, 8)
    assert torch.equal(T.ToTensor()(x), x)


def test_normalize_accepts_scalars_and_channel_lists():
    x = torch.ones(3, 2, 2)
    assert torch.allclose(T.Normalize(mean=0.5, std=0.5)(x), torch.ones(3, 2, 2))
    out = T.Normalize(mean=[0.0, 0.5, 1.0], std=[1.0, 0.5, 1.0])(x)
    assert out[:, 0, 0].tolist() == [1.0, 1.0, 0.0]
    hwc = T.Normalize(mean=[0.0, 0.5, 1.0], std=[1.0, 0.5, 1.0], data_format="HWC")(torch.ones(2, 2, 3))
    assert hwc[0, 0].tolist() == [1.0, 1.0, 0.0]
    with pytest.raises(ValueError, match=r"`data_format`.*'CHW' or 'HWC'.*Received: data_format='NCHW'"):
        T.Normalize(0.5, 0.5, data_format="NCHW")


def test_flips_take_paddle_prob():
    x = torch.arange(6.0).reshape(1, 2, 3)
    assert torch.equal(T.RandomHorizontalFlip(prob=1.0)(x), x.flip(-1))
    assert torch.equal(T.RandomHorizontalFlip(prob=0.0)(x), x)
    assert torch.equal(T.RandomVerticalFlip(prob=1.0)(x), x.flip(-2))


def test_transpose_reorders_axes():
    assert T.Transpose()(np.zeros((4, 5, 3))).shape == (3, 4, 5)
    assert T.Transpose((1, 2, 0))(torch.zeros(3, 4, 5)).shape == (4, 5, 3)


def test_compose_pipeline_on_a_catalog_image():
    from sampan.data import load_dataset

    torch.manual_seed(0)
    pipeline = T.Compose([
        T.Resize(28), T.RandomRotation(10), T.RandomCrop(28, padding=2), T.CenterCrop(24),
        T.Normalize(mean=[0.5], std=[0.5]),
    ])
    ds = load_dataset("digits", "train", transform=pipeline)
    image, label = ds[0]
    assert image.shape == (1, 24, 24) and -1.0 <= image.min() and image.max() <= 1.0
    colour = T.ColorJitter(brightness=0.5, contrast=0.5, saturation=0.5, hue=0.1)(torch.rand(3, 8, 8))
    assert colour.shape == (3, 8, 8)


def test_exports_are_listed():
    for name in ("Compose", "Resize", "Normalize", "ToTensor", "RandomHorizontalFlip", "RandomRotation",
                 "RandomCrop", "CenterCrop", "ColorJitter", "Transpose"):
        assert name in T.__all__ and callable(getattr(T, name))


def _hwc(h=28, w=28):
    return np.random.RandomState(0).randint(0, 256, (h, w, 3)).astype(np.uint8)


def test_geometric_transforms_take_hwc_arrays_and_return_arrays_like_paddle():
    image = _hwc()
    out = T.Resize(16)(image)
    assert isinstance(out, np.ndarray) and out.shape == (16, 16, 3) and out.dtype == np.uint8
    expected = T.Resize(16)(torch.from_numpy(image).permute(2, 0, 1)).permute(1, 2, 0).numpy()
    np.testing.assert_array_equal(out, expected)  # the same as on the CHW tensor
    assert T.Resize((5, 6))(image[:, :, 0]).shape == (5, 6)  # a HW image stays HW
    assert T.CenterCrop(10)(image).shape == (10, 10, 3) and T.Grayscale()(image).shape == (28, 28, 1)
    np.testing.assert_array_equal(T.RandomHorizontalFlip(prob=1.0)(image), image[:, ::-1])
    assert tuple(T.Compose([T.Resize(16), T.ToTensor()])(image).shape) == (3, 16, 16)
    with pytest.raises(ValueError, match=r"Expected `image` to be one HWC or HW image for Resize.*\(2, 4, 4, 3\)"):
        T.Resize(2)(np.zeros((2, 4, 4, 3), dtype=np.uint8))


def test_transforms_taking_arrays_still_pickle_for_data_loader_workers():
    import pickle
    again = pickle.loads(pickle.dumps(T.Compose([T.Resize(16), T.RandomCrop(8)])))
    assert type(again.transforms[0]) is T.Resize and again(_hwc()).shape == (8, 8, 3)


def test_normalize_on_arrays_follows_paddle_and_its_data_format():
    chw = _hwc().transpose(2, 0, 1).astype(np.float32)
    out = T.Normalize([127.5] * 3, [127.5] * 3)(chw)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == (3, 28, 28)
    np.testing.assert_allclose(out, (chw - 127.5) / 127.5, rtol=1e-6)
    hwc = T.Normalize([0.0, 10.0, 20.0], [1.0, 2.0, 4.0], data_format="HWC")(np.full((2, 2, 3), 20.0))
    assert hwc[0, 0].tolist() == [20.0, 5.0, 0.0]
    assert T.Normalize(0.5, 0.5)(np.ones((4, 5), dtype=np.uint8)).tolist() == np.ones((4, 5)).tolist()


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64])
def test_to_tensor_scales_only_uint8(dtype):
    image = _hwc()
    out = T.ToTensor()(image.astype(dtype))
    assert out.dtype == torch.float32 and out.shape == (3, 28, 28)
    torch.testing.assert_close(out, torch.from_numpy(image.transpose(2, 0, 1)).float())  # the values, unscaled
    assert float(T.ToTensor()(image).max()) <= 1.0


def test_transpose_takes_a_hw_array_as_one_channel():
    assert T.Transpose()(np.zeros((4, 5))).shape == (1, 4, 5)
    with pytest.raises(ValueError, match=r"Expected `image` to be an array with 3 axes for order=\(2, 0, 1\)"):
        T.Transpose()(np.zeros(5))
