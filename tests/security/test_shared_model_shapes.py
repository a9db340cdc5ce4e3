"""A shared model's meta file cannot make Sampan allocate gigabytes for sample inputs (a denial of service).

The attack: take a real exported model and rewrite the InputSpec in its ``meta.json`` (which holds no checksum of
its own) to a huge static shape. The predictor builds random inputs from those specs to choose a backend and to
warm up, and ``sampan export`` to trace the ``.pt2`` again: ``[None, 32768, 32768]`` asks for a 4 GiB randn at
batch 1, ``[None, 100000, 100000]`` for 40 GB. Sampan must refuse, naming the input, its shape and the cap, before
it allocates anything; a model whose inputs are that large for real still loads and runs on real inputs.
"""
from __future__ import annotations

import json
import resource
from pathlib import Path

import numpy as np
import pytest
import torch

import sampan
from sampan.errors import UnsafeFileError
from sampan.inference import Config, create_predictor
from sampan.jit import _specs

HUGE = [None, 1 << 15, 1 << 15]  # 1 G float32 elements (4 GiB) at batch 1: 16x the cap
REFUSED = r"input 'x' of '.*mlp\.meta\.json'.*\[None, 32768, 32768\].*cap of 67,108,864 elements per input"


def _claim_shape(prefix: Path, shape: list) -> None:
    """The attacker's edit: the input's InputSpec in the meta file says ``shape`` (the model files are untouched,
    so their checksums still match)."""
    meta_file = Path(f"{prefix}.meta.json")
    meta = json.loads(meta_file.read_text())
    meta["inputs"][0]["shape"] = shape
    meta_file.write_text(json.dumps(meta))


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _config(prefix: Path, backend: str = "auto", warmup: int = 2) -> Config:
    config = Config(prefix)
    config.set_backend(backend)
    config.set_warmup(warmup)
    return config


@pytest.mark.parametrize("backend", ["auto", "pt2", "onnxruntime"])
def test_create_predictor_refuses_a_huge_static_shape_before_allocating_it(shared_model, backend):
    """auto times and checks both backends on a sample; a pinned one warms up on one."""
    _claim_shape(shared_model, HUGE)
    before = _peak_rss_mb()
    with pytest.raises(UnsafeFileError, match=REFUSED) as info:
        create_predictor(_config(shared_model, backend))
    assert _peak_rss_mb() - before < 200  # nothing near the 4 GiB sample was allocated
    assert info.value.entry == "x" and info.value.path.endswith("mlp.meta.json")
    assert "HINT: " in str(info.value) and "config.set_warmup(0)" in str(info.value)


def test_the_40_gb_shape_of_the_report_is_refused_too(shared_model):
    _claim_shape(shared_model, [None, 100000, 100000])
    before = _peak_rss_mb()
    with pytest.raises(UnsafeFileError, match=r"input 'x'.*\[None, 100000, 100000\].*67,108,864"):
        create_predictor(_config(shared_model))
    assert _peak_rss_mb() - before < 200


def test_an_explicit_warmup_refuses_it_too(shared_model):
    """Without warm-up and with one backend the predictor builds no sample, so it opens (as sampan.jit.load does,
    which builds none); warmup() refuses. Real inputs are checked against the claimed spec, as ever."""
    _claim_shape(shared_model, HUGE)
    before = _peak_rss_mb()
    predictor = create_predictor(_config(shared_model, "pt2", warmup=0))
    assert sampan.jit.load(shared_model).input_spec[0].to_list() == HUGE
    with pytest.raises(UnsafeFileError, match=REFUSED):
        predictor.warmup(1)
    with pytest.raises(ValueError, match=r"input 'x' has rank 2 .* expects rank 3"):
        predictor.run([np.ones((2, 4), "float32")])
    assert _peak_rss_mb() - before < 200


def test_sampan_export_of_the_pt2_refuses_it(shared_model, capsys):
    """``sampan export model.pt2 --format onnx`` traces the program again on samples built from the meta file."""
    from sampan.cli import main

    _claim_shape(shared_model, HUGE)
    out = shared_model.parent / "out"
    before = _peak_rss_mb()
    assert main(["export", f"{shared_model}.pt2", "--format", "onnx", "--output", str(out)]) == 1
    assert _peak_rss_mb() - before < 200
    err = capsys.readouterr().err
    assert "input 'x'" in err and "[None, 32768, 32768]" in err and "67,108,864" in err and "--input-spec" in err
    assert not Path(f"{out}.onnx").exists()


def test_a_shared_model_with_real_shapes_still_loads_and_predicts(shared_model):
    x = np.random.default_rng(0).standard_normal((5, 4)).astype("float32")
    expected = sampan.jit.load(shared_model)(torch.from_numpy(x)).detach().numpy()
    predictor = create_predictor(_config(shared_model))
    np.testing.assert_allclose(predictor.run([x])[0], expected, rtol=1e-5, atol=1e-6)


def test_a_model_whose_input_is_over_the_cap_for_real_runs_on_real_inputs(tmp_path, monkeypatch):
    """A user's own model with a large static input (the cap lowered to 100 elements stands for 1 << 26, so that
    the test stays small): only the automatic samples are refused; jit.load and a predictor without warm-up serve
    real inputs."""
    torch.manual_seed(0)
    net = torch.nn.Linear(64, 2).eval()
    spec = [sampan.InputSpec([None, 64], name="x")]
    sampan.jit.save(net, tmp_path / "big", input_spec=spec)
    sampan.onnx.export(net, tmp_path / "big", input_spec=spec)
    monkeypatch.setattr(_specs, "_MAX_SAMPLE_ELEMENTS", 100)  # a sample at batch 2 holds 128
    x = np.random.default_rng(1).standard_normal((3, 64)).astype("float32")
    expected = net(torch.from_numpy(x)).detach().numpy()
    with pytest.raises(UnsafeFileError, match=r"input 'x'.*\[None, 64\].*\[2, 64\].*cap of 100 elements.*"
                                              r"HINT: .*config.set_warmup\(0\)"):
        create_predictor(_config(tmp_path / "big"))
    for backend in ("pt2", "onnxruntime"):
        predictor = create_predictor(_config(tmp_path / "big", backend, warmup=0))
        np.testing.assert_allclose(predictor.run([x])[0], expected, rtol=1e-5, atol=1e-6)
    loaded = sampan.jit.load(tmp_path / "big")
    np.testing.assert_allclose(loaded(torch.from_numpy(x)).detach().numpy(), expected, rtol=1e-5, atol=1e-6)
