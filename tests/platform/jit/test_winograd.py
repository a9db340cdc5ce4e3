"""Winograd F(2x2, 3x3) and F(4x4, 3x3) convolutions: the same results as the direct convolution, put only where
they apply, and a to_static inference candidate that is verified and timed beside the others."""
import operator

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import sampan
import sampan.jit.winograd as winograd
from jit_helpers import rewritten_nodes
from sampan.utils import cpp_kernels
from sampan.jit.winograd import conv3x3, conv3x3_f4, rewrite


@pytest.mark.parametrize("shape,padding",
                         [((2, 16, 9, 7), 1), ((1, 32, 8, 8), 0), ((3, 16, 5, 6), 2), ((1, 24, 1, 1), 1)])
def test_winograd_convolution_matches_the_direct_one(shape, padding):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=g)
    w, b = torch.randn(40, shape[1], 3, 3, generator=g), torch.randn(40, generator=g)
    ref = F.conv2d(x, w, b, padding=padding)
    got = conv3x3(x, w, b, padding)
    assert got.shape == ref.shape
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4 * float(ref.abs().max()))
    torch.testing.assert_close(conv3x3(x, w, None, padding), F.conv2d(x, w, padding=padding), rtol=1e-4,
                               atol=1e-4 * float(ref.abs().max()))


# tiles per call (rows of the kernel's matrix products, 6 at a time): 12, 4, 12, 1, 9, 8 and 196 (blocks of 113 and 83);
# 40 output channels: two panels of 16 and one of 8
@pytest.mark.parametrize("shape,padding", [((2, 16, 9, 7), 1), ((1, 32, 8, 8), 0), ((3, 16, 5, 6), 2),
                                           ((1, 24, 1, 1), 1), ((1, 16, 10, 10), 1), ((2, 16, 8, 8), 1),
                                           ((1, 64, 56, 56), 1)])
def test_winograd_f4_kernel_matches_the_direct_convolution(shape, padding):
    assert winograd.f4_unavailable() is None  # this project's machines have AVX2 and g++ (as the C++ lesson needs)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(*shape, generator=g)
    w = torch.randn(40, shape[1], 3, 3, generator=g) / (9 * shape[1]) ** 0.5
    b = torch.randn(40, generator=g)
    ref = F.conv2d(x.double(), w.double(), b.double(), padding=padding)
    for bias in (b, None):
        got = conv3x3_f4(x, w, bias, padding)
        assert got.shape == ref.shape and got.dtype == torch.float32
        expected = ref if bias is not None else ref - b.double().reshape(1, -1, 1, 1)
        # F(4x4) rounds more than the direct convolution (its transforms' constants reach 8 and 1/24), still ~1e-5
        assert (got.double() - expected).abs().max() <= 1e-4 * max(1.0, float(expected.abs().max()))


# tiles per call 1-13 and 16 (the AVX-512 micro-kernel takes 12 rows at a time, so every tail of 1-11 rows); 48 output
# channels: one pair of 16-channel panels and one panel alone
@pytest.mark.parametrize("shape", [(1, 16, 4, 4), (1, 16, 8, 4), (1, 16, 12, 4), (1, 16, 8, 8), (1, 16, 20, 4),
                                   (2, 16, 12, 4), (1, 16, 28, 4), (2, 16, 16, 4), (3, 16, 12, 4), (1, 16, 20, 8),
                                   (1, 16, 44, 4), (4, 16, 12, 4), (1, 16, 52, 4), (1, 32, 16, 16)])
