"""An InputSpec the network cannot take is refused naming the spec and the layer, before any export runs."""
from __future__ import annotations

import pytest
import torch

import sampan
from sampan.jit._specs import run_on_examples


def small_cnn():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(4 * 6 * 6, 10))


@pytest.mark.parametrize("export", ["jit", "onnx"])
def test_export_with_a_spec_of_the_wrong_channels_names_the_spec_and_the_conv(tmp_path, export):
    spec = sampan.InputSpec([None, 3, 8, 8], "float32", "image")
    save = sampan.jit.save if export == "jit" else sampan.onnx.export
    with pytest.raises(ValueError, match=r"Received: image \[None, 3, 8, 8\] float32 \(example \[2, 3, 8, 8\]\); "
                                         r"layer `0` \(Conv2d\) refused them: .*expected input\[2, 3, 8, 8\] to have 1 "
                                         r"channels.*HINT: fix the InputSpec"):
        save(small_cnn(), tmp_path / "cnn", input_spec=[spec])
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_a_spec_of_the_wrong_size_names_the_layer_deep_inside():
    net, spec = small_cnn(), sampan.InputSpec([None, 1, 10, 10], "float32", "image")
    with pytest.raises(ValueError, match=r"layer `3` \(Linear\) refused them: mat1 and mat2 shapes cannot be multiplied"):
        run_on_examples(net, [spec], (spec.example(batch=2),))
    good = sampan.InputSpec([None, 1, 8, 8], "float32", "image")
    assert run_on_examples(net, [good], (good.example(batch=2),)).shape == (2, 10)
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in net.modules())  # hooks removed


def test_input_spec_takes_what_paddle_takes():
    """NumPy dtypes and integers, and Paddle's stop_gradient keyword (accepted, ignored)."""
    import numpy as np

    spec = sampan.InputSpec([None, np.int64(4)], np.float32, "x", stop_gradient=True)
    assert spec == sampan.InputSpec([None, 4], "float32", "x") and spec.shape == (None, 4)
    assert type(spec.shape[1]) is int
    assert sampan.InputSpec([-1, 3], np.dtype("int64")).dtype == "int64"
    assert sampan.InputSpec([2], "int16").torch_dtype == torch.int16
    with pytest.raises(ValueError, match=r"Expected `dtype` .*Received: dtype='uint16'. HINT: Paddle stores "
                                         r"bfloat16 as uint16; write dtype='bfloat16'"):
        sampan.InputSpec([None, 4], "uint16")
    with pytest.raises(ValueError, match=r"Expected `dtype` .*NumPy dtype. Received: dtype=<class 'numpy.complex64'>"):
        sampan.InputSpec([None, 4], np.complex64)
    with pytest.raises(ValueError, match=r"Expected `shape` to be positive ints"):
        sampan.InputSpec([None, 4.0])


def test_example_inputs_take_other_dynamic_sizes_from_the_traced_shapes():
    from sampan.spec import example_inputs

    specs = [sampan.InputSpec([None, 1, None, None]), sampan.InputSpec([None, None], "int64")]
    image, ids = example_inputs(specs, batch=3, like=[[2, 1, 28, 30], [2, 17]])
    assert image.shape == (3, 1, 28, 30) and ids.shape == (3, 17)
    assert [t.shape for t in example_inputs(specs, batch=1)] == [(1, 1, 8, 8), (1, 8)]  # no shapes: the default
