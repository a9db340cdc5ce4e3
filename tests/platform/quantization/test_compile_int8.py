"""compile_int8: quantized models run int8 kernels in torch (seen in inductor's generated code) and
agree with their reference int8 models."""
import warnings

import pytest
import torch
from torch import nn

from sampan.quantization import PTQ, Int8Compiled, QuantConfig, compile_int8, quantize_dynamic
from sampan.quantization._pt2e import int8_vnni, reduce_range


def test_dynamic_int8_mlp_runs_int8_matmuls_and_matches_the_reference(mlp):
    qnet = quantize_dynamic(mlp)
    fast = compile_int8(qnet, max_autotune=False, backend="inductor")
    x = torch.randn(8, 64)
    kernels = fast.int8_kernels(x)
    assert {"_int_mm", "int8 micro-GEMM", "onednn.qlinear"} & set(kernels), kernels  # int8 x int8 GEMMs
    with torch.no_grad():
        ref, got, fp32 = qnet(x), fast(x), mlp(x)
    assert fast.flow == "dynamic"
    # activations are rounded to int8 too: close to the weight-only reference and to fp32
    assert (got - ref).abs().max() < 0.05 * ref.abs().max()
    assert (got.argmax(1) == fp32.argmax(1)).float().mean() >= 0.75
    # the same int8 weights, re-rounded by torchao's own scales (to 7 bits on a CPU without VNNI): within half a step
    weight = fast.module[0].weight
    theirs = weight.qdata.float() * weight.scale.reshape(-1, 1)
    ours = qnet[0].dequantize().weight
    assert ((theirs - ours).abs() <= 0.501 * weight.scale.reshape(-1, 1)).all()
    bound = 63 if reduce_range() else 127
    # in int32: an int8 tensor compared with 128 wraps the 128 to -128
    assert weight.qdata.int().abs().max().item() <= bound + 1


def test_int8_ranges_follow_the_cpu(lenet):
    # without VNNI the x86 int8 kernels' 16-bit pair sums saturate on full 8-bit ranges: 7-bit weights there
    # (activations keep 0..255, which ONNX's QuantizeLinear clamps to as well)
    ptq = PTQ()
    observed = ptq.quantize(lenet, torch.rand(2, 1, 28, 28))
    ptq.calibrate(observed, [torch.rand(8, 1, 28, 28)])
    q = ptq.convert(observed)
    # quantize_per_*(x, scale, zero_point, [axis,] quant_min, quant_max, dtype): activations and weights
    ranges = {(n.args[-1], n.args[-2]) for n in q.graph.nodes
              if n.op == "call_function" and "dequantize_per" in str(n.target)}
    weights = 127 if int8_vnni() else 63
    assert ranges == {(torch.uint8, 255), (torch.int8, weights)}, ranges
    assert reduce_range() == (weights == 63)
    explicit = PTQ(QuantConfig(weight_bits=8))
    observed = explicit.quantize(lenet, torch.rand(2, 1, 28, 28))
    explicit.calibrate(observed, [torch.rand(8, 1, 28, 28)])
    converted = explicit.convert(observed)
    assert any(n.args[-2] == 127 for n in converted.graph.nodes if "dequantize_per_channel" in str(n.target))


@pytest.mark.parametrize("variable", ["ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"])
def test_int8_ranges_follow_a_onednn_isa_cap(monkeypatch, variable):
    # oneDNN held to AVX2 on a VNNI CPU multiplies with vpmaddubsw too: full 8-bit ranges saturated there (40 %
    # error on the MLP under ATEN_CPU_CAPABILITY=avx2), so the cap is read as "no VNNI"
    for name in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        monkeypatch.delenv(name, raising=False)
    has_vnni = torch.cpu._is_vnni_supported()
    assert int8_vnni() == has_vnni and reduce_range() == (not has_vnni)
    for cap in ("AVX2", "avx2", "AVX512_CORE", "SSE41"):
        monkeypatch.setenv(variable, cap)
        assert not int8_vnni() and reduce_range(), cap
    for cap in ("AVX512_CORE_VNNI", "AVX2_VNNI", "AVX512_CORE_AMX", ""):
        monkeypatch.setenv(variable, cap)
        assert int8_vnni() == has_vnni, cap