def test_the_f4_kernel_gives_the_same_result_from_panels_of_8_and_of_16(shape):
    assert winograd.f4_unavailable() is None
    g = torch.Generator().manual_seed(2)
    x = torch.randn(*shape, generator=g)
    w = torch.randn(48, shape[1], 3, 3, generator=g) / (9 * shape[1]) ** 0.5
    b = torch.randn(48, generator=g)
    op = torch.ops.sampan_winograd.conv3x3_f4
    ref = F.conv2d(x.double(), w.double(), b.double(), padding=1)
    by8 = op(x, winograd.f4_weights(w, 8), b, 1)
    assert (by8.double() - ref).abs().max() <= 1e-4 * float(ref.abs().max())
    if torch.cpu._is_avx512_supported():  # what the kernel checks: the CPU itself, not ATEN_CPU_CAPABILITY
        by16 = op(x, winograd.f4_weights(w, 16), b, 1)
        assert (by16.double() - ref).abs().max() <= 1e-4 * float(ref.abs().max())
        torch.testing.assert_close(by16, by8, rtol=1e-5, atol=1e-5 * float(ref.abs().max()))
    else:  # the 16-channel micro-kernel is AVX-512 code: refused by name where the CPU lacks it
        with pytest.raises(RuntimeError, match="panels of 16 output channels need an AVX-512 CPU"):
            op(x, winograd.f4_weights(w, 16), b, 1)


def test_f4_panels_are_16_channels_on_avx512_cpus_when_the_channels_allow(monkeypatch):
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    monkeypatch.setattr(torch.cpu, "_is_avx512_supported", lambda: True)
    assert (winograd.f4_panel(64), winograd.f4_panel(48), winograd.f4_panel(40)) == (16, 16, 8)
    assert winograd.f4_weights(torch.randn(48, 8, 3, 3), 16).shape == (36, 3, 8, 16)
    # torch's capability alone (a test's) on a CPU without AVX-512: the kernel would refuse 16-channel panels
    monkeypatch.setattr(torch.cpu, "_is_avx512_supported", lambda: False)
    assert winograd.f4_panel(64) == 8
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    assert winograd.f4_panel(64) == 8
    assert winograd.f4_weights(torch.randn(48, 8, 3, 3), 8).shape == (36, 6, 8, 8)


def test_the_f4_kernel_refuses_what_it_cannot_take_by_name():
    assert winograd.f4_unavailable() is None
    op = torch.ops.sampan_winograd.conv3x3_f4
    with pytest.raises(RuntimeError, match="multiples of 8.*C = 12"):
        op(torch.randn(1, 12, 8, 8), torch.randn(36, 2, 12, 8), torch.empty(0), 1)
    with pytest.raises(RuntimeError, match=r"u must be the transformed weights in panels \[36, K / P, C, P\]"):
        op(torch.randn(1, 16, 8, 8), torch.randn(36, 16, 16), torch.empty(0), 1)
    with pytest.raises(RuntimeError, match="float32"):
        op(torch.randn(1, 16, 8, 8, dtype=torch.float64), torch.randn(36, 2, 16, 8), torch.empty(0), 1)
    with pytest.raises(ValueError, match=r"multiples of 8.*\(20, 16, 3, 3\).*HINT: use conv3x3"):
        conv3x3_f4(torch.randn(1, 16, 8, 8), torch.randn(20, 16, 3, 3), None, 1)


def test_without_the_f4_kernel_every_convolution_gets_f2_and_conv3x3_f4_says_why(monkeypatch):
    monkeypatch.setitem(cpp_kernels._STATE, winograd._F4_NAME, "no C++ compiler ('c++' is not on PATH)")
    with pytest.raises(RuntimeError, match=r"F\(4x4, 3x3\) cannot run here: no C\+\+ compiler.*HINT: use conv3x3"):
        conv3x3_f4(torch.randn(1, 16, 8, 8), torch.randn(16, 16, 3, 3), None, 1)
    net = _Sized().eval()
    targets, backend = _targets_backend()
    with torch.no_grad():
        torch.compile(net, backend=backend, fullgraph=True, dynamic=False)(torch.randn(2, 3, 24, 24))
    assert targets == [[conv3x3]]


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)            # 3 input channels: too few to gain
        self.body = nn.Conv2d(16, 16, 3, padding=1)           # taken
        self.down = nn.Conv2d(16, 32, 3, stride=2, padding=1)  # stride 2: not taken
        self.grouped = nn.Conv2d(32, 32, 3, padding=1, groups=2)
        self.point = nn.Conv2d(32, 32, 1)
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        x = torch.relu(self.body(torch.relu(self.stem(x))))
        x = self.point(self.grouped(self.down(x)))
        return self.head(x.mean((2, 3)))


