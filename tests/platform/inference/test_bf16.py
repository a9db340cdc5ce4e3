"""sampan.inference with Config.enable_mkldnn_bfloat16(): the bf16 candidate is verified, timed, chosen only when
fastest, and refused or rejected with the reason."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from sampan.inference import Config, create_predictor
from sampan.inference import bf16


def _config(prefix, backend="auto", **bf16_kw) -> Config:
    config = Config(prefix)
    config.set_cpu_math_library_num_threads(torch.get_num_threads())
    config.set_backend(backend)
    config.enable_mkldnn_bfloat16(**bf16_kw)
    return config


@pytest.fixture
def native_bf16(monkeypatch):
    """On a CPU without native bf16 the candidate is refused; these tests check the candidate itself, which
    computes the same numbers in oneDNN's emulated bf16 there, so the detection is set to yes (a no-op on a
    CPU with AVX-512 BF16 or AMX, where it is yes already)."""
    import sampan.amp.plugin

    monkeypatch.setattr(sampan.amp.plugin, "cpu_has_native_bf16", lambda: True)


def test_bf16_candidate_is_verified_timed_and_chosen_only_when_fastest(exported_lenet, native_bf16):
    net, prefix = exported_lenet
    predictor = create_predictor(_config(prefix))
    assert set(predictor.timings) == {"pt2", "onnxruntime", bf16.NAME} and not predictor.rejected
    assert predictor.backend == min(predictor.timings, key=predictor.timings.get)
    # it really ran in bf16 (fp32 backends agree to ~1e-7), within the bf16 tolerance
    assert 1e-5 < predictor.bf16_error <= 2e-2
    candidate = next(c for c in predictor.candidates if c.name == bf16.NAME)
    assert candidate.precision == "bf16" and candidate.latency_s == predictor.timings[bf16.NAME]
    verdict = "fastest of the verified backends" if candidate.chosen else f"slower than {predictor.backend}"
    assert candidate.reason == f"{verdict} (bf16 vs fp32: max relative error {predictor.bf16_error:.2g} <= 0.02)"
    assert {c.precision for c in predictor.candidates if c.name != bf16.NAME} == {"fp32"}
    assert predictor.precision == ("bf16" if candidate.chosen else "fp32")
    report = predictor.report()
    assert f"{bf16.NAME}     bf16" in report and "onnxruntime       fp32" in report and "precision" in report
    x = np.random.default_rng(5).standard_normal((1, 1, 28, 28)).astype("float32")
    ref = net(torch.from_numpy(x)).detach().numpy()
    (logits,) = predictor.run([x])
    assert logits.dtype == np.float32 and bf16.relative_error([logits], [ref]) <= 2e-2


def test_bf16_that_disagrees_beyond_its_tolerance_is_rejected_with_the_error(exported_lenet, native_bf16):
    _, prefix = exported_lenet
    with pytest.warns(RuntimeWarning, match=r"inductor-bf16 backend disagrees with fp32 beyond its tolerance"):
        predictor = create_predictor(_config(prefix, max_rel_error=1e-6))
    assert predictor.backend in ("pt2", "onnxruntime") and predictor.precision == "fp32"
    assert bf16.NAME not in predictor.timings
    assert predictor.report().count("\n") == 3
    assert f"{bf16.NAME}     bf16     not timed  rejected: disagrees with pt2 (fp32) by a relative error of" \
        in predictor.report() and "> 1e-06" in predictor.report()


def test_bf16_is_refused_when_a_backend_is_set(exported_lenet):
    net, prefix = exported_lenet
    predictor = create_predictor(_config(prefix, "onnxruntime"))
    assert predictor.backend == "onnxruntime" and predictor.precision == "fp32"
    assert predictor.rejected[bf16.NAME].startswith("refused: Config.set_backend('onnxruntime') asks for that backend")
    candidate = next(c for c in predictor.candidates if c.name == bf16.NAME)
    assert not candidate.chosen and candidate.latency_s is None and candidate.precision == "bf16"
    assert "bf16     not timed  refused: Config.set_backend('onnxruntime')" in predictor.report()


def test_bf16_is_refused_on_a_cpu_without_native_bf16_and_on_a_gpu(exported_lenet, monkeypatch):
    import sampan.amp.plugin

    _, prefix = exported_lenet
    monkeypatch.setattr(sampan.amp.plugin, "cpu_has_native_bf16", lambda: False)
    predictor = create_predictor(_config(prefix))
    assert predictor.precision == "fp32" and set(predictor.timings) == {"pt2", "onnxruntime"}
    assert predictor.rejected[bf16.NAME] == (
        "refused: this CPU has no native bfloat16 (AVX-512 BF16 or AMX): emulated bf16 is slower than fp32, so "
        "only fp32 candidates run")
    assert "refused: this CPU has no native bfloat16" in predictor.report()
    gpu = _config(prefix)
    gpu.enable_use_gpu()
    assert bf16.refusal(gpu, {"pt2": {}}) == ("enable_mkldnn_bfloat16 is a CPU (oneDNN) option and this predictor "
                                              "runs on a GPU")


def test_enable_mkldnn_bfloat16_checks_its_argument(exported_lenet):
    _, prefix = exported_lenet
    config = Config(prefix)
    assert not config.mkldnn_bfloat16_enabled() and config.bf16_max_rel_error is None and "bf16: off" in config.summary()
    config.enable_mkldnn_bfloat16()
    assert config.mkldnn_bfloat16_enabled() and config.bf16_max_rel_error == 2e-2 and "bf16: on" in config.summary()
    with pytest.raises(TypeError, match=r"Expected `max_rel_error` to be a float in \(0, 1\)\. Received: "
                                        r"max_rel_error='high'\. HINT: the default 2e-2 suits bf16"):
        config.enable_mkldnn_bfloat16(max_rel_error="high")
    for bad in (0, 1.5, float("nan")):
        with pytest.raises(ValueError, match=r"Expected `max_rel_error` to be a float in \(0, 1\)"):
            config.enable_mkldnn_bfloat16(max_rel_error=bad)
    assert config.bf16_max_rel_error == 2e-2  # a refused value leaves the setting as it was
    config.disable_mkldnn_bfloat16()
    assert not config.mkldnn_bfloat16_enabled()
