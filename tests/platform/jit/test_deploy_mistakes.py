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


# -- to_static(net, input_spec=[...]) called with inputs the spec contradicts ------------------------------------
class _AnySize(nn.Module):
    """Takes images of any rank >= 3 and any size, as many learners' networks do (flatten, global pooling)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, padding=1)
        self.head = nn.Linear(2, 3)

    def forward(self, x):
        return self.head(self.conv(x).mean(dim=(-2, -1)))


class _TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x, mask):
        return self.linear(x) * mask


def _static(net: nn.Module, spec: list, **options) -> nn.Module:
    return sampan.jit.to_static(net, input_spec=spec, backend="eager", **options)


def test_to_static_spec_of_the_wrong_rank_is_refused_at_the_first_call():
    net = _static(nn.Sequential(nn.Flatten(), nn.Linear(784, 3)), [InputSpec([None, 28, 28])])
    with pytest.raises(ValueError, match=r"(?s)`input_spec\[0\]`.*rank 4.*\[2, 1, 28, 28\].*rank 3.*HINT: write "
                                         r"input_spec=\[sampan\.InputSpec\(\[None, 1, 28, 28\], 'float32'"):
        net(torch.randn(2, 1, 28, 28))
    assert net.forward.status == "pending"  # nothing compiled for the wrong rank
    assert net(torch.randn(2, 28, 28)).shape == (2, 3)  # the spec's rank still works
    assert net.forward.status == "compiled"


@pytest.mark.parametrize("net, spec, inputs", [
    (_TwoInputs, [InputSpec([None, 4], name="x")], (torch.ones(2, 4), torch.ones(2, 1))),
    (lambda: nn.Linear(4, 3), [InputSpec([None, 4], name="x"), InputSpec([None, 1], name="mask")], (torch.ones(2, 4),)),
], ids=["too-few-specs", "too-many-specs"])
def test_to_static_wrong_number_of_specs_is_refused(net, spec, inputs):
    static = _static(net(), spec)
    with pytest.raises(ValueError, match=rf"(?s)`input_spec`.*{len(spec)} InputSpec.*called with {len(inputs)} "
                                         r"tensor.*HINT: write input_spec=\[sampan\.InputSpec\(\[None, 4\]"):
        static(*inputs)
    assert static.forward.status == "pending"


def test_to_static_dtype_contradicting_the_spec_is_refused():
    net = _static(nn.Linear(4, 3), [InputSpec([None, 4], "int64", "ids")])
    with pytest.raises(ValueError, match=r"(?s)`input_spec\[0\]`.*'ids'.*dtype float32.*int64.*HINT: .*"
                                         r"dtype='float32'.*x\.to\(torch\.int64\)"):
        net(torch.randn(2, 4))


def test_to_static_static_dimension_contradicted_at_the_first_call():
    net = _static(_AnySize(), [InputSpec([None, 1, 28, 28], name="image")])
    with pytest.raises(ValueError, match=r"(?s)`input_spec\[0\]`.*'image'.*\[2, 1, 32, 32\].*dimension 2 is 32.*"
                                         r"28.*HINT: .*InputSpec\(\[None, 1, None, None\]"):
        net(torch.randn(2, 1, 32, 32))


@pytest.mark.parametrize("mode", ["inference", "inference-timed", "training", "training-timed"])
def test_to_static_static_dimension_contradicted_by_a_later_call(mode):
    """A first call that fits the spec compiles; a later one with a size the spec fixes otherwise would recompile
    with that dimension dynamic (torch's automatic dynamic shapes), never saying the spec is wrong."""
    net = _static(_AnySize(), [InputSpec([None, 1, 28, 28], name="image")], pick_faster=mode.endswith("timed"))
    net.train(mode.startswith("training"))
    with torch.set_grad_enabled(mode.startswith("training")):
        net(torch.randn(2, 1, 28, 28))
        net(torch.randn(5, 1, 28, 28))  # the batch is dynamic
        with pytest.raises(ValueError, match=r"(?s)`input_spec\[0\]`.*\[2, 1, 32, 32\].*dimension 2 is 32"):
            net(torch.randn(2, 1, 32, 32))
        assert net(torch.randn(3, 1, 28, 28)).shape == (3, 3)


def test_to_static_pickled_before_calls_were_checked_still_loads_and_checks():
    """A StaticFunction pickled by an earlier Sampan kept ``input_spec`` as a plain attribute."""
    import copy

    net = _static(nn.Linear(4, 3), [InputSpec([None, 4], name="x")])
    old = copy.copy(net.forward.__getstate__())
    old["input_spec"] = old.pop("_input_spec")
    for derived in ("_dynamic_dims", "_admitted"):
        old.pop(derived)
    restored = object.__new__(type(net.forward))
    restored.__setstate__(old)
    assert restored.input_spec == net.forward.input_spec and restored._dynamic_dims == ([0],)
    with pytest.raises(ValueError, match=r"`input_spec\[0\]`.*rank 3"):
        restored._checked((torch.ones(2, 4, 1),), {})
