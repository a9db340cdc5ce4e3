"""The bf16x3 AMX convolution (sampan.jit.amx): float32 results within a few 1e-6 of float64 from three bf16 products,
put by the Winograd rewrite where Winograd does not go, with what follows fused; and, on a CPU without AMX, the
reason why, the convolutions left as they were."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import sampan.jit.amx as amx
from jit_helpers import rewritten_nodes
from sampan.jit.winograd import conv3x3_f4


def _needs_amx():
    reason = amx.cpu_unavailable()
    if reason is not None:  # an AMD EPYC or an older Xeon: what the kernel does is tested where it runs
        pytest.skip(f"needs AMX: {reason}")
    assert amx.unavailable() is None  # a CPU with AMX: the kernel must build and load (a failed build fails here)


# (batch, in, out, size, kernel, stride, padding): resnet18's kinds (3x3 stride 1 and 2, 1x1 stride 2, the 7x7 stem),
# output channels that fill an odd number of 16-channel panels (48, 80), an empty batch, padding larger than 1.
# Stride 1 with inputs in multiples of 32 reads its rows straight from the input (each image's rows on a grid as wide
# as the padded input: 5 images of 7 x 9 rows, 3 x 63 rows past one block of 64; a 1 x 1; a map of 27 x 29 rows);
# the others copy them (im2col: 5 x 7 x 7 = 245 rows, three blocks of 64 and a part)
SHAPES = [(1, 512, 512, 7, 3, 1, 1), (5, 64, 48, 7, 3, 1, 1), (2, 16, 80, 9, 3, 2, 1), (1, 32, 64, 14, 1, 2, 0),
          (2, 3, 16, 20, 7, 2, 3), (1, 24, 32, 6, 3, 1, 0), (1, 256, 16, 3, 3, 2, 2), (0, 16, 16, 5, 3, 1, 1),
          (5, 24, 32, 7, 3, 1, 1), (3, 64, 16, 7, 1, 1, 0), (2, 32, 32, 25, 3, 1, 2), (1, 96, 32, 4, 3, 1, 0)]


@pytest.mark.parametrize("threads", [1, 2])  # with 2, a batch-1 call shares its output channels between them
@pytest.mark.parametrize("shape", SHAPES, ids=[str(s) for s in SHAPES])
def test_the_amx_kernel_computes_float32_convolutions_to_a_few_1e_6(shape, threads):
    _needs_amx()
    n, c, k, size, kernel, stride, padding = shape
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, c, size, size, generator=g)
    w = torch.randn(k, c, kernel, kernel, generator=g) / (c * kernel * kernel) ** 0.5
    b = torch.randn(k, generator=g)
    exact = F.conv2d(x.double(), w.double(), b.double(), stride=stride, padding=padding)
    residual = torch.randn(exact.shape, generator=g)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        plain = amx.conv2d_bf16x3(x, w, b, stride, padding)
        fused = amx.conv2d_bf16x3(x, w, None, stride, padding, residual=residual, relu=True)
    finally:
        torch.set_num_threads(before)
    assert plain.shape == exact.shape and plain.dtype == torch.float32
    assert plain.is_contiguous(memory_format=torch.channels_last)
    scale = max([1.0, *exact.abs().flatten().tolist()])
    # bf16 alone is off by about 2e-3 of the scale; three products by a few 1e-6 (float32's direct: 1e-6 to 2e-6)
    assert _worst(plain, exact) <= 2e-5 * scale
    assert _worst(fused, torch.relu(exact - b.double().reshape(1, -1, 1, 1) + residual.double())) <= 2e-5 * scale


def _worst(got, expected):
    return max([0.0, *(got.double() - expected).abs().flatten().tolist()])


def test_a_batch_norm_is_folded_into_the_amx_kernels_weights():
    _needs_amx()
    g = torch.Generator().manual_seed(1)
    x, w = torch.randn(2, 32, 8, 8, generator=g), torch.randn(64, 32, 3, 3, generator=g) / 17
    bn = nn.BatchNorm2d(64).eval()
    bn.running_mean.uniform_(-0.5, 0.5, generator=g), bn.running_var.uniform_(0.5, 2.0, generator=g)
    stats = (bn.running_mean, bn.running_var, bn.weight, bn.bias, bn.eps)
    got = amx.conv2d_bf16x3(x, w, None, 2, 1, bn=stats)
    with torch.no_grad():
        ref = bn(F.conv2d(x, w, stride=2, padding=1))
    torch.testing.assert_close(got, ref, rtol=0, atol=2e-5 * float(ref.abs().max()))


def test_the_amx_kernel_refuses_what_it_cannot_take_by_name():
    _needs_amx()
    op = torch.ops.sampan_amx.conv2d_bf16x3
    x, w = torch.randn(1, 16, 8, 8), torch.randn(32, 16, 3, 3)
    with pytest.raises(ValueError, match=r"multiple of 16.*\(20, 16, 3, 3\).*HINT: use F.conv2d"):
        amx.conv2d_bf16x3(x, torch.randn(20, 16, 3, 3), None, 1, 1)
    with pytest.raises(RuntimeError, match=r"the packed weights .* are not pack_bf16x3's for 32 outputs of 16x5x5"):
        op(x, amx.pack_weights(w), 32, 5, 5, 1, 1, None, None, False)
    with pytest.raises(RuntimeError, match=r"the residual \[1, 32, 4, 4\] is not the output's \[1, 32, 8, 8\]"):
        op(x, amx.pack_weights(w), 32, 3, 3, 1, 1, None, torch.randn(1, 32, 4, 4), False)
    with pytest.raises(RuntimeError, match="expected a float32 CPU input"):
        op(x.double(), amx.pack_weights(w), 32, 3, 3, 1, 1, None, None, False)
    with pytest.raises(RuntimeError, match="expected float32 CPU weights"):
        amx.pack_weights(w.double())


class _Block(nn.Module):
    """resnet's downsampling BasicBlock: a stride-2 conv (AMX), batch norm, ReLU; a 3x3 conv (Winograd F(4x4) on a
    16 x 16 map), batch norm; + the 1 x 1 stride-2 downsample of the input (AMX), ReLU."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32)
        self.conv2, self.bn2 = nn.Conv2d(32, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32)
        self.down = nn.Sequential(nn.Conv2d(16, 32, 1, stride=2, bias=False), nn.BatchNorm2d(32))
        for bn in (self.bn1, self.bn2, self.down[1]):  # statistics far from the defaults, so that folding them shows
            bn.running_mean.uniform_(-0.5, 0.5), bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.down(x))


