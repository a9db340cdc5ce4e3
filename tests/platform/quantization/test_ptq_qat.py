import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

import sampan
from sampan.pruning.report import size_on_disk
from sampan.quantization import PTQ, QAT, QuantConfig, export_onnx


def _calibration(n=4, batch=16):
    g = torch.Generator().manual_seed(1)
    return [torch.rand(batch, 1, 28, 28, generator=g) for _ in range(n)]


def test_ptq_lenet_int8_weights_skip_list_and_dynamic_batch(lenet, tmp_path):
    ptq = PTQ(QuantConfig(skip=["fc.2"]))
    observed = ptq.quantize(lenet, torch.rand(2, 1, 28, 28))
    ptq.calibrate(observed, [(x, torch.zeros(len(x))) for x in _calibration()])
    q = ptq.convert(observed)
    state = q.state_dict()
    int8 = [k for k, v in state.items() if v.dtype == torch.int8]
    assert len(int8) == 4                              # 2 convs + 2 of the 3 linears
    assert state["fc.2.weight"].dtype == torch.float32  # the skipped layer
    assert not any(k.startswith("features.0.weight") for k in state)  # float copies are gone
    assert size_on_disk(q) <= 0.35 * size_on_disk(lenet)
    x = torch.rand(5, 1, 28, 28)                       # another batch size than the examples
    ref = lenet(x).detach()
    assert (q(x) - ref).abs().max() < 0.05 * ref.abs().max()
    # exports: torch.export archive, and ONNX with QuantizeLinear / DequantizeLinear for ONNX Runtime
    spec = [sampan.InputSpec([None, 1, 28, 28], name="image")]
    sampan.jit.save(q, tmp_path / "lenet_int8_pt2", input_spec=spec)
    sampan.jit.save(lenet, tmp_path / "lenet_fp32_pt2", input_spec=spec)
    int8_bytes, fp32_bytes = ((tmp_path / f"lenet_{k}_pt2.pt2").stat().st_size for k in ("int8", "fp32"))
    assert int8_bytes < 0.6 * fp32_bytes   # int8 weights; the archive also holds a larger Q/DQ graph
    file = export_onnx(q, tmp_path / "lenet_int8", spec, layout="qdq")
    import onnx
    ops = {n.op_type for n in onnx.load(str(file)).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    predictor = sampan.inference.create_predictor(sampan.inference.Config(tmp_path / "lenet_int8"))
    assert predictor.backend == "onnxruntime"
    out = torch.from_numpy(predictor.run([x.numpy()])[0])
    assert (out - ref).abs().max() < 0.05 * ref.abs().max()


def test_ptq_misuse_gets_clear_errors(lenet):
    with pytest.raises(ValueError, match=r"Expected `config.skip` to be a layer name.*Received: config.skip='fc9'"):
        PTQ(QuantConfig(skip=["fc9"])).quantize(lenet, torch.rand(2, 1, 28, 28))
    with pytest.raises(TypeError, match=r"Expected `observed` to be the model returned by quantize\(\)"):
        PTQ().convert(lenet)
    with pytest.raises(ValueError, match=r"Expected `example_inputs` to be example inputs"):
        PTQ().quantize(lenet)
    with pytest.raises(ValueError, match=r"calibration_batches"):
        QuantConfig(calibration_batches=0)
    with pytest.raises(ValueError, match=r"weight_bits.*Received: weight_bits=4"):
        QuantConfig(weight_bits=4)
    with pytest.raises(TypeError, match=r"Expected `config` to be a sampan.quantization.QuantConfig"):
        PTQ({"skip": []})


def test_qat_with_model_fit_beats_ptq_on_a_planted_outlier_channel():
    """One hidden unit is 100x larger than the rest (and undone by the next layer): per-tensor int8
    activations then round the other units coarsely. PTQ cannot fix that; QAT, trained with
    ``Model.fit`` to match the float teacher, learns weights that survive the rounding.

    What it shows, honestly: at int8 the gain is modest. Here PTQ's error is 3.3e-3 and three
    epochs of QAT bring it to 2.9e-3 (about 10% lower; 8 epochs at lr 1e-3 reach 2.5e-3).
    Larger learning rates (1e-2 and up) made QAT *worse* than PTQ on this case."""
    torch.manual_seed(0)
    teacher = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).eval()
    with torch.no_grad():
        teacher[0].weight[0] *= 100
        teacher[0].bias[0] *= 100
        teacher[2].weight[:, 0] /= 100
    x = torch.randn(512, 16)
    y = teacher(x).detach()

    def mse(model):
        with torch.no_grad():
            return float(((model(x) - y) ** 2).mean())

    full = QuantConfig(weight_bits=8)   # the same 8-bit rounding on every CPU (7 bits by default without VNNI)
    ptq = PTQ(full)
    observed = ptq.quantize(teacher, x[:8])
    ptq.calibrate(observed, x.split(64))
    ptq_error = mse(ptq.convert(observed))

    qat = QAT(full)
    prepared = qat.quantize(teacher, x[:8])
    model = sampan.Model(prepared)
    model.prepare(torch.optim.Adam(prepared.parameters(), 2e-3), nn.MSELoss())
    model.fit(TensorDataset(x, y), epochs=3, batch_size=64, verbose=0)
    qat_error = mse(qat.convert(prepared))
    assert ptq_error > 1e-3                 # the planted outlier hurts PTQ
    assert qat_error < 0.95 * ptq_error, (ptq_error, qat_error)