def _counting_backend():
    """A torch.compile backend that runs the Winograd rewrite and records how many convolutions it replaced."""
    counts = []

    def backend(gm, example_inputs):
        counts.append(rewrite(gm))
        return gm.forward

    return counts, backend


def _targets_backend():
    """A torch.compile backend that runs the Winograd rewrite and records the function put in for each conv."""
    targets = []

    def backend(gm, example_inputs):
        rewrite(gm)
        targets.append([n.target for n in gm.graph.nodes if n.target in (conv3x3, conv3x3_f4)])
        return gm.forward

    return targets, backend


class _Sized(_Net):
    def forward(self, x):  # a code object of its own: its two sizes below leave _Net's graphs static
        return super().forward(x)


def test_rewrite_takes_only_3x3_stride_1_convolutions_with_enough_channels_and_tiles():
    torch.manual_seed(0)
    net = _Sized().eval()
    counts, backend = _counting_backend()
    with torch.no_grad():
        x = torch.randn(2, 3, 16, 16)
        out = torch.compile(net, backend=backend, fullgraph=True, dynamic=False)(x)
        torch.testing.assert_close(out, net(x), rtol=1e-4, atol=1e-5)
        torch._dynamo.reset()
        torch.compile(net, backend=backend, fullgraph=True, dynamic=False)(torch.randn(1, 3, 8, 8))
    assert counts == [1, 0]   # 16 x 16: `body` only; 8 x 8 at batch 1: 4 tiles of 4 x 4, 16 of 2 x 2, too few


class _Wide(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


@pytest.mark.parametrize("channels,size,batch,expected", [(16, 16, 1, "f4"),    # 4 x 4 tiles of 4 x 4: F(4x4)
                                                          (20, 16, 1, "f2"),    # 20 channels: not multiples of 8
                                                          (16, 8, 1, None),     # 2 x 2 tiles of 4 x 4, 16 of 2 x 2
                                                          (16, 8, 2, "f4")])    # 8 tiles of 4 x 4 in the call
def test_rewrite_puts_f4_where_its_kernel_pays_else_f2(channels, size, batch, expected):
    assert winograd.f4_unavailable() is None
    torch.manual_seed(0)
    net = _Wide(channels).eval()
    targets, backend = _targets_backend()
    x = torch.randn(batch, channels, size, size)
    with torch.no_grad():
        out = torch.compile(net, backend=backend, fullgraph=True, dynamic=False)(x)
        torch.testing.assert_close(out, net(x), rtol=1e-4, atol=1e-4)
    assert targets == [{"f4": [conv3x3_f4], "f2": [conv3x3], None: []}[expected]]


class _Block(nn.Module):
    """resnet's BasicBlock: conv, batch norm, ReLU; conv, batch norm, + the input (or its 1 x 1 downsample, traced
    after the convolutions), ReLU."""

    def __init__(self, c_in, c, downsample):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c_in, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.down = nn.Conv2d(c_in, c, 1) if downsample else None
        for bn in (self.bn1, self.bn2):  # statistics far from the defaults, so that folding them shows
            bn.running_mean.uniform_(-0.5, 0.5), bn.running_var.uniform_(0.5, 2.0)
            bn.weight.data.uniform_(0.5, 1.5), bn.bias.data.uniform_(-0.2, 0.2)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)), inplace=True)
        out = self.bn2(self.conv2(out))
        out += self.down(x) if self.down is not None else x
        return torch.relu(out)


