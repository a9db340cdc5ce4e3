"""sampan.inference: Config, create_predictor, backends, input checks."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from sampan.inference import Config, Predictor, create_predictor
from sampan.jit import MissingModelError


def _predictor(prefix, backend="auto", **kw) -> Predictor:
    config = Config(prefix)
    config.disable_gpu()
    config.set_cpu_math_library_num_threads(torch.get_num_threads())
    config.set_backend(backend)
    for key, value in kw.items():
        getattr(config, key)(value)
    return create_predictor(config)


@pytest.mark.parametrize("backend", ["pt2", "onnxruntime", "auto"])
def test_every_backend_matches_eager_at_other_batch_sizes(exported_lenet, backend):
    net, prefix = exported_lenet
    predictor = _predictor(prefix, backend)
    assert predictor.get_input_names() == ["image"] and predictor.get_output_names() == ["logits"]
    for batch in (1, 7, 32):
        x = np.random.default_rng(batch).standard_normal((batch, 1, 28, 28)).astype("float32")
        (logits,) = predictor.run([x])
        assert isinstance(logits, np.ndarray) and logits.shape == (batch, 10)
        np.testing.assert_allclose(logits, net(torch.from_numpy(x)).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_auto_times_every_verified_backend_and_takes_the_fastest(exported_lenet):
    _, prefix = exported_lenet
    predictor = _predictor(prefix, "auto")
    assert set(predictor.timings) == {"pt2", "onnxruntime"} and not predictor.rejected
    assert predictor.backend == min(predictor.timings, key=predictor.timings.get)
    chosen = [c for c in predictor.candidates if c.chosen]
    assert [c.name for c in chosen] == [predictor.backend] and chosen[0].reason == "fastest of the verified backends"
    other = next(c for c in predictor.candidates if not c.chosen)
    assert other.reason == f"slower than {predictor.backend}" and other.latency_s == predictor.timings[other.name]
    report = predictor.report()
    assert all(f"{c.name}" in report and f"{c.latency_s * 1e3:.3g} ms" in report for c in predictor.candidates)


def test_wrong_rank_shape_and_dtype_name_the_input_and_spec(exported_lenet):
    _, prefix = exported_lenet
    predictor = _predictor(prefix, "onnxruntime", set_warmup=0)
    with pytest.raises(ValueError, match=r"input 'image' has rank 2 .* expects rank 4 \(shape \[None, 1, 28, 28\]\)"):
        predictor.run([np.zeros((2, 784), "float32")])
    with pytest.raises(ValueError, match=r"input 'image' has shape \[2, 3, 28, 28\] .*dimension 1 must be 1"):
        predictor.run([np.zeros((2, 3, 28, 28), "float32")])
    with pytest.raises(ValueError, match=r"input 'image' has dtype float64 but its InputSpec expects float32"):
        predictor.run([np.zeros((2, 1, 28, 28))])
    with pytest.raises(ValueError, match=r"Expected 1 input\(s\)"):
        predictor.run([np.zeros((2, 1, 28, 28), "float32")] * 2)
    with pytest.raises(TypeError, match=r"Expected `inputs\[0\]` to be a numpy array for input 'image'"):
        predictor.run([[0.0] * 784])
    with pytest.raises(TypeError, match=r"`inputs\[0\]` to be an array of float32 for input 'image'.*bfloat16 tensor "
                                        r"of shape \[2, 1, 28, 28\].*x\.to\(torch\.float32\)"):
        predictor.run([torch.zeros(2, 1, 28, 28, dtype=torch.bfloat16)])


def test_a_bfloat16_input_is_refused_by_name_when_the_predictor_is_made(tmp_path):
    """NumPy has no bfloat16: a program exported with a bfloat16 input cannot be given its input as an array."""
    import sampan

    net = torch.nn.Linear(4, 2).to(torch.bfloat16).eval()
    prefix = tmp_path / "bf16"
    sampan.jit.save(net, prefix, input_spec=[sampan.InputSpec([None, 4], "bfloat16", "x")])
    with pytest.raises(ValueError, match=r"Input 'x' of .*bf16 is bfloat16, a type NumPy lacks.*export with float32 "
                                         r"inputs and cast inside the model.*sampan\.jit\.load"):
        _predictor(prefix, "pt2")


def test_missing_model_and_missing_backend(exported_lenet, tmp_path):
    _, prefix = exported_lenet
    with pytest.raises(MissingModelError, match=r"No exported model at .*nowhere"):
        create_predictor(Config(tmp_path / "nowhere"))
    with pytest.raises(MissingModelError, match=r"has no 'aoti' artifact \(exported: onnx, pt2\).*--format aoti"):
        _predictor(prefix, "aoti")


def test_config_checks_its_arguments(exported_lenet):
    _, prefix = exported_lenet
    config = Config(str(prefix) + ".onnx")
    assert config.prefix == prefix and config.device == "cpu" and not config.use_gpu()
    with pytest.raises(ValueError, match=r"Expected `backend` to be one of 'auto', 'pt2', 'aoti', 'onnxruntime'"):
        config.set_backend("tensorrt")
    with pytest.raises(ValueError, match=r"Expected `num_threads` to be an int >= 1"):
        config.set_cpu_math_library_num_threads(0)
    with pytest.raises(TypeError, match=r"Expected `config` to be a sampan.inference.Config"):
        create_predictor(str(prefix))
    config.enable_use_gpu(100, 0)
    assert config.use_gpu() and config.device == "cuda:0"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error; this machine has a GPU")
def test_gpu_requested_without_a_gpu_says_how_to_fix(exported_lenet):
    _, prefix = exported_lenet
    config = Config(prefix)
    config.enable_use_gpu()
    with pytest.raises(ValueError, match=r"no CUDA device is available. HINT: call config.disable_gpu\(\)"):
        create_predictor(config)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_gpu_predictor_matches_cpu(exported_lenet):
    net, prefix = exported_lenet
    config = Config(prefix)
    config.enable_use_gpu()
    config.set_backend("pt2")
    x = np.ones((3, 1, 28, 28), "float32")
    np.testing.assert_allclose(create_predictor(config).run([x])[0], net(torch.from_numpy(x)).detach().numpy(),
                               rtol=1e-3, atol=1e-4)


def test_a_predictor_rejects_a_backend_that_disagrees(exported_lenet, tmp_path):
    """Artifacts of different weights under one prefix are caught before serving."""
    import json
    import shutil

    net, prefix = exported_lenet
    for suffix in (".pt2", ".onnx", ".meta.json"):
        shutil.copy(f"{prefix}{suffix}", tmp_path / f"m{suffix}")
    meta = json.loads((tmp_path / "m.meta.json").read_text())
    meta["artifacts"]["pt2"]["file"], meta["artifacts"]["onnx"]["file"] = "m.pt2", "m.onnx"
    (tmp_path / "m.meta.json").write_text(json.dumps(meta))
    import sampan

    other = type(net)(num_classes=10).eval()  # other weights, same specs
    sampan.jit.save(other, tmp_path / "o", input_spec=[sampan.InputSpec([None, 1, 28, 28], name="image")],
                    output_names=["logits"])
    shutil.copy(tmp_path / "o.pt2", tmp_path / "m.pt2")
    import hashlib

    meta["artifacts"]["pt2"]["sha256"] = hashlib.sha256((tmp_path / "m.pt2").read_bytes()).hexdigest()
    (tmp_path / "m.meta.json").write_text(json.dumps(meta))
    with pytest.warns(RuntimeWarning, match=r"onnxruntime backend disagrees"):
        predictor = _predictor(tmp_path / "m", "auto")
    assert predictor.backend == "pt2" and "onnxruntime" in predictor.rejected
    assert "onnxruntime" in predictor.report() and "rejected: disagrees with pt2 by" in predictor.report()


class _DictAndNested(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(4, 3), torch.nn.Linear(4, 2)

    def forward(self, x):
        return {"logits": self.a(x), "aux": (self.b(x), x.sum(1))}


@pytest.mark.parametrize("backend", ["pt2", "auto"])
def test_dict_and_nested_outputs_come_back_flat_in_the_names_order(tmp_path, backend):
    import sampan

    torch.manual_seed(0)
    net, spec = _DictAndNested().eval(), [sampan.InputSpec([None, 4], "float32", "x")]
    sampan.jit.save(net, tmp_path / "d", input_spec=spec)
    sampan.onnx.export(net, tmp_path / "d", input_spec=spec)
    predictor = _predictor(tmp_path / "d", backend)
    x = np.random.default_rng(0).standard_normal((5, 4)).astype("float32")
    outs = predictor.run([x])
    expected = net(torch.from_numpy(x))
    assert predictor.get_output_names() == ["output_0", "output_1", "output_2"] and len(outs) == 3
    for got, want in zip(outs, [expected["logits"], *expected["aux"]]):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-5, atol=1e-5)


class _ReturnsItsBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("centers", torch.ones(3, 4))

    def forward(self, x):
        return x, self.centers, x * 2


def test_outputs_never_share_memory_with_the_model_or_the_input(tmp_path):
    """A program may return a buffer or its input as it is: writing into the returned array must not change
    the model (the next call's outputs) or the caller's input."""
    import sampan

    sampan.jit.save(_ReturnsItsBuffer().eval(), tmp_path / "b", input_spec=[sampan.InputSpec([None, 4], name="x")])
    predictor = _predictor(tmp_path / "b", "pt2")
    x = np.zeros((2, 4), "float32")
    same, centers, _ = predictor.run([x])
    same[:] = 7.0
    centers[:] = -5.0
    assert (x == 0).all() and not np.shares_memory(same, x)
    _, centers_again, _ = predictor.run([x])
    assert (centers_again == 1).all()


def _cnn():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(1, 2, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                               torch.nn.Conv2d(2, 2, 5), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()).eval()


def test_a_model_needing_large_images_is_served_at_its_exported_sizes(tmp_path):
    """[None, 1, None, None]: the samples the predictor checks and warms up with take the exported image size
    (the default 8 is too small for this network); a metadata file without it (older Sampan) still loads."""
    import json

    import sampan

    net = _cnn()
    sampan.jit.save(net, tmp_path / "cnn", input_spec=[sampan.InputSpec([None, 1, None, None], name="image")],
                    examples=[torch.randn(2, 1, 24, 24)], verify=False)
    sampan.onnx.export(net, tmp_path / "cnn", input_spec=[sampan.InputSpec([None, 1, None, None], name="image")],
                       examples=[torch.randn(2, 1, 24, 24)], verify=False)
    predictor = _predictor(tmp_path / "cnn", "auto")
    x = np.random.default_rng(1).standard_normal((3, 1, 33, 40)).astype("float32")
    np.testing.assert_allclose(predictor.run([x])[0], net(torch.from_numpy(x)).detach().numpy(), rtol=1e-4, atol=1e-5)
    sampan.jit.save(torch.nn.Linear(4, 2).eval(), tmp_path / "old", input_spec=[sampan.InputSpec([None, 4], name="x")])
    old = json.loads((tmp_path / "old.meta.json").read_text())
    del old["example_shapes"]
    (tmp_path / "old.meta.json").write_text(json.dumps(old))
    assert _predictor(tmp_path / "old", "pt2").run([np.ones((2, 4), "float32")])[0].shape == (2, 2)


def test_paddles_two_file_config_runs_on_the_cpu(exported_lenet):
    """Config(model_file, params_file): the second argument once landed in the GPU switch."""
    _, prefix = exported_lenet
    config = Config(f"{prefix}.pt2", f"{prefix}.pdiparams")
    assert not config.use_gpu() and config.device == "cpu" and config.backend == "auto"
    assert create_predictor(config).backend == "pt2"
    with pytest.raises(TypeError, match=r"Expected `params_file` to be left out, or the companion of model_path "
                                        r"\('.*lenet.pdiparams'\). Received: params_file=1"):
        Config(prefix, 1)
    with pytest.raises(ValueError, match=r"Received: params_file='other/x.pdiparams'. HINT: Sampan keeps the weights"):
        Config(prefix, "other/x.pdiparams")
    with pytest.raises(TypeError):
        Config(prefix, _use_gpu=True)  # settings go through the methods


def test_a_file_named_with_its_suffix_is_the_one_served(exported_lenet):
    _, prefix = exported_lenet
    for suffix, backend in ((".pt2", "pt2"), (".onnx", "onnxruntime")):
        predictor = _predictor(f"{prefix}{suffix}")
        assert predictor.backend == backend and [c.name for c in predictor.candidates] == [backend]
        assert "the file Config names" in predictor.report()
    assert _predictor(f"{prefix}.onnx", "pt2").backend == "pt2"  # set_backend still picks another artifact
    assert {c.name for c in _predictor(f"{prefix}.meta.json").candidates} == {"pt2", "onnxruntime"}


def test_paddles_handles_point_to_run(exported_lenet):
    _, prefix = exported_lenet
    predictor = _predictor(prefix, "pt2", set_warmup=0)
    assert not hasattr(predictor, "get_input_handle")
    with pytest.raises(AttributeError, match=r"no get_input_handle\(\).*HINT: outputs = predictor.run\(\[array"):
        predictor.get_input_handle("image")
    with pytest.raises(AttributeError, match=r"no get_output_handle\(\).*one per output \['logits'\]"):
        predictor.get_output_handle("logits")
    with pytest.raises(TypeError, match=r"Expected `inputs` to be a list of numpy arrays, one per input \['image'\]. "
                                        r"Received: inputs=None. HINT: .*predictor.run\(\[array"):
        predictor.run()
    with pytest.raises(AttributeError, match=r"'Predictor' object has no attribute 'nothing'"):
        predictor.nothing
