"""sampan.inference with Config.enable_winograd(): the Winograd candidate (the .pt2 program frozen, its 3x3
convolutions by Winograd) is verified, timed, chosen only when fastest, and refused or rejected with the reason."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import sampan
from sampan import InputSpec
from sampan.inference import Config, create_predictor, winograd
from sampan.jit import amx as jit_amx
from sampan.jit import winograd as jit_winograd
from sampan.utils import cpp_kernels


class _ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.body = nn.Conv2d(16, 16, 3, padding=1)  # 32 x 32, 16 channels: F(4x4, 3x3)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(torch.relu(self.body(torch.relu(self.stem(x)))).mean((2, 3)))


def _config(prefix, backend="auto") -> Config:
    config = Config(prefix)
    config.set_cpu_math_library_num_threads(torch.get_num_threads())
    config.set_backend(backend)
    config.enable_winograd()
    return config


@pytest.fixture(scope="module")
def exported_convnet(tmp_path_factory):
    torch.manual_seed(0)
    net = _ConvNet().eval()
    prefix = tmp_path_factory.mktemp("convnet") / "convnet"
    spec = InputSpec([None, 3, 32, 32], "float32", "image")
    sampan.jit.save(net, prefix, input_spec=[spec], output_names=["logits"])
    sampan.onnx.export(net, prefix, input_spec=[spec], output_names=["logits"])
    return net, prefix


def test_winograd_candidate_is_verified_timed_and_chosen_only_when_fastest(exported_convnet, capfd):
    net, prefix = exported_convnet
    config = _config(prefix)
    assert "winograd: on" in config.summary()
    predictor = create_predictor(config)
    shown = capfd.readouterr().err  # a progress bar while the candidate compiles (tens of seconds for resnet18)
    assert f"create_predictor: compiling {winograd.NAME}" in shown and "create_predictor: timing the candidates" in shown
    config.disable_winograd()
    assert create_predictor(config).compile_seconds == {}
    assert "create_predictor" not in capfd.readouterr().err  # nothing compiled: no bar
    assert set(predictor.timings) == {"pt2", "onnxruntime", winograd.NAME} and not predictor.rejected
    assert predictor.backend == min(predictor.timings, key=predictor.timings.get)
    candidate = next(c for c in predictor.candidates if c.name == winograd.NAME)
    assert candidate.precision == "fp32" and candidate.latency_s == predictor.timings[winograd.NAME]
    # the report says what computes the candidate's convolutions at batch 1: `body` by F(4x4), or where AMX runs by
    # the AMX kernel (one image: bound by reading the weights); the stem's 3 channels are too few for either
    amx = jit_amx.unavailable() is None
    assert predictor.winograd_convolutions == ({"AMX bf16x3": 1} if amx else {"F(4x4)": 1})
    by = "three bf16 products on AMX" if amx else "Winograd F(4x4)"
    assert candidate.reason == ("fastest of the verified backends" if candidate.chosen else
                                f"slower than {predictor.backend}") + f" (convolutions: 1 by {by} at batch 1)"
    assert f"{winograd.NAME} fp32" in predictor.report()
    # what it cost to build: in the report, beside the candidate (the others are not compiled)
    assert candidate.compile_s == predictor.compile_seconds[winograd.NAME] > 0
    assert f"; compiled in {candidate.compile_s:.1f} s" in predictor.report() and set(predictor.compile_seconds) == {
        winograd.NAME}
    x = np.random.default_rng(5).standard_normal((3, 3, 32, 32)).astype("float32")  # another batch size
    (logits,) = predictor.run([x])
    np.testing.assert_allclose(logits, net(torch.from_numpy(x)).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_the_candidate_itself_computes_by_winograd_and_agrees(exported_convnet):
    from sampan.jit.winograd import conv3x3_f4

    net, prefix = exported_convnet
    module = torch.export.load(str(prefix) + ".pt2").module()
    run, backend = winograd.compile_winograd(module, [InputSpec([None, 3, 32, 32], "float32", "image")])
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        (out,) = run(x)
        torch.testing.assert_close(out, net(x), rtol=1e-4, atol=1e-5)
    assert backend.rewritten == 1  # `body`; the stem's 3 input channels are too few to gain
    with torch.no_grad(), torch.profiler.profile() as prof:
        run(x)
    assert any("sampan_winograd::conv3x3_f4" in e.name for e in prof.events()), conv3x3_f4.__name__


def test_a_model_without_a_convolution_winograd_takes_is_rejected_with_the_reason(exported_lenet):
    _, prefix = exported_lenet  # LeNet: a 3x3 conv with one input channel and a 5x5 one
    predictor = create_predictor(_config(prefix))
    assert winograd.NAME not in predictor.timings
    amx = " and no other that the AMX kernel takes" if jit_amx.unavailable() is None else ""  # 6 and 1 channels
    assert predictor.rejected[winograd.NAME] == "the model has no 3x3 stride-1 convolution that Winograd takes" + amx
    assert "inductor-winograd fp32     not timed  rejected: the model has no 3x3" in predictor.report()


def test_winograd_with_a_backend_set_is_refused_and_the_report_says_why(exported_convnet):
    _, prefix = exported_convnet
    predictor = create_predictor(_config(prefix, backend="onnxruntime"))
    assert predictor.backend == "onnxruntime"
    assert predictor.rejected[winograd.NAME].startswith("refused: Config.set_backend('onnxruntime')")
    assert "not timed  refused: Config.set_backend('onnxruntime') asks for that backend only" in predictor.report()
    config = Config(prefix)
    config.enable_winograd()
    config.disable_winograd()
    assert not config.winograd_enabled() and "winograd: off" in config.summary()


class _HeavyNet(nn.Module):
    """Three 64-channel 3 x 3 convolutions on 32 x 32 maps: 0.23 GFLOP at batch 1 that F(4x4) takes."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 64, 3, padding=1)
        self.body = nn.Sequential(*(m for _ in range(3) for m in (nn.Conv2d(64, 64, 3, padding=1), nn.ReLU())))
        self.head = nn.Linear(64, 4)

    def forward(self, x):
        return self.head(self.body(torch.relu(self.stem(x))).mean((2, 3)))