@pytest.mark.parametrize("exported", [False, True])  # exported: aten ops, as in the predictor's graphs
def test_the_rewrite_gives_amx_what_winograd_leaves_with_batch_norm_add_and_relu_inside(exported):
    _needs_amx()
    torch.manual_seed(0)
    net = _Block().eval()
    nodes = rewritten_nodes(net, torch.randn(2, 16, 32, 32), exported, tolerance=2e-5, only_f4=True, amx=True)
    by_amx = [n for n in nodes if n.target is amx.conv2d_bf16x3]
    assert [n.target for n in nodes] == [amx.conv2d_bf16x3, amx.conv2d_bf16x3, conv3x3_f4]  # nothing else left
    first, down = by_amx
    f4 = next(n for n in nodes if n.target is conv3x3_f4)
    assert first.args[3:7] == (2, 1, None, True) and first.args[7] is not None  # stride, padding; batch norm, ReLU
    assert down.args[3:7] == (2, 0, None, False) and down.args[7] is not None   # its batch norm folded
    assert f4.args[4] is down and f4.args[5] is True                            # the add and ReLU in F(4x4)'s pass


def test_at_batch_1_the_amx_kernel_takes_what_f4_would_too():
    # one image: each convolution is bound by reading its weights, and F(4x4) reads 4x the direct convolution's
    _needs_amx()
    torch.manual_seed(0)
    nodes = rewritten_nodes(_Block().eval(), torch.randn(1, 16, 32, 32), True, tolerance=2e-5, only_f4=True, amx=True)
    assert [n.target for n in nodes] == [amx.conv2d_bf16x3] * 3
    assert nodes[2].args[3:5] == (1, 1) and nodes[2].args[5] is nodes[1] and nodes[2].args[6] is True  # add, ReLU