def test_fbgemm_flow_runs_fbgemm_int8_kernels_on_the_same_int8_weights(mlp):
    qnet = quantize_dynamic(mlp)
    fast = compile_int8(qnet, backend="fbgemm")
    x = torch.randn(8, 64)
    assert fast.flow == "fbgemm" and fast.int8_kernels(x) == ["fbgemm linear_dynamic"]
    assert torch.equal(fast.module[0].fbgemm.weight().int_repr(), qnet[0].weight_int8)   # not re-rounded
    with torch.no_grad():
        ref, got, fp32 = qnet(x), fast(x), mlp(x)
    assert (got - ref).abs().max() < 0.05 * ref.abs().max()
    assert (got.argmax(1) == fp32.argmax(1)).float().mean() >= 0.75
    # the automatic choice: fbgemm where the CPU has no VNNI (inductor has no fast int8 GEMM there)
    assert compile_int8(qnet).flow == ("fbgemm" if reduce_range() else "dynamic")


def test_fbgemm_flow_takes_one_or_two_rows_through_the_int8_gemv_kernel_with_the_relus_folded_in(mlp):
    qnet = quantize_dynamic(mlp)
    fast = compile_int8(qnet, backend="fbgemm")
    assert fast.kernels == "up to 2 rows: int8 GEMV kernel; more rows: fbgemm", fast.kernels
    # Linear, ReLU, Linear, ReLU, Linear: the ReLUs run inside the layers before them; the other names stay
    assert list(fast.module._modules) == ["0", "2", "4"]
    assert [m.relu for m in fast.module] == [True, True, False]
    row, rows = torch.randn(1, 64), torch.randn(8, 64)
    assert fast.int8_kernels(row) == ["int8 GEMV"] and fast.int8_kernels(rows) == ["fbgemm linear_dynamic"]
    assert fast.int8_kernels(torch.randn(2, 64)) == ["int8 GEMV"] and fast.int8_kernels(torch.randn(3, 64)) == [
        "fbgemm linear_dynamic"]
    with torch.no_grad():
        ref, got = qnet(row), fast(row)
        ref8, got8 = qnet(rows), fast(rows)
    # one row: the reference's arithmetic with the row rounded to int16 steps (fbgemm rounds rows to 7 bits)
    assert (got - ref).abs().max() < 1e-3 * ref.abs().max(), (got - ref).abs().max()
    assert (got8 - ref8).abs().max() < 0.05 * ref8.abs().max()
    assert fast(torch.randn(64)).shape == (10,)  # a 1-d input is one row too
    # .to() and friends replace buffers: the kernel's arguments follow
    layer = fast.module[0]
    layer.double()
    assert layer._args[1] is layer.weight_scale and layer.weight_scale.dtype == torch.float64


def test_fbgemm_flow_computes_a_bf16_input_in_float32_and_gives_bf16_back(mlp):
    # as Int8Linear: bf16 in, bf16 out (fbgemm: "expected scalar type Float but found BFloat16" before; the int8 GEMV
    # kernel: "linear_w8: x must be float32")
    qnet = quantize_dynamic(mlp)
    fast = compile_int8(qnet, backend="fbgemm")
    for rows in (1, 8):  # the int8 GEMV kernel, fbgemm
        x = torch.randn(rows, 64)
        with torch.no_grad():
            ref, got = qnet(x), fast(x.bfloat16())
        assert got.dtype == torch.bfloat16 and (got.float() - ref).abs().max() < 0.05 * ref.abs().max()
        assert fast(x).dtype == torch.float32


