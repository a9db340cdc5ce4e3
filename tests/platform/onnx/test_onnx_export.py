"""sampan.onnx.export: dynamo export with dynamic axes, checked in ONNX Runtime against eager."""
from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest
import torch
from onnx_helpers import ExportsDifferently, lenet

import sampan
from sampan import InputSpec
from sampan.jit import ExportMismatchError

IMAGE = InputSpec([None, 1, 28, 28], "float32", "image")


@pytest.fixture(scope="module")
def onnx_lenet(tmp_path_factory):
    net = lenet()
    path = sampan.onnx.export(net, tmp_path_factory.mktemp("onnx") / "lenet.onnx", input_spec=[IMAGE],
                              output_names=["logits"])
    return net, path


def test_onnx_runtime_matches_eager_at_other_batch_sizes(onnx_lenet):
    net, path = onnx_lenet
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (inp,) = session.get_inputs()
    assert inp.name == "image" and inp.shape[1:] == [1, 28, 28] and isinstance(inp.shape[0], str)
    assert [o.name for o in session.get_outputs()] == ["logits"]
    for batch in (1, 6, 40):
        x = torch.randn(batch, 1, 28, 28)
        (got,) = session.run(None, {"image": x.numpy()})
        np.testing.assert_allclose(got, net(x).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_export_writes_one_file_and_records_the_check(onnx_lenet):
    _, path = onnx_lenet
    assert path.suffix == ".onnx" and not path.with_name("lenet.onnx.data").exists()
    meta = json.loads(path.with_name("lenet.meta.json").read_text())
    assert meta["artifacts"]["onnx"]["check"]["max_abs_diff"] < 1e-4
    assert meta["outputs"] == ["logits"]


def test_a_disagreeing_onnx_file_fails_the_export(tmp_path):
    with pytest.raises(ExportMismatchError, match=r"exported onnx model disagrees with eager by up to 1") as info:
        sampan.onnx.export(ExportsDifferently(), tmp_path / "bad", input_spec=[InputSpec([None, 4], name="x")])
    assert info.value.format == "onnx" and info.value.max_abs_diff == pytest.approx(1.0, abs=1e-5)


def test_export_needs_an_input_spec(tmp_path):
    with pytest.raises(ValueError, match=r"Expected `input_spec` to be a list of sampan.InputSpec"):
        sampan.onnx.export(lenet(), tmp_path / "x")