def test_without_being_asked_it_is_tried_for_heavy_convolutions_only(tmp_path, monkeypatch, exported_convnet):
    torch.manual_seed(0)
    net = _HeavyNet().eval()
    prefix = tmp_path / "heavy"
    spec = InputSpec([None, 3, 32, 32], "float32", "image")
    sampan.jit.save(net, prefix, input_spec=[spec])
    sampan.onnx.export(net, prefix, input_spec=[spec])
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    with torch.no_grad():
        expected = net(torch.from_numpy(x)).numpy()

    def names(config):
        predictor = create_predictor(config)
        if config.prefix == prefix:
            np.testing.assert_allclose(predictor.run([x])[0], expected, rtol=1e-3, atol=1e-4)
        return {c.name for c in predictor.candidates}, predictor

    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    config = Config(prefix)
    assert config.winograd_auto() and not config.winograd_enabled() and "winograd: auto" in config.summary()
    seen, predictor = names(config)
    assert winograd.NAME in seen and winograd.NAME not in predictor.rejected, predictor.report()
    assert winograd.NAME in predictor.report()
    config.disable_winograd()                       # asked not to: never, not even here
    assert not config.winograd_auto() and names(config)[0] == {"pt2", "onnxruntime"}
    # a light network (the course's kind) is left alone, and the reason says why
    light = Config(exported_convnet[1])
    reason = winograd.auto_refusal(light, {"pt2": {}}, lambda: torch.export.load(f"{exported_convnet[1]}.pt2").module())
    assert "GFLOP at batch 1" in reason and "enable_winograd" in reason
    assert winograd.NAME not in names(light)[0]
    # where the kernel could not be built, the heavy network is left alone too, and the reason says why
    with monkeypatch.context() as patch:
        patch.setitem(cpp_kernels._STATE, jit_winograd._F4_NAME, "no C++ compiler ('c++' is not on PATH)")
        reason = winograd.auto_refusal(Config(prefix), {"pt2": {}}, lambda: torch.export.load(f"{prefix}.pt2").module())
    assert "carry 0 GFLOP" in reason and reason.endswith("(no C++ compiler ('c++' is not on PATH))")

    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")  # AVX-512 CPUs too
    assert winograd.NAME in names(Config(prefix))[0]


class _Strided(nn.Module):
    """A stride-2 convolution (Winograd does not take it; the AMX kernel does, where it runs), then a 3x3 one on a
    16 x 16 map (F(4x4) from batch 2 on)."""

    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.body = nn.Conv2d(32, 32, 3, padding=1)
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        return self.head(torch.relu(self.body(torch.relu(self.down(x)))).mean((2, 3)))


def test_on_an_amx_cpu_the_candidate_computes_the_other_convolutions_by_three_bf16_products(tmp_path):
    reason = jit_amx.cpu_unavailable()
    if reason is not None:  # without AMX the candidate is the Winograd one alone (the tests above)
        pytest.skip(f"needs AMX: {reason}")
    assert jit_amx.unavailable() is None  # with it, the kernel builds
    torch.manual_seed(0)
    net = _Strided().eval()
    prefix = tmp_path / "strided"
    sampan.jit.save(net, prefix, input_spec=[InputSpec([None, 16, 32, 32], "float32", "image")])
    predictor = create_predictor(_config(prefix))
    # at batch 1 both by AMX (F(4x4) would read 4x the weights of one image's call); at batch 2 the 3x3 by F(4x4)
    assert predictor.winograd_convolutions == {"AMX bf16x3": 2} and not predictor.rejected
    assert "convolutions: 2 by three bf16 products on AMX at batch 1" in predictor.report()
    x = np.random.default_rng(1).standard_normal((3, 16, 32, 32)).astype("float32")
    with torch.no_grad():
        expected = net(torch.from_numpy(x)).numpy()
    # verified at batch 1 and 2 before it could be timed (not rejected above); here at a third batch size
    np.testing.assert_allclose(predictor.run([x])[0], expected, rtol=1e-4, atol=1e-5)