@pytest.mark.parametrize("backend", ["fbgemm", "inductor"])
def test_a_bare_quantized_linear_is_compiled_itself(backend):
    # the model itself an Int8Linear: the swap went to a child named "" (fbgemm: silently none, the reference kernels
    # ran; inductor: KeyError "attribute 'weight' already exists")
    from sampan.quantization.compiled import FbgemmInt8Linear

    torch.manual_seed(0)
    layer = nn.Linear(16, 32).eval()
    fast, x = compile_int8(quantize_dynamic(layer), backend=backend, max_autotune=False), torch.randn(4, 16)
    assert type(fast.module) is {"fbgemm": FbgemmInt8Linear, "inductor": nn.Linear}[backend]
    assert not fast.module._modules.get("")
    if backend == "fbgemm":
        assert fast.int8_kernels(x) == ["fbgemm linear_dynamic"] and fast.int8_kernels(x[:1]) == ["int8 GEMV"]
    else:  # torchao's int8 weights, as in the MLP's layers (whose int8 GEMMs the first test finds)
        assert fast.module.weight.qdata.dtype == torch.int8
    with torch.no_grad():
        ref, got = layer(x), fast(x)
    assert (got - ref).abs().max() < 0.05 * ref.abs().max()


def test_with_onednn_held_to_avx2_a_dynamic_model_runs_fbgemm_and_the_int8_gemv(mlp, monkeypatch):
    # how an AVX2-only CPU is emulated on this one (the figures in BENCHMARKS.md): the automatic choice follows
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    fast = compile_int8(quantize_dynamic(mlp))
    assert fast.flow == "fbgemm" and fast.int8_kernels(torch.randn(1, 64)) == ["int8 GEMV"]


def test_without_the_gemv_kernel_every_call_goes_to_fbgemm_and_the_kernels_say_why(mlp, monkeypatch):
    from sampan.quantization import gemv
    from sampan.utils import cpp_kernels

    monkeypatch.setitem(cpp_kernels._STATE, gemv._NAME, "no C++ compiler ('c++' is not on PATH)")
    fast = compile_int8(quantize_dynamic(mlp), backend="fbgemm")
    assert fast.kernels == ("up to 2 rows: fbgemm (the int8 GEMV kernel cannot run here: no C++ compiler ('c++' is "
                            "not on PATH)); more rows: fbgemm")
    assert fast.int8_kernels(torch.randn(1, 64)) == ["fbgemm linear_dynamic"]
    with pytest.raises(RuntimeError, match=r"cannot run here: no C\+\+ compiler.*HINT: .*backend='fbgemm'"):
        gemv.linear_w8(torch.randn(1, 64), torch.zeros(4, 64, dtype=torch.int8), torch.ones(4))


def _static_lenet(lenet, g: torch.Generator):
    """LeNet through PTQ (calibrated on random images from ``g``) and compiled onto int8 kernels."""
    ptq = PTQ()
    observed = ptq.quantize(lenet, torch.rand(2, 1, 28, 28))
    ptq.calibrate(observed, [torch.rand(16, 1, 28, 28, generator=g) for _ in range(3)])
    q = ptq.convert(observed)
    return q, compile_int8(q, max_autotune=False)


def test_static_int8_lenet_runs_onednn_int8_convolutions(lenet):
    g = torch.Generator().manual_seed(1)
    q, fast = _static_lenet(lenet, g)
    x = torch.rand(4, 1, 28, 28, generator=g)
    kernels = fast.int8_kernels(x)
    assert {"onednn.qconv", "onednn.qlinear"} <= set(kernels), kernels
    with torch.no_grad():
        ref = q(x)
        torch.testing.assert_close(fast(x), ref, rtol=0.05, atol=0.05 * float(ref.abs().max()))


