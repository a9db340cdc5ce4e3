import collections

import pytest
import torch
from torch import nn

import sampan
from sampan.pruning.report import size_on_disk
from sampan.quantization import Int8Linear, Int8RNN, dequantize, export_onnx, quantize_dynamic


def test_linear_lstm_gru_get_int8_weights_and_stay_accurate(tagger):
    q = quantize_dynamic(tagger)
    assert [type(q.embed), type(q.lstm), type(q.gru), type(q.head)] == [Int8Linear, Int8RNN, Int8RNN, Int8Linear]
    assert q.lstm.weight_ih_l0_int8.dtype == torch.int8 and q.gru.weight_hh_l0_reverse_int8.dtype == torch.int8
    x = torch.randn(3, 7, 16)
    ref = tagger(x).detach()
    out = q(x)
    assert (out - ref).abs().max() < 0.02 * ref.abs().max()
    assert not torch.equal(out, ref)             # it really is rounded
    assert size_on_disk(q) <= 0.3 * size_on_disk(tagger)
    assert type(tagger.lstm) is nn.LSTM          # the original is untouched


def test_skip_by_name_and_by_type_keeps_layers_float(tagger):
    q = quantize_dynamic(tagger, skip=["head", nn.GRU])
    assert [type(q.embed), type(q.lstm), type(q.gru), type(q.head)] == [Int8Linear, Int8RNN, nn.GRU, nn.Linear]
    torch.testing.assert_close(q.head.weight, tagger.head.weight)


def test_unknown_skip_name_and_bad_layer_types_are_refused(tagger):
    with pytest.raises(ValueError, match=r"Expected `skip` to be a layer name of the model.*Received: skip='decoder'"):
        quantize_dynamic(tagger, skip=["decoder"])
    with pytest.raises(TypeError, match=r"Expected `layer_types` to be a subset of"):
        quantize_dynamic(tagger, layer_types=[nn.Conv2d])
    with pytest.raises(TypeError, match=r"Expected `skip` to be layer names \(str\) or layer types"):
        quantize_dynamic(tagger, skip=[3])


def test_dequantize_gives_the_rounded_float_model(tagger):
    q = quantize_dynamic(tagger)
    f = dequantize(q)
    assert type(f.lstm) is nn.LSTM and type(f.head) is nn.Linear
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(f(x), q(x), rtol=1e-5, atol=1e-6)


def test_int8_onnx_export_is_small_and_runs_in_the_predictor(mlp, tmp_path):
    q = quantize_dynamic(mlp, skip=["4"])
    spec = [sampan.InputSpec([None, 64], name="x")]
    file = export_onnx(q, tmp_path / "mlp", spec, layout="dynamic")
    import onnx
    ops = collections.Counter(n.op_type for n in onnx.load(str(file)).graph.node)
    assert ops["MatMulInteger"] == 2 and ops["MatMul"] == 1   # the skipped layer stays float
    float_bytes = 4 * sum(p.numel() for p in mlp.parameters())
    assert file.stat().st_size < 0.35 * float_bytes
    predictor = sampan.inference.create_predictor(sampan.inference.Config(tmp_path / "mlp"))
    assert predictor.backend == "onnxruntime"
    x = torch.randn(5, 64)
    out = torch.from_numpy(predictor.run([x.numpy()])[0])
    ref = mlp(x).detach()
    assert (out - ref).abs().max() < 0.05 * ref.abs().max()


def test_dynamic_int8_model_saves_with_jit(tagger, tmp_path):
    q = quantize_dynamic(tagger)
    spec = [sampan.InputSpec([None, 7, 16], name="x")]
    sampan.jit.save(q, tmp_path / "tagger", input_spec=spec)
    loaded = sampan.jit.load(tmp_path / "tagger")
    x = torch.randn(2, 7, 16)
    torch.testing.assert_close(loaded(x), q(x), rtol=1e-5, atol=1e-5)
    assert (tmp_path / "tagger.pt2").stat().st_size < 0.5 * size_on_disk(tagger)  # int8 in the archive too
