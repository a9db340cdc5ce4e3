"""The int8 GEMV kernel (sampan.quantization.gemv.linear_w8) against the weight-only float reference."""
import pytest
import torch

from sampan.quantization.gemv import gemv_unavailable, linear_w8


def _reference(x, w, scale, bias):
    y = x.double() @ (w.double() * scale.double()[:, None]).T
    return y if bias is None else y + bias.double()


@pytest.mark.parametrize("n, k", [(37, 70), (8, 16), (5, 3), (256, 1024), (6, 20000)])
def test_linear_w8_matches_the_float_reference_on_every_shape(n, k):
    # 70 / 3: a tail of k % 16 in float; 20000: more than one int32 chunk of k
    assert gemv_unavailable() is None
    g = torch.Generator().manual_seed(n * k)
    w = torch.randint(-128, 128, (n, k), dtype=torch.int8, generator=g)
    scale, bias = torch.rand(n, generator=g) / 100, torch.randn(n, generator=g)
    for x in (torch.randn(1, k, generator=g), torch.randn(3, k, generator=g) * 1e4, torch.zeros(1, k)):
        # the bound: int16 steps of max|x| / 16383 over sums of |x| |w| scale
        size = x.double().abs() @ (w.double().abs() * scale.double()[:, None]).T + 1e-30
        for b in (bias, None):
            got = linear_w8(x, w, scale, b)
            assert got.dtype == torch.float32 and got.shape == (x.shape[0], n)
            assert ((got.double() - _reference(x, w, scale, b)).abs() / size.max()).max() < 1e-4
        relu = linear_w8(x, w, scale, bias, relu=True)
        assert torch.equal(relu, linear_w8(x, w, scale, bias).clamp_min(0))


def test_rows_with_nan_infinity_or_tiny_values_come_out_as_the_reference_does():
    w = torch.randint(-128, 128, (9, 70), dtype=torch.int8, generator=torch.Generator().manual_seed(1))
    for special in (float("nan"), float("inf")):
        x = torch.randn(1, 70)
        x[0, 5] = special
        assert torch.equal(linear_w8(x, w, torch.ones(9)).isnan(), (x @ w.float().T).isnan())
    tiny = torch.rand(1, 70) * 1e-38  # below int16 steps a float can hold
    assert torch.allclose(linear_w8(tiny, w, torch.ones(9)), tiny @ w.float().T, rtol=1e-4, atol=0)


def test_bad_arguments_name_what_is_wrong():
    w = torch.zeros(4, 64, dtype=torch.int8)
    with pytest.raises(RuntimeError, match=r"x's last dimension must be in_features = 64, got x of shape \[2, 5\]"):
        linear_w8(torch.randn(2, 5), w, torch.ones(4))
    with pytest.raises(RuntimeError, match="w must be an int8 .* got Float"):
        linear_w8(torch.randn(1, 64), w.float(), torch.ones(4))
    with pytest.raises(RuntimeError, match=r"scale must hold one value per output row \(4\), got 3"):
        linear_w8(torch.randn(1, 64), w, torch.ones(3))
    with pytest.raises(RuntimeError, match="bias must hold 4 values, got 2"):
        linear_w8(torch.randn(1, 64), w, torch.ones(4), torch.ones(2))
    with pytest.raises(RuntimeError, match="x must be float32, got Double"):
        linear_w8(torch.randn(1, 64, dtype=torch.float64), w, torch.ones(4))


def test_no_input_features_gives_the_bias_on_every_row():
    bias = torch.randn(5)
    got = linear_w8(torch.empty(3, 0), torch.empty(5, 0, dtype=torch.int8), torch.ones(5), bias, relu=False)
    assert torch.equal(got, bias.expand(3, 5))