def test_static_int8_pools_on_the_int8_values_bit_for_bit(lenet):
    # dequantize -> max_pool2d -> quantize (same scale both sides) is one max-pool of the uint8 values: not
    # quantized.max_pool2d (slow on LeNet's 6 and 16 channels), and the same result as that lowering
    from torch._inductor.utils import run_and_get_code

    g = torch.Generator().manual_seed(2)
    q, fast = _static_lenet(lenet, g)
    pools = [n for n in fast.module.graph.nodes if n.target == torch.ops.aten.max_pool2d.default]
    assert len(pools) == 2 and all(p.args[0].target == torch.ops.quantized_decomposed.quantize_per_tensor.default
                                   for p in pools), [p.args[0] for p in pools]
    assert any(n.target == torch.ops.aten.max_pool2d.default for n in q.graph.nodes)  # the input is not modified
    as_lowered = Int8Compiled(q, "pt2e", max_autotune=False)
    x = torch.rand(8, 1, 28, 28, generator=g)
    with torch._inductor.config.patch(fx_graph_cache=False):
        got, code = run_and_get_code(fast, x)
        theirs, their_code = run_and_get_code(as_lowered, x)
    assert "quantized.max_pool2d" in "\n".join(their_code)
    assert "quantized.max_pool2d" not in "\n".join(code) and "onednn.qconv" in "\n".join(code)
    assert torch.equal(got, theirs)


def test_static_int8_calls_skip_dynamo_and_match_its_graph_bit_for_bit(lenet):
    # a pt2e model is one captured graph already: inductor compiles it per input layout and the calls skip
    # Dynamo's guards, with the very kernels a torch.compile of it runs
    from torch.profiler import ProfilerActivity, profile

    from sampan.quantization.compiled import _Int8Backend

    g = torch.Generator().manual_seed(3)
    q, fast = _static_lenet(lenet, g)
    x = torch.rand(8, 1, 28, 28, generator=g)
    through_dynamo = torch.compile(fast.module, dynamic=False, backend=_Int8Backend(max_autotune=False))
    with torch.no_grad(), torch._inductor.config.patch(freezing=True):  # as Int8Compiled's Dynamo flow compiles
        theirs = through_dynamo(x)
    with torch.no_grad():
        torch.testing.assert_close(fast(x), theirs, rtol=0, atol=0)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            fast(x)
    seen = {e.name for e in prof.events()}
    assert "onednn::qconv_pointwise" in seen and not any("Dynamo" in name for name in seen), sorted(seen)
    assert len(fast._compiled.graphs) == 1
    # a new layout (a transposed, non-contiguous batch) gets a graph of its own, the same layout reuses one;
    # keyword arguments are bound
    wide = torch.rand(28, 1, 28, 8, generator=g).permute(3, 1, 2, 0)
    with torch.no_grad():
        torch.testing.assert_close(fast(x=wide), fast(wide.contiguous()), rtol=0, atol=0)
        ref = q(wide)
    assert len(fast._compiled.graphs) == 2
    torch.testing.assert_close(fast(wide), ref, rtol=0.05, atol=0.05 * float(ref.abs().max()))
    assert not any(n.op == "call_function" and n.target == torch.ops.onednn.qconv_pointwise.tensor
                   for n in fast.module.graph.nodes)  # inductor worked on copies


def test_max_autotune_still_runs_int8_kernels():
    torch.manual_seed(0)
    qnet = quantize_dynamic(nn.Sequential(nn.Linear(32, 64)).eval())
    fast = compile_int8(qnet)                            # the default, as `sampan bench compress` runs it
    x = torch.randn(2, 32)
    assert fast.int8_kernels(x), "no int8 kernel in the generated code"
    with torch.no_grad():
        ref = qnet(x)
        assert (fast(x) - ref).abs().max() < 0.05 * ref.abs().max()


def test_bad_input_is_named(mlp):
    with pytest.raises(TypeError, match=r"`model`.*HINT: quantize it first"):
        compile_int8(mlp)
    with pytest.raises(TypeError, match="model"):
        compile_int8("mlp")
    with pytest.raises(ValueError, match=r"`backend`.*Received: backend='onnx'"):
        compile_int8(quantize_dynamic(mlp), backend="onnx")
    fast = compile_int8(quantize_dynamic(mlp), max_autotune=False)
    assert isinstance(fast, Int8Compiled)
    with pytest.raises(RuntimeError, match="inference only"):
        fast.train()


class _ResidualBlock(nn.Module):
    """torchvision's BasicBlock shape: one ReLU module called twice, around a residual add."""

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(4, 4, 3, padding=1), nn.Conv2d(4, 4, 3, padding=1)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.conv2(self.relu(self.conv1(x))) + x)