def test_without_amx_the_reason_is_given_and_the_convolutions_are_left_alone(tmp_path):
    # torch told to use AVX2 (as on an AMD EPYC Zen 3): no AMX, whatever this CPU has
    script = textwrap.dedent("""
        import torch
        from torch import nn
        import sampan.jit.amx as amx
        from sampan.jit.winograd import rewrite
        print("REASON", amx.unavailable())
        net = nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.Conv2d(32, 32, 1)).eval()
        seen = []
        def backend(gm, example_inputs):
            seen.append(rewrite(gm, only_f4=True, amx=True))
            return gm.forward
        with torch.no_grad():
            torch.compile(net, backend=backend, fullgraph=True)(torch.randn(1, 16, 16, 16))
        print("REWRITTEN", seen)
        try:
            amx.conv2d_bf16x3(torch.randn(1, 16, 8, 8), torch.randn(16, 16, 3, 3), None, 1, 1)
        except RuntimeError as exc:
            print("ERROR", exc)
    """)
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if line.split(" ", 1)[0].isupper())
    assert lines["REASON"] == "torch runs this CPU's vector instructions at AVX2, and the AMX kernel needs AVX512"
    assert lines["REWRITTEN"] == "[0]"
    assert lines["ERROR"] == ("the bf16x3 AMX convolution cannot run here: torch runs this CPU's vector instructions "
                              "at AVX2, and the AMX kernel needs AVX512. HINT: use F.conv2d.")


def test_to_statics_winograd_variant_takes_the_amx_convolutions_too():
    _needs_amx()
    import copy

    import sampan

    torch.manual_seed(0)
    net = _Block().eval()
    ref = copy.deepcopy(net)
    sampan.jit.to_static(net, input_spec=[sampan.InputSpec([None, 16, 32, 32])], winograd=True)
    x = torch.randn(2, 16, 32, 32)
    with torch.no_grad():
        net(x)
        out = net(x)  # the second call of a shape times eager, compiled and the variant, and keeps the fastest
        expected = ref(x)
    torch.testing.assert_close(out, expected, rtol=0, atol=2e-5 * float(expected.abs().max()))
    fn = net.forward
    assert fn.winograd_note is None and fn._winograd_backend.rewritten == 3  # conv1 and down by AMX, conv2 F(4x4)
    (choice,) = fn.choices.values()
    assert choice.winograd_seconds > 0


def test_outputs_are_not_finite_exactly_where_float32s_are_not():
    _needs_amx()
    x = torch.rand(1, 20, 6, 6)  # a row of 6 x 20 values: seven 16-wide vectors and a tail of 8 where it is split
    x[0, 3, 2, 2], x[0, 5, 4, 1] = float("inf"), float("nan")
    x[0, :, 0, 5] = -float("inf")  # the row's last pixel: values 100-119, in a vector and in the tail
    w = torch.rand(32, 20, 3, 3)
    got, want = amx.conv2d_bf16x3(x, w, None, 1, 1), F.conv2d(x, w, padding=1)
    finite = torch.isfinite(want)
    # an infinity becomes NaN here (inf times a weight's low half of 0), as in Winograd's transforms: documented
    assert torch.equal(torch.isfinite(got), finite) and not finite.all() and finite.any()
    torch.testing.assert_close(got[finite], want[finite], rtol=1e-4, atol=1e-4)