# exported: the same block as torch.export records it (aten ops: the predictor's graphs)
@pytest.mark.parametrize("downsample,exported", [(False, False), (True, False), (False, True), (True, True)])
def test_rewrite_runs_batch_norm_residual_add_and_relu_inside_the_f4_kernel(downsample, exported):
    assert winograd.f4_unavailable() is None
    torch.manual_seed(0)
    net = _Block(16 if downsample else 32, 32, downsample).eval()
    x = torch.randn(2, 16 if downsample else 32, 16, 16)
    nodes = rewritten_nodes(net, x, exported)
    f4 = [n for n in nodes if n.target is conv3x3_f4]
    conv2d = torch.ops.aten.conv2d.default if exported else torch.conv2d
    assert [n.target for n in nodes if n not in f4] == ([conv2d] if downsample else [])  # nothing else left
    first, second = f4
    assert first.args[4:6] == (None, True) and first.args[6] is not None       # batch norm and ReLU
    assert second.args[5] is True and second.args[6] is not None               # batch norm, the add, ReLU
    down = [n for n in nodes if n.target is conv2d]
    assert second.args[4] is (down[0] if downsample else first.args[0])         # the block's input, or its 1 x 1


class _Unfused(nn.Module):
    """What the kernel must not take: a conv whose output has two users, a batch norm on batch statistics, an
    add that broadcasts."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = (nn.Conv2d(16, 16, 3, padding=1) for _ in range(3))
        self.bn = nn.BatchNorm2d(16)
        self.shift = nn.Parameter(torch.randn(16, 1, 1))

    def forward(self, x):
        y = self.a(x)
        y = torch.relu(y) + y
        y = F.batch_norm(self.b(y), None, None, training=True)
        return torch.relu(self.c(y) + self.shift)


def test_rewrite_leaves_outside_the_kernel_what_it_cannot_fold():
    assert winograd.f4_unavailable() is None
    torch.manual_seed(0)
    nodes = rewritten_nodes(_Unfused().eval(), torch.randn(2, 16, 16, 16))
    f4 = [n for n in nodes if n.target is conv3x3_f4]
    assert len(f4) == 3 and all(n.args[4:] in ((), (None, False, None)) for n in f4)
    assert sum(n.target in (torch.relu, F.relu) for n in nodes) == 2 and any(n.target is F.batch_norm for n in nodes)


class _AddsIntoItsInput(nn.Module):
    """``x += bn(conv(x))``: the add writes x, which is read again afterwards through another name."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)

    def forward(self, x):
        x = x * 1.0  # a tensor of the graph's own, not its input
        skip = x
        x += self.bn(self.conv(x))
        return torch.relu(x) + skip  # skip is x after the add


def test_rewrite_leaves_an_add_that_writes_the_residual_outside_the_kernel():
    assert winograd.f4_unavailable() is None
    torch.manual_seed(0)
    nodes = rewritten_nodes(_AddsIntoItsInput().eval(), torch.randn(2, 16, 16, 16))
    (f4,) = [n for n in nodes if n.target is conv3x3_f4]
    assert f4.args[4:6] == (None, False) and f4.args[6] is not None  # the batch norm folded, the add not taken
    assert any(n.target is operator.iadd for n in nodes)


def test_the_f4_kernel_refuses_a_residual_of_another_shape_by_name():
    assert winograd.f4_unavailable() is None
    x, w = torch.randn(1, 16, 8, 8), torch.randn(16, 16, 3, 3)
    with pytest.raises(RuntimeError, match=r"residual must be a float32 tensor of the output's shape \[1, 16, 8, 8\]"):
        conv3x3_f4(x, w, None, 1, residual=torch.randn(1, 16, 4, 4))
    got = conv3x3_f4(x, w, None, 1, residual=torch.ones(1, 16, 8, 8), relu=True)
    torch.testing.assert_close(got, torch.relu(F.conv2d(x, w, padding=1) + 1), rtol=1e-4, atol=1e-3)


