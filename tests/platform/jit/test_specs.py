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