def test_ptq_takes_an_activation_module_called_twice():
    torch.manual_seed(0)
    net = _ResidualBlock().eval()
    ptq = PTQ()
    observed = ptq.quantize(net, torch.rand(2, 4, 8, 8))   # raised "more than one output node" before
    ptq.calibrate(observed, [torch.rand(8, 4, 8, 8) for _ in range(2)])
    q = ptq.convert(observed)
    x = torch.rand(3, 4, 8, 8)
    with torch.no_grad():
        ref = net(x)
        assert (q(x) - ref).abs().max() < 0.05 * ref.abs().max()


def test_after_torch_compile_caches_are_reset_it_compiles_once_more_and_agrees(mlp):
    from torch._dynamo.utils import counters

    fast = compile_int8(quantize_dynamic(mlp), max_autotune=False, backend="inductor")
    x = torch.randn(4, 64)
    before = fast(x)
    torch._dynamo.reset()  # as sampan.jit.explain does: the next call compiles, unseen by the shape cache
    torch.testing.assert_close(fast(x), before)
    graphs = counters["stats"]["unique_graphs"]
    torch.testing.assert_close(fast(x), before)
    assert counters["stats"]["unique_graphs"] == graphs  # compiled again once (with freezing), then reused


def _encoder(batch_first: bool) -> nn.TransformerEncoder:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, batch_first=batch_first)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()


@pytest.mark.parametrize("batch_first", [True, False], ids=["fused", "layers"])
def test_fbgemm_flow_runs_a_transformer_encoder(batch_first):
    # batch_first: torch's fused inference path reads linear1.weight / linear2.weight (FbgemmInt8Linear had none);
    # otherwise the layers are called and run fbgemm's int8 kernels
    enc = _encoder(batch_first)
    qnet = quantize_dynamic(enc)
    fast = compile_int8(qnet, backend="fbgemm")
    x, pad = torch.randn(2, 5, 32), torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    if not batch_first:
        x = x.transpose(0, 1)
    with torch.no_grad():
        ref, got = enc(x, src_key_padding_mask=pad), fast(x, src_key_padding_mask=pad)
    assert (got - ref).abs().max() < 0.05
    layer = fast.module.layers[0].linear1
    assert torch.equal(layer.weight, qnet.layers[0].linear1.weight) and not layer.weight.requires_grad
    with pytest.raises(AttributeError):
        layer.weight = layer.weight.clone()  # read-only: the int8 values are the weights
    expected = [] if batch_first else ["fbgemm linear_dynamic"]
    assert fast.int8_kernels(x, None, pad) == expected  # (src, mask, src_key_padding_mask)


def test_dynamic_flow_keeps_layers_of_at_most_8_outputs_weight_only_under_max_autotune():
    # a 2-class head's int8 GEMM failed to autotune in torch ("LoweringException: KeyError: 'buf6'": inductor inlines
    # its two scales): the text Transformer classifier did not compile
    torch.manual_seed(0)
    qnet = quantize_dynamic(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)).eval())
    fast = compile_int8(qnet, backend="inductor")  # lazy: compiles at the first call
    assert type(fast.module[2]) is type(qnet[2]) and type(fast.module[0]) is nn.Linear  # torchao's int8 Linear
    assert "float GEMMs on the int8-rounded weights for '2' (at most 8 outputs" in fast.kernels, fast.kernels
    assert type(compile_int8(qnet, max_autotune=False, backend="inductor").module[2]) is nn.Linear
    head = quantize_dynamic(nn.Sequential(nn.Linear(16, 2)).eval())  # one layer: one autotuning, a few seconds
    fast, x = compile_int8(head, backend="inductor"), torch.randn(4, 16)
    with torch.no_grad():
        ref = head(x)
        torch.testing.assert_close(fast(x), ref, rtol=1e-4, atol=1e-4 * float(ref.abs().max()))
    assert fast.kernels.startswith("inductor: int8 GEMMs; float GEMMs") and fast.max_autotune  # no fallback


