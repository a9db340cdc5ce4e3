"""export_onnx chooses among int8 ONNX layouts: each verified against torch, timed against fp32 in
ONNX Runtime, the choice and its reason recorded; an explicit layout overrides it."""
import collections
import json
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import sampan
from sampan.quantization import PTQ, export_onnx, layout_report, quantize_dynamic

SPEC = [sampan.InputSpec([None, 1, 28, 28], name="image")]


@pytest.fixture
def int8_lenet(lenet):
    g = torch.Generator().manual_seed(1)
    ptq = PTQ()
    observed = ptq.quantize(lenet, torch.rand(2, 1, 28, 28))
    ptq.calibrate(observed, [torch.rand(16, 1, 28, 28, generator=g) for _ in range(3)])
    return ptq.convert(observed)


def _record(prefix):
    meta = json.loads((prefix.parent / f"{prefix.name}.meta.json").read_text())
    return meta["artifacts"]["onnx"]["check"]


def _optimized_ops(file, tmp_path):
    options = ort.SessionOptions()
    options.optimized_model_filepath = os.fspath(tmp_path / "optimized.onnx")
    options.log_severity_level = 3
    ort.InferenceSession(os.fspath(file), options, providers=["CPUExecutionProvider"])
    return collections.Counter(n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node)


SIGNATURE = {"qdq": "QuantizeLinear", "dynamic": "MatMulInteger", "weight_only": "Cast"}


def test_auto_times_every_verified_layout_and_records_why(int8_lenet, tmp_path):
    x = torch.rand(16, 1, 28, 28, generator=torch.Generator().manual_seed(2))
    file = export_onnx(int8_lenet, tmp_path / "lenet", SPEC, examples=(x,))
    check = _record(tmp_path / "lenet")
    record = check["layout"]
    names = [c["layout"] for c in record["candidates"]]
    assert names == ["qdq", "dynamic", "weight_only"]
    assert set(record["fp32_ms"]) == {"1", "32"}
    for c in record["candidates"]:
        assert c["verified"] and c["max_abs_diff"] is not None
        assert set(c["latency_ms"]) == {"1", "32"} and all(t > 0 for t in c["latency_ms"].values())
        assert c["reason"]
    chosen = next(c for c in record["candidates"] if c["layout"] == record["chosen"])
    assert chosen["reason"] == record["reason"]
    if record["chosen"] == "weight_only":
        assert record["reason"].startswith("no int8-kernel layout beats fp32")
    else:  # an int8-kernel layout is kept only when it is faster than fp32 at every batch size
        assert all(x <= 1.0 for x in chosen["x_fp32"].values()), chosen
    # the file is the chosen layout, and it agrees with the torch model as recorded
    ops = {n.op_type for n in onnx.load(os.fspath(file)).graph.node}
    assert SIGNATURE[record["chosen"]] in ops
    assert check["max_abs_diff"] <= check["atol"]
    report = layout_report(tmp_path / "lenet")
    assert all(f"{name} " in report for name in names) and "b32" in report and record["reason"] in report
    predictor = sampan.inference.create_predictor(sampan.inference.Config(tmp_path / "lenet"))
    with torch.no_grad():
        ref = int8_lenet(x)
    assert (torch.from_numpy(predictor.run([x.numpy()])[0]) - ref).abs().max() < 0.05 * ref.abs().max()


def test_weight_only_is_small_and_runs_the_fp32_kernels(lenet, int8_lenet, tmp_path):
    fp32 = sampan.onnx.export(lenet, tmp_path / "fp32", SPEC)
    file = export_onnx(int8_lenet, tmp_path / "wo", SPEC, layout="weight_only")
    graph = onnx.load(os.fspath(file)).graph
    assert {i.data_type for i in graph.initializer if np.prod(i.dims) > 200} == {onnx.TensorProto.INT8}  # weights
    assert file.stat().st_size < 0.4 * fp32.stat().st_size
    # ONNX Runtime folds the Cast / Mul of every weight at load: the same kernels as the fp32 export
    ops = _optimized_ops(file, tmp_path)
    assert not {"Cast", "Mul", "DequantizeLinear", "QuantizeLinear"} & set(ops)
    assert ops == _optimized_ops(fp32, tmp_path)
    record = _record(tmp_path / "wo")["layout"]
    assert record["chosen"] == "weight_only" and "requested" in record["reason"]
    assert record["candidates"][0]["weights_folded"] and not record["candidates"][0]["int8_kernels"]
    x = torch.rand(5, 1, 28, 28)
    got = ort.InferenceSession(os.fspath(file)).run(None, {"image": x.numpy()})[0]
    with torch.no_grad():
        ref = int8_lenet(x)
    assert np.abs(got - ref.numpy()).max() < 0.05 * float(ref.abs().max())


def test_explicit_layouts_override_the_choice(mlp, int8_lenet, tmp_path):
    file = export_onnx(int8_lenet, tmp_path / "qdq", SPEC, layout="qdq")
    record = _record(tmp_path / "qdq")
    assert record["reference_kernels"] and record["layout"]["chosen"] == "qdq"
    assert "QLinearConv" in record["layout"]["candidates"][0]["int8_kernels"]   # what ONNX Runtime fuses it to
    assert {"QuantizeLinear", "DequantizeLinear"} <= {n.op_type for n in onnx.load(os.fspath(file)).graph.node}
    spec = [sampan.InputSpec([None, 64], name="x")]
    file = export_onnx(quantize_dynamic(mlp), tmp_path / "mlp", spec, layout="dynamic")
    assert collections.Counter(n.op_type for n in onnx.load(os.fspath(file)).graph.node)["MatMulInteger"] == 3
    assert "not timed" in layout_report(tmp_path / "mlp")


def test_bad_layouts_are_named(mlp, tmp_path):
    q = quantize_dynamic(mlp)
    spec = [sampan.InputSpec([None, 64], name="x")]
    with pytest.raises(ValueError, match=r"Expected `layout` to be one of 'auto'.*Received: layout='int4'"):
        export_onnx(q, tmp_path / "mlp", spec, layout="int4")
    with pytest.raises(ValueError, match=r"`layout`.*layout='qdq'.*HINT: 'qdq' needs static int8 activations"):
        export_onnx(q, tmp_path / "mlp", spec, layout="qdq")
    sampan.onnx.export(mlp, tmp_path / "plain", spec)
    with pytest.raises(ValueError, match=r"`path`.*HINT: export it with sampan.quantization.export_onnx"):
        layout_report(tmp_path / "plain")


def test_a_layout_that_disagrees_with_torch_is_rejected_with_its_reason(int8_lenet, tmp_path):
    # atol=1e-9: only qdq, checked exactly against torch's reference kernels, can agree
    export_onnx(int8_lenet, tmp_path / "strict", SPEC, atol=1e-9)
    record = _record(tmp_path / "strict")["layout"]
    assert record["chosen"] == "qdq"
    for c in record["candidates"][1:]:
        assert not c["verified"] and c["reason"].startswith("rejected: The int8 ONNX model") and not c["latency_ms"]
    assert "rejected" in layout_report(tmp_path / "strict")
