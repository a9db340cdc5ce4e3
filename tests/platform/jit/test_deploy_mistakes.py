"""A learner's mistakes with the deployment API get a clear error naming the argument, and nothing is written."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import sampan
from sampan import InputSpec
from sampan.inference import Config, create_predictor
from sampan.jit import MissingModelError

SPEC = [InputSpec([None, 4], "float32", "x")]


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Linear(4, 3)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("deploy") / "m"
    sampan.jit.save(_net(), prefix, input_spec=SPEC)
    return prefix


@pytest.mark.parametrize("save", [sampan.jit.save, sampan.onnx.export], ids=["jit.save", "onnx.export"])
def test_save_without_a_path_names_path(save):
    with pytest.raises(TypeError, match=r"`path`.*path=None"):
        save(_net(), None, input_spec=SPEC)


def test_load_without_a_path_names_path():
    with pytest.raises(TypeError, match=r"`path`.*path=None"):
        sampan.jit.load(None)


@pytest.mark.parametrize("save", [sampan.jit.save, sampan.onnx.export], ids=["jit.save", "onnx.export"])
def test_save_of_a_sampan_model_points_to_its_network(save, tmp_path):
    with pytest.raises(TypeError, match=r"`layer`.*model\.network"):
        save(sampan.Model(_net()), tmp_path / "m", input_spec=SPEC)
    assert list(tmp_path.iterdir()) == []


def test_save_of_a_layer_class_asks_for_an_instance(tmp_path):
    with pytest.raises(TypeError, match=r"`layer`.*Linear\(\.\.\.\), an instance"):
        sampan.jit.save(nn.Linear, tmp_path / "m", input_spec=SPEC)


def test_save_of_a_to_static_function_says_it_is_not_a_module(tmp_path):
    fn = sampan.jit.to_static(lambda x: x * 2, input_spec=SPEC)
    with pytest.raises(TypeError, match=r"`layer` to be an nn.Module"):
        sampan.jit.save(fn, tmp_path / "f")


@pytest.mark.parametrize("suffix", ["", ".pt"])
def test_load_of_a_training_checkpoint_says_what_it_is(tmp_path, suffix):
    model = sampan.Model(_net(), inputs=SPEC)
    model.prepare(torch.optim.SGD(model.network.parameters(), lr=0.1), nn.MSELoss())
    model.save(str(tmp_path / "ck"))
    with pytest.raises(MissingModelError, match=r"`path`.*checkpoint.*sampan\.jit\.save"):
        sampan.jit.load(tmp_path / f"ck{suffix}")
    with pytest.raises(MissingModelError, match=r"`model_path`.*checkpoint"):
        create_predictor(Config(str(tmp_path / f"ck{suffix}")))


def test_config_of_a_folder_names_the_export_inside(exported):
    folder = str(exported.parent)
    with pytest.raises(MissingModelError, match=r"`model_path`.*not a folder.*model_path='[^']*/m'"):
        create_predictor(Config(folder))
    with pytest.raises(MissingModelError, match=r"`path`.*not a folder"):
        sampan.jit.load(folder)


def test_missing_export_keeps_its_message(tmp_path):
    with pytest.raises(MissingModelError, match="does not exist"):
        sampan.jit.load(tmp_path / "nothing")


@pytest.mark.parametrize("device", ["gpu", "cuda:x"])
def test_load_on_an_unknown_device_names_device(exported, device):
    with pytest.raises(ValueError, match=rf"`device`.*device={device!r}"):
        sampan.jit.load(exported, device=device)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_load_on_cuda_without_cuda_names_device(exported):
    with pytest.raises(ValueError, match=r"`device`.*no CUDA device.*device='cpu'"):
        sampan.jit.load(exported, device="cuda")


def test_loaded_program_refuses_a_numpy_array(exported):
    loaded = sampan.jit.load(exported)
    with pytest.raises(TypeError, match=r"`inputs\[0\]`.*torch\.from_numpy"):
        loaded(np.ones((2, 4), "float32"))


def test_loaded_program_refuses_a_list_of_tensors(exported):
    loaded = sampan.jit.load(exported)
    with pytest.raises(TypeError, match=r"`inputs\[0\]`.*separate arguments"):
        loaded([torch.ones(2, 4)])
    assert loaded(torch.ones(2, 4)).shape == (2, 3)


@pytest.mark.parametrize("setter, name, value", [
    ("set_cpu_math_library_num_threads", "num_threads", "4"),
    ("set_cpu_math_library_num_threads", "num_threads", True),
    ("set_warmup", "steps", True),
    ("enable_use_gpu", "device_id", True),
])
def test_config_setters_refuse_strings_and_bools(exported, setter, name, value):
    config = Config(str(exported))
    call = getattr(config, setter)
    with pytest.raises(ValueError, match=rf"`{name}`.*HINT"):
        call(device_id=value) if name == "device_id" else call(value)


def test_to_static_backend_typo_is_refused_at_once():
    with pytest.raises(ValueError, match=r"`backend`.*'inductr'.*did you mean backend='inductor'"):
        sampan.jit.to_static(_net(), backend="inductr")


def test_to_static_of_a_layer_class_asks_for_an_instance():
    with pytest.raises(TypeError, match=r"`layer_or_function`.*Linear\(\.\.\.\)"):
        sampan.jit.to_static(nn.Linear, input_spec=SPEC)


def test_onnx_opset_as_a_string_names_opset_version(tmp_path):
    pytest.importorskip("onnxscript")
    with pytest.raises(TypeError, match=r"`opset_version`.*'17'"):
        sampan.onnx.export(_net(), tmp_path / "m", input_spec=SPEC, opset_version="17")
    assert list(tmp_path.iterdir()) == []


def test_onnx_opset_too_old_is_refused_and_nothing_written(tmp_path):
    pytest.importorskip("onnxscript")
    with pytest.raises(ValueError, match=r"`opset_version`.*opset_version=5"):
        sampan.onnx.export(_net(), tmp_path / "m", input_spec=SPEC, opset_version=5)
    assert list(tmp_path.iterdir()) == []


def test_asking_for_onnx_runtime_without_an_onnx_file_points_to_onnx_export(exported):
    config = Config(str(exported))
    config.set_backend("onnxruntime")
    with pytest.raises(MissingModelError, match=r"has no 'onnx' artifact.*sampan\.onnx\.export\(\.\.\.\)"):
        create_predictor(config)