def test_to_static_times_the_winograd_candidate_and_keeps_results_right():
    torch.manual_seed(0)
    net = _Net().eval()
    ref_net = _Net().eval()
    ref_net.load_state_dict(net.state_dict())
    sampan.jit.to_static(net, input_spec=[sampan.InputSpec([None, 3, 16, 16])], winograd=True)
    x = torch.randn(4, 3, 16, 16)
    with torch.no_grad():
        net(x)
        out = net(x)                      # the second call of a shape chooses among eager, compiled and Winograd
        again = net(x)
        ref = ref_net(x)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(again, ref, rtol=1e-4, atol=1e-4)
    (choice,) = net.forward.choices.values()
    assert choice.winograd_seconds is not None and net.forward.winograd_note is None
    timed = [choice.compiled_seconds, choice.eager_seconds, choice.winograd_seconds, choice.onednn_off_seconds]
    kept = choice.winograd_seconds if choice.winograd else choice.onednn_off_seconds if choice.onednn_off else (
        choice.eager_seconds if choice.path == "eager" else choice.compiled_seconds)
    assert kept == min(t for t in timed if t is not None)  # eager with oneDNN off is a candidate too
    assert "Winograd" in str(choice) and "Winograd" in str(sampan.jit.explain(net, x))


def test_without_a_convolution_it_takes_the_note_says_why():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 2)).eval()
    sampan.jit.to_static(net, input_spec=[sampan.InputSpec([None, 3, 8, 8])], winograd=True)
    with torch.no_grad():
        net(torch.randn(2, 3, 8, 8))
        net(torch.randn(2, 3, 8, 8))
    (choice,) = net.forward.choices.values()
    assert choice.winograd_seconds is None and not choice.winograd
    assert "no 3x3 stride-1 convolution" in net.forward.winograd_note


def test_a_dynamic_height_and_width_still_get_winograd():
    torch.manual_seed(0)
    net = _Net().eval()
    counts, backend = _counting_backend()
    x = torch.randn(1, 3, 18, 20)
    torch._dynamo.mark_dynamic(x, [2, 3])
    with torch.no_grad():
        out = torch.compile(net, backend=backend, fullgraph=True)(x)
        torch.testing.assert_close(out, net(x), rtol=1e-4, atol=1e-5)
    assert counts == [1]


@pytest.mark.parametrize("options", [{"backend": "aot_eager"}, {"freezing": False}, {"pick_faster": False}])
def test_winograd_without_what_it_needs_is_refused_by_name(options):
    with pytest.raises(ValueError, match=r"Expected `winograd`.*Received: winograd=True.*HINT: .*backend='inductor'"):
        sampan.jit.to_static(_Net().eval(), winograd=True, **options)


