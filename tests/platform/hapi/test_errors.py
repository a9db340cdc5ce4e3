"""Bad input gets an error that names the argument, the value and the fix."""
import pytest
import torch
from torch.utils.data import TensorDataset

import sampan
from sampan.errors import NonFiniteLossError


def model_for(net, **kw):
    m = sampan.Model(net, **kw)
    m.prepare(torch.optim.SGD(net.parameters(), lr=0.1), torch.nn.CrossEntropyLoss())
    return m


def test_fit_before_prepare(blobs, mlp):
    with pytest.raises(RuntimeError, match=r"Call model.prepare\(optimizer, loss, metrics\) before model.fit"):
        sampan.Model(mlp()).fit(blobs[0])


def test_wrong_input_shape_against_input_spec(blobs, mlp):
    model = model_for(mlp(), inputs=sampan.InputSpec([None, 8], "float32", "features"))
    with pytest.raises(ValueError, match=r"inputs\[0\] 'features' has shape \[32, 16\] but its InputSpec expects "
                                         r"\[None, 8\].*HINT"):
        model.fit(blobs[0], verbose=0)


def test_wrong_input_shape_without_spec_names_the_batch(blobs):
    model = model_for(torch.nn.Linear(8, 2))
    with pytest.raises(ValueError, match=r"forward pass failed on the first batch: inputs \[\[32, 16\] float32\].*HINT"):
        model.fit(blobs[0], verbose=0)


def test_label_dtype_mismatch(mlp):
    data = TensorDataset(torch.randn(8, 16), torch.tensor([0.0, 1.0] * 4))
    with pytest.raises(ValueError, match=r"Expected `labels` to be int64 class indices for CrossEntropyLoss. "
                                         r"Received: labels of dtype float32.*y.long\(\)"):
        model_for(mlp()).fit(data, verbose=0)


def test_empty_dataset(mlp):
    empty = TensorDataset(torch.randn(0, 16), torch.zeros(0, dtype=torch.long))
    with pytest.raises(ValueError, match=r"Expected `train_data` to be a dataset with at least one sample"):
        model_for(mlp()).fit(empty, verbose=0)


def test_drop_last_with_too_few_samples(mlp):
    tiny = TensorDataset(torch.randn(4, 16), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"produced no batch"):
        model_for(mlp()).fit(tiny, batch_size=8, drop_last=True, verbose=0)


def test_non_finite_loss_names_the_batch(mlp):
    x = torch.randn(64, 16)
    x[40] = float("nan")
    data = TensorDataset(x, torch.zeros(64, dtype=torch.long))
    with pytest.raises(NonFiniteLossError, match=r"became nan at epoch 1, batch 5 .*HINT: lower the learning rate") as err:
        model_for(mlp()).fit(data, batch_size=8, shuffle=False, verbose=0)
    assert err.value.step == 5 and err.value.epoch == 0


@pytest.mark.parametrize("kwargs, pattern", [
    ({"epochs": 0}, r"Expected `epochs` to be an int >= 1. Received: epochs=0"),
    ({"batch_size": -2}, r"Expected `batch_size` to be an int >= 1. Received: batch_size=-2"),
    ({"eval_freq": 1.5}, r"Expected `eval_freq` to be an int >= 1"),
])
def test_bad_fit_arguments(blobs, mlp, kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        model_for(mlp()).fit(blobs[0], verbose=0, **kwargs)


def test_bad_prepare_arguments(mlp):
    net = mlp()
    with pytest.raises(TypeError, match=r"Expected `optimizer` to be a torch.optim.Optimizer"):
        sampan.Model(net).prepare(optimizer="adam")
    with pytest.raises(ValueError, match=r"Expected `accumulate_steps` to be an int >= 1. Received: accumulate_steps=0"):
        sampan.Model(net).prepare(torch.optim.SGD(net.parameters(), 0.1), accumulate_steps=0)
    with pytest.raises(ValueError, match=r"Expected `device` to be a device this machine has"):
        if torch.cuda.is_available():
            raise ValueError("Expected `device` to be a device this machine has")  # nothing to provoke with a GPU
        sampan.Model(net).prepare(device="cuda")
    with pytest.raises(TypeError, match=r"Expected `network` to be a torch.nn.Module"):
        sampan.Model(lambda x: x)


def test_bad_dataset_type(mlp):
    with pytest.raises(TypeError, match=r"Expected `train_data` to be a torch Dataset or DataLoader.*TensorDataset"):
        model_for(mlp()).fit(42, verbose=0)


def test_input_spec_validation():
    with pytest.raises(ValueError, match=r"Expected `shape` to be positive ints"):
        sampan.InputSpec([None, 0, 3])
    with pytest.raises(ValueError, match=r"Expected `dtype` to be one of"):
        sampan.InputSpec([None, 3], "float33")
    spec = sampan.InputSpec([None, 3], "float32", "x")
    with pytest.raises(ValueError, match=r"input 'x' has rank 1 .*expects rank 2"):
        spec.check(torch.zeros(3))
    with pytest.raises(ValueError, match=r"input 'x' has dtype int64 but its InputSpec expects float32"):
        spec.check(torch.zeros(2, 3, dtype=torch.long))
    spec.check(torch.zeros(5, 3))
    assert spec.dynamic_dims == (0,)
