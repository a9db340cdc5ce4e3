import collections
import copy

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


def _encoder():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()


def test_transformer_encoder_runs_after_quantize_dynamic_on_both_paths():
    enc = _encoder()
    q = quantize_dynamic(enc)
    layer = q.layers[0]
    assert type(layer.linear1) is Int8Linear and type(layer.linear2) is Int8Linear
    assert type(layer.self_attn.out_proj) is nn.modules.linear.NonDynamicallyQuantizableLinear  # stays float
    x, pad = torch.randn(2, 5, 32), torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    with torch.no_grad():  # inference: torch's fused kernel, which reads linear1.weight / linear2.weight
        ref, fast = enc(x, src_key_padding_mask=pad), q(x, src_key_padding_mask=pad)
    slow = q(x.requires_grad_(), src_key_padding_mask=pad)  # grad enabled: the layers are called
    for out in (fast, slow):
        assert (out - ref).abs().max() < 0.05
    torch.testing.assert_close(fast[~pad], slow.detach()[~pad], rtol=1e-4, atol=1e-4)
    w = layer.linear1.weight
    assert w.dtype == torch.float32 and w.shape == (64, 32) and not w.requires_grad
    torch.testing.assert_close(w, dequantize(q).layers[0].linear1.weight)
    assert (w - enc.layers[0].linear1.weight).abs().max() <= layer.linear1.weight_scale.max() / 2 + 1e-6
    with pytest.raises(AttributeError):
        layer.linear1.weight = w.clone()  # read-only: the int8 values are the weights
    assert "layers.0.linear1.weight" not in q.state_dict()


def test_text_transformer_classifier_and_its_sensitivity_work_with_int8():
    from sampan import text
    torch.manual_seed(0)
    cfg = text.TransformerConfig(vocab_size=50, dim=32, heads=2, layers=1, max_len=16)
    clf = text.TransformerClassifier(text.CharTransformer(cfg), num_classes=2).eval()
    ids = torch.randint(1, 50, (2, 12))
    ids[1, 8:] = 0
    q = quantize_dynamic(clf)
    with torch.no_grad():
        ref = clf(ids)
        assert (q(ids) - ref).abs().max() < 0.05
    assert (q(ids) - ref).abs().max() < 0.05

    def closeness(model):
        with torch.no_grad():
            return -float((model(ids) - ref).abs().max())
    table = sampan.quantization.sensitivity(clf, closeness, method="dynamic")
    assert list(table) == ["encoder.encoder.layers.0.linear1", "encoder.encoder.layers.0.linear2", "head"]
    assert all(0.0 <= v["int8"] < 0.05 for v in table.losses.values())


def test_int8_linear_computes_in_a_bf16_inputs_dtype_outside_autocast(mlp):
    # as nn.Linear in a bf16 model: bf16 in, bf16 out (the float32 bias met bf16 weights: a dtype error before)
    q = quantize_dynamic(mlp)
    x = torch.randn(4, 64)
    with torch.no_grad():
        ref = q(x)
        for model in (q, copy.deepcopy(q).bfloat16()):  # float32 scales and bias, then all in bf16
            out = model(x.bfloat16())
            assert out.dtype == torch.bfloat16
            assert (out.float() - ref).abs().max() < 0.02 * ref.abs().max()
        assert q(x).dtype == torch.float32 and torch.equal(q(x), ref)


@pytest.mark.parametrize("layer", [nn.Linear(8, 2), nn.LSTM(8, 4), nn.GRU(8, 4)], ids=["Linear", "LSTM", "GRU"])
def test_a_bare_layer_is_quantized_itself(layer):
    torch.manual_seed(0)
    q = quantize_dynamic(layer)
    assert type(q) is (Int8Linear if isinstance(layer, nn.Linear) else Int8RNN) and not q.training
    assert any(t.dtype == torch.int8 for t in q.state_dict().values())
    x = torch.randn(3, 8) if isinstance(layer, nn.Linear) else torch.randn(5, 3, 8)
    out, ref = (q(x), layer(x)) if isinstance(layer, nn.Linear) else (q(x)[0], layer(x)[0])
    assert (out - ref).abs().max() < 0.02
    assert type(quantize_dynamic(layer, skip=[type(layer)])) is type(layer)
    back = dequantize(q)  # the float layer itself (before: the int8 one with the float one as a child named "")
    assert type(back) is type(layer) and not back._modules
    with torch.no_grad():
        torch.testing.assert_close(back(x) if isinstance(layer, nn.Linear) else back(x)[0], out)


@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU], ids=["LSTM", "GRU"])
def test_int8_rnn_computes_in_a_bf16_inputs_dtype(kind):
    # as Int8Linear and a bf16 LSTM / GRU: bf16 in, bf16 out (the float32 weights met the bf16 input: "RNN input dtype
    # (torch.bfloat16) does not match weight dtype (torch.float32)" before)
    torch.manual_seed(0)
    q = quantize_dynamic(kind(8, 16, num_layers=2, batch_first=True, bidirectional=True))
    x = torch.randn(3, 5, 8)
    with torch.no_grad():
        ref = q(x)[0]
        for model in (q, copy.deepcopy(q).bfloat16()):  # float32 scales and biases, then all in bf16
            out = model(x.bfloat16())[0]
            assert out.dtype == torch.bfloat16
            assert (out.float() - ref).abs().max() < 0.02 * ref.abs().max()
        packed = nn.utils.rnn.pack_padded_sequence(x.bfloat16(), [5, 3, 2], batch_first=True)
        assert q(packed)[0].data.dtype == torch.bfloat16
        assert q(x)[0].dtype == torch.float32 and torch.equal(q(x)[0], ref)
        assert copy.deepcopy(q).bfloat16()(x)[0].dtype == torch.float32