class _Heavy(nn.Module):
    """Two 64-channel 3 x 3 convolutions on 32 x 32 maps: 2 x 75 MFLOP per image, F(4x4) takes both."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 64, 3, padding=1)   # 3 input channels: never Winograd
        self.a, self.b = nn.Conv2d(64, 64, 3, padding=1), nn.Conv2d(64, 64, 3, padding=1)
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        return self.head(torch.relu(self.b(torch.relu(self.a(x)))).mean((2, 3)))


def _cpu(monkeypatch, capability):
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)


def test_auto_is_for_avx2_only_cpus(monkeypatch):
    _cpu(monkeypatch, "AVX2")
    assert winograd.auto_unavailable() is None
    _cpu(monkeypatch, "AVX512")
    reason = winograd.auto_unavailable()
    assert "AVX512" in reason and "to_static times F(4x4) beside it" in reason


def test_auto_rewrite_takes_f4_convolutions_only_when_they_are_heavy_enough():
    assert winograd.f4_unavailable() is None
    torch.manual_seed(0)
    net = _Heavy().eval()
    flops, counts = [], []

    def backend(gm, example_inputs):
        flops.append(winograd.f4_flops(gm))
        counts.append(winograd.auto_rewrite(gm))
        return gm.forward

    with torch.no_grad():
        for batch in (1, 2):  # 150 MFLOP at batch 1: under AUTO_MIN_FLOPS; 300 at batch 2: over
            x = torch.randn(batch, 3, 32, 32)
            torch._dynamo.reset()
            out = torch.compile(net, backend=backend, fullgraph=True, dynamic=False)(x)
            torch.testing.assert_close(out, net(x), rtol=1e-4, atol=1e-4)
        torch._dynamo.reset()
        torch.compile(_Wide(20).eval(), backend=backend, fullgraph=True, dynamic=False)(torch.randn(2, 20, 12, 12))
    per_image = 2 * (2 * 64 * 64 * 9 * 32 * 32)
    assert flops == [per_image, 2 * per_image, 0.0]   # 20 channels: F(2x2) only, which "auto" never uses
    assert counts == [0, 2, 0]
    assert per_image < winograd.AUTO_MIN_FLOPS <= 2 * per_image


def test_to_static_auto_compiles_once_with_f4_on_avx2_and_times_an_f4_variant_on_avx512(monkeypatch):
    x = torch.randn(4, 3, 32, 32)
    results = {}
    for capability in ("AVX2", "AVX512"):
        _cpu(monkeypatch, capability)
        torch.manual_seed(0)
        net = _Heavy().eval()
        ref = net(x).detach()
        sampan.jit.to_static(net, input_spec=[sampan.InputSpec([None, 3, 32, 32])])  # winograd="auto"
        with torch.no_grad():
            net(x)
            out = net(x)
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
        fn = net.forward
        (choice,) = fn.choices.values()
        results[capability] = (fn, choice)
    # AVX2: the one frozen graph takes both 64-channel convolutions by F(4x4), kept when compiled beats eager
    fn, choice = results["AVX2"]
    assert choice.winograd_seconds is None and "winograd" not in fn._compiled  # one frozen graph, no variant
    assert fn._frozen_backend.rewritten == 2 and choice.winograd == (choice.path == "compiled")
    assert ("compiled, Winograd convolutions" in str(choice)) == choice.winograd
    # AVX-512: the plain frozen graph (probed: 4 images of F(4x4) work, over AUTO_MIN_FLOPS) and an F(4x4)
    # variant, timed side by side with eager; the fastest is kept
    fn, choice = results["AVX512"]
    assert fn._frozen_backend.rewritten == 0 and fn._frozen_backend.probed >= winograd.AUTO_MIN_FLOPS
    assert fn._winograd_backend.rewritten == 2 and choice.winograd_seconds > 0
    times = {"winograd": choice.winograd_seconds, "compiled": choice.compiled_seconds, "eager": choice.eager_seconds}
    if choice.onednn_off_seconds is not None:
        times["eager, oneDNN off"] = choice.onednn_off_seconds
    assert choice.kept == {"winograd": "compiled, Winograd convolutions", "compiled": "compiled", "eager": "eager",
                           "eager, oneDNN off": "eager, oneDNN off"}[min(times, key=times.get)]


def test_to_static_auto_times_no_f4_variant_for_light_convolutions_on_avx512(monkeypatch):
    _cpu(monkeypatch, "AVX512")
    torch.manual_seed(0)
    net = _Heavy().eval()
    sampan.jit.to_static(net)
    with torch.no_grad():
        net(torch.randn(1, 3, 32, 32))  # 150 MFLOP of F(4x4) work at batch 1: under AUTO_MIN_FLOPS
        net(torch.randn(1, 3, 32, 32))
    (choice,) = net.forward.choices.values()
    assert choice.winograd_seconds is None and "winograd" not in net.forward._compiled


def test_winograd_takes_only_true_false_or_auto():
    with pytest.raises(ValueError, match=r"Expected `winograd` to be True, False or 'auto'.*Received: winograd='yes'"):
        sampan.jit.to_static(_Net().eval(), winograd="yes")