def test_where_inductor_fails_it_compiles_without_max_autotune_then_runs_eagerly_and_says_why(mlp, monkeypatch):
    from sampan.quantization import compiled

    qnet, x = quantize_dynamic(mlp), torch.randn(4, 64)
    with torch.no_grad():
        ref = qnet(x)
    compile_fx = compiled._Int8Backend.__call__
    tries = []

    def failing(autotune_only):
        def backend(self, graph_module, example_inputs):
            tries.append(self.options["max_autotune"])
            if self.options["max_autotune"] or not autotune_only:
                raise KeyError("buf6")  # as inductor's autotuner failed on a 2-class head
            return compile_fx(self, graph_module, example_inputs)
        return backend

    monkeypatch.setattr(compiled._Int8Backend, "__call__", failing(autotune_only=True))
    fast = compile_int8(qnet, backend="inductor")
    with pytest.warns(RuntimeWarning, match=r"\(KeyError: 'buf6'\); compiled again without max-autotune"):
        got = fast(x)
    assert tries == [True, False] and not fast.max_autotune and fast._compiled is not None
    assert fast.kernels == "inductor: int8 GEMMs (without max-autotune: inductor failed with it: KeyError: 'buf6')"
    assert (got - ref).abs().max() < 0.05 * ref.abs().max()

    monkeypatch.setattr(compiled._Int8Backend, "__call__", failing(autotune_only=False))
    tries.clear()
    fast = compile_int8(qnet, backend="inductor", max_autotune=False)
    with pytest.warns(RuntimeWarning, match=r"running the int8 model eagerly"):
        got = fast(x)
    assert tries == [False] and fast._compiled is None
    assert fast.kernels == "eager: Int8Compiled.module, uncompiled (inductor failed: KeyError: 'buf6')"
    assert (got - ref).abs().max() < 0.05 * ref.abs().max()
    torch.testing.assert_close(fast(x), got)  # no second try
    assert tries == [False]


def test_where_inductor_fails_on_a_static_model_it_falls_back_the_same_way(lenet, monkeypatch):
    from sampan.quantization import compiled

    tries = []

    def failing(self, graph_module, example_inputs):
        tries.append(self.options["max_autotune"])
        raise KeyError("buf6")

    g = torch.Generator().manual_seed(4)
    q, _ = _static_lenet(lenet, g)
    monkeypatch.setattr(compiled._Int8Backend, "__call__", failing)
    fast, x = compile_int8(q), torch.rand(2, 1, 28, 28, generator=g)
    first = r"the pt2e int8 model \(KeyError: 'buf6'\); compiled again without max-autotune"
    with pytest.warns(RuntimeWarning, match=first):
        with pytest.warns(RuntimeWarning, match=r"running the int8 model eagerly"):
            got = fast(x)
    assert tries == [True, False] and fast._compiled is None
    assert fast.kernels.startswith("eager: Int8Compiled.module, uncompiled (inductor failed: KeyError: 'buf6')")
    with torch.no_grad():
        torch.testing.assert_close(got, q(x))


def test_a_static_model_beyond_its_compiled_layouts_runs_uncompiled_and_says_so_once(lenet, monkeypatch):
    from sampan.quantization import compiled

    monkeypatch.setattr(compiled._PerLayout, "MAX_LAYOUTS", 1)  # as Dynamo's recompile_limit (8), sooner
    g = torch.Generator().manual_seed(5)
    q, fast = _static_lenet(lenet, g)
    x2, x3 = torch.rand(2, 1, 28, 28, generator=g), torch.rand(3, 1, 28, 28, generator=g)
    fast(x2)
    with pytest.warns(RuntimeWarning, match=r"1 input layouts \(sizes, strides\) compiled already.*HINT: pad") as seen:
        got = fast(x3)
    assert seen[0].filename == __file__  # the caller's line
    assert list(fast._compiled.graphs) == [compiled._PerLayout.layout((x2,))]
    with torch.no_grad():
        torch.testing.assert_close(got, q(x3), rtol=0, atol=0)  # the int8 model itself
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fast(x3)  # once
