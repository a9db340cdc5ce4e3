"""Winograd convolution for ``to_static``'s frozen inference graphs: fewer multiplications per 3 x 3 conv.

A 3 x 3 convolution with stride 1 computes each 2 x 2 block of outputs from a 4 x 4 block of inputs.
Winograd's minimal filtering algorithm F(2 x 2, 3 x 3) (Lavin & Gray, "Fast Algorithms for Convolutional
Neural Networks", 2016) does it with 16 multiplications per input channel instead of 36, 2.25x fewer:

* the weights are transformed once, ``U = G g G^T`` (4 x 4 per filter; constant-folded by inductor's
  freezing),
* each 4 x 4 input tile is transformed, ``V = B^T d B`` (additions only),
* the 16 positions become 16 matrix products ``M[i] = U[i] @ V[i]`` (one batched GEMM, most of the work),
* each output tile is ``A^T M A`` (additions only).

On a CPU whose direct convolution already runs near the FMA units' peak (oneDNN's AVX2 kernels reach 80-90 %
of it), fewer multiplications is the one way left to be faster; the extra additions and memory traffic of the
transforms make it a trade, so ``to_static`` measures it against the direct convolution and keeps the faster.
Results differ from the direct convolution by float rounding only (the transforms' constants are 0, 1/2, 1).

**F(4 x 4, 3 x 3)** (:func:`conv3x3_f4`): 6 x 6 input tiles give 4 x 4 outputs, 36 multiplications per 16 outputs,
4x fewer than the direct convolution. Its tile transforms, written for inductor like F(2 x 2)'s, make a kernel of
thousands of lines per convolution that took 9 minutes to compile for resnet18, so they run in a small C++ kernel
instead (``winograd_f4.cpp``, built once per machine by ``torch.utils.cpp_extension`` on the first use, 10-30
s; eight channels at a time, AVX2). The 36 matrix products run there too, in a register-blocked AVX2 micro-kernel
on weights packed in panels of 8 output channels: 1.2-1.45x faster than ``torch.bmm`` (MKL) at these thin shapes
on an AMD EPYC Zen 4, resnet18 at batch 1 27.9 -> 24.1 ms. On AVX-512 CPUs the panels are 16 channels wide and an
AVX-512 micro-kernel takes them (:func:`f4_panel`): on an Intel Xeon with two 512-bit FMA units resnet18's F(4 x 4)
convolutions ran 1.2-1.4x faster so, resnet18 at batch 32 670 -> 537 ms. There, at batch 1, the weights come from
memory, and fetching the next panels into L2 while multiplying these took resnet18 from 21.8 to 20.4 ms.
:func:`rewrite` also moves what follows such a convolution into its call: an eval-mode batch norm (folded into the
weights), a residual add and a ReLU, so the output is written once. It needs a C++ compiler and an AVX2 CPU;
where either is missing, or the build fails, :func:`f4_unavailable` says why and :func:`rewrite` uses
F(2 x 2, 3 x 3) everywhere. Its rounding error is larger (about 3e-5 of the outputs' scale
per convolution, against 1e-6), still far inside ``to_static``'s check against eager.

**On its own** (``to_static(winograd="auto")``, the default): on a CPU whose widest vectors are AVX2
(:func:`auto_unavailable` says why not elsewhere), F(4 x 4, 3 x 3) replaces
the convolutions it takes when they carry at least ``AUTO_MIN_FLOPS`` of work per call (:func:`f4_flops`):
resnet18 at 224 x 224 has 2.3 GFLOP of them, the course's small networks none. Only F(4 x 4) is used so, never
F(2 x 2), whose gain was smaller and less sure. On AVX-512 CPUs oneDNN's direct convolutions are faster and the
gain varied (resnet18 at batch 1 on AMD EPYC Zen 4 instances: 1.79x eager with Winograd against 1.71x without on
one, 1.76x against 1.35x on another), so ``to_static`` there compiles the F(4 x 4) graph as a second candidate and
keeps it only when it is timed faster. The predictor times its F(4 x 4) candidate beside the others on either
kind of CPU (:mod:`sampan.inference.winograd`); on CPUs with AMX its graph gives the convolutions left to
:mod:`sampan.jit.amx` (``rewrite(..., amx=True)``).
"""
from __future__ import annotations

import operator
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.fx.operator_schemas import normalize_function
from torch.nn.utils.fusion import fuse_conv_bn_weights

MIN_CHANNELS = 16  # below this, the transforms cost more than the multiplications they save
# Fewer output tiles per image than this (resnet18's 7 x 7 maps: 16 tiles): the GEMMs get too thin to use the
# FMA units, and the transformed weights (16 x c x k, 1.8x the 3 x 3 ones) are read from memory for little work
MIN_TILES = 32
# F(4 x 4, 3 x 3) takes calls of at least this many 4 x 4 output tiles (batch x tiles per map) whose channels come in
# multiples of 8 (the kernel's vector width); others get F(2 x 2). Each tile is a row of the 36 matrix products,
# and with fewer rows they are bound by reading the transformed weights (36 x c x k floats, 4x the direct
# convolution's): resnet18's 7 x 7 maps (4 tiles) at batch 1 ran 1.1x the direct convolution's time with 512
# channels, at batch 2 (8 tiles) 0.83x, at batch 32 0.56x (AMD EPYC Zen 4, one thread)
MIN_TILES_F4 = 8
# "auto" rewrites a graph only when its F(4 x 4) convolutions carry this much work per call (multiply-adds x 2):
# enough that the kernel's build (once per machine) and a slower first call pay back soon
AUTO_MIN_FLOPS = 2e8
_F4_SOURCE = Path(__file__).with_name("winograd_f4.cpp")
_F4_NAME = "sampan_winograd_f4_v9"  # torch's extension cache rebuilds it when the source changes
# G of F(4 x 4, 3 x 3) (Lavin & Gray): the filter transform U = G g G^T, [6 x 3]
_G4 = ((1 / 4, 0.0, 0.0), (-1 / 6, -1 / 6, -1 / 6), (-1 / 6, 1 / 6, -1 / 6), (1 / 24, 1 / 12, 1 / 6),
       (1 / 24, -1 / 12, 1 / 6), (0.0, 0.0, 1.0))


def conv3x3(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, padding: int) -> torch.Tensor:
    """``F.conv2d(x, weight, bias, stride=1, padding=padding)`` for a 3 x 3 ``weight``, by Winograd F(2 x 2, 3 x 3).

    Example:
        >>> import torch
        >>> import torch.nn.functional as F
        >>> from sampan.jit.winograd import conv3x3
        >>> x, w, b = torch.randn(2, 16, 9, 7), torch.randn(32, 16, 3, 3), torch.randn(32)
        >>> torch.allclose(conv3x3(x, w, b, 1), F.conv2d(x, w, b, padding=1), atol=1e-4)
        True
    """
    n, c, h, w = x.shape
    k = weight.shape[0]
    ho, wo, th, tw = _grid(h, w, padding)
    # pad so that th x tw tiles of 4 x 4 (overlapping by 2) cover the input
    xp = F.pad(x, (padding, 2 * tw + 2 - w - padding, padding, 2 * th + 2 - h - padding))
    # channels last in every step (the transforms then run along contiguous channels):
    # tiles [16, n*th*tw, c] @ weights [16, c, k] -> [16, n*th*tw, k]
    u = _weights(weight).permute(0, 1, 3, 2).reshape(16, c, k)
    v = _tiles(xp, th, tw).permute(0, 1, 3, 4, 2).reshape(16, n * th * tw, c)
    m = torch.bmm(v, u).reshape(4, 4, n, th, tw, k)
    y = _outputs(m)                                                   # [2, 2, n, th, tw, k]
    y = y.permute(2, 5, 3, 0, 4, 1).reshape(n, k, 2 * th, 2 * tw)[:, :, :ho, :wo]
    return y if bias is None else y + bias.reshape(1, k, 1, 1)


def f4_unavailable() -> str | None:
    """Why Winograd F(4 x 4, 3 x 3) cannot run here, or None once its C++ kernel is built and loaded.

    The first call builds it (10-30 s; torch's extension cache, ``$TORCH_EXTENSIONS_DIR``, keeps the
    build for later processes) and the answer is kept for the process.
    """
    from sampan.utils import cpp_kernels

    return cpp_kernels.load(_F4_NAME, _F4_SOURCE, "sampan_winograd::conv3x3_f4", "the F(4x4) kernel", _f4_shape)


def f4_failed() -> str | None:
    """Why the F(4 x 4) kernel failed to load in this process; None when it loaded or was not tried yet (unlike
    :func:`f4_unavailable`, this builds nothing)."""
    from sampan.utils import cpp_kernels

    return cpp_kernels.failure(_F4_NAME)


def auto_unavailable() -> str | None:
    """Why ``winograd="auto"`` does not put F(4 x 4, 3 x 3) into the one frozen graph on this CPU, or None where
    it does (CPUs whose widest vectors are AVX2, such as the AMD EPYC Zen 2 / 3). On AVX-512 ``to_static`` times
    an F(4 x 4) graph beside the plain one instead."""
    capability = torch.backends.cpu.get_cpu_capability()
    if capability != "AVX2":
        return (f"this CPU's vector instructions are {capability}, where the direct convolution is sometimes "
                f"faster: to_static times F(4x4) beside it")
    return None


def f4_flops(gm: torch.fx.GraphModule, batch: int | None = None) -> float:
    """The work (2 x multiply-adds) of the convolutions in ``gm`` that F(4 x 4, 3 x 3) would take, per call at
    the traced sizes (or at ``batch``); 0 where none (the kernel is built, once per machine, only if some
    convolution fits)."""
    total = 0.0
    for node in gm.graph.nodes:
        out = _meta(node)
        if out is None or _eligible(node, only_f4=True, batch=batch) is None:
            continue
        k, c = _meta(node.args[1]).shape[:2]
        n, _, ho, wo = (_hint(d) for d in out.shape)
        n = batch or n
        if None not in (n, ho, wo):
            total += 2.0 * n * k * c * 9 * ho * wo
    return total


def auto_rewrite(gm: torch.fx.GraphModule, amx: bool = False) -> int:
    """:func:`rewrite` for ``winograd="auto"``: F(4 x 4, 3 x 3) only (and, with ``amx``, the AMX kernel for the
    convolutions left), and only when :func:`f4_flops` reaches ``AUTO_MIN_FLOPS``; returns how many convolutions it
    replaced."""
    return rewrite(gm, only_f4=True, amx=amx) if f4_flops(gm) >= AUTO_MIN_FLOPS else 0


def _f4_shape(x, u, bias, pad, residual=None, relu=False):
    """The output's shape and layout (channels last, as the kernel writes it), for tracing."""
    n, _, h, w = x.shape
    k = u.shape[1] * u.shape[3]
    return x.new_empty((n, k, h + 2 * pad - 2, w + 2 * pad - 2)).to(memory_format=torch.channels_last)


def conv3x3_f4(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, padding: int,
               residual: torch.Tensor | None = None, relu: bool = False, bn: tuple | None = None) -> torch.Tensor:
    """``F.conv2d(x, weight, bias, stride=1, padding=padding)`` for a 3 x 3 ``weight`` by Winograd F(4 x 4, 3 x 3)
    in the C++ kernel (float32, CPU, channels in multiples of 8); the result is in the channels-last layout.

    What a network does next can run in the same pass (:func:`rewrite` puts it there): an eval-mode batch norm
    ``bn = (running_mean, running_var, weight, bias, eps)`` folded into the weights and bias, then ``+ residual``
    (the output's shape), then a ReLU when ``relu``.

    Raises RuntimeError saying why when the kernel cannot run here (:func:`f4_unavailable`). Example:
        >>> import torch
        >>> import torch.nn.functional as F
        >>> from sampan.jit.winograd import conv3x3_f4
        >>> x, w = torch.randn(1, 16, 12, 12), torch.randn(32, 16, 3, 3)
        >>> torch.allclose(conv3x3_f4(x, w, None, 1), F.conv2d(x, w, padding=1), atol=1e-3)
        True
    """
    reason = f4_unavailable()
    if reason is not None:
        raise RuntimeError(f"Winograd F(4x4, 3x3) cannot run here: {reason}. HINT: use conv3x3 (F(2x2, 3x3)).")
    k, c = weight.shape[:2]
    if k % 8 or c % 8:
        raise ValueError(f"conv3x3_f4: channels must be multiples of 8 (the kernel's vector width), got weight of "
                         f"shape {tuple(weight.shape)}. HINT: use conv3x3 (F(2x2, 3x3)), which takes any channels.")
    if bn is not None:
        mean, var, gamma, beta, eps = bn
        weight, bias = fuse_conv_bn_weights(weight, bias, mean, var, eps, gamma, beta)
    # channels last, as the kernel reads them: in a compiled graph the producer (a max pool, say) then writes that
    # layout itself instead of a copy being made here (resnet18 at batch 1: 0.16 ms of copy gone, the max pool 0.08
    # ms faster)
    x = x.contiguous(memory_format=torch.channels_last)
    if residual is not None:
        residual = residual.contiguous(memory_format=torch.channels_last)
    # a frozen graph computes the transformed weights once, from the constant weights
    return torch.ops.sampan_winograd.conv3x3_f4(x, f4_weights(weight, f4_panel(k)),
                                                bias if bias is not None else weight.new_empty(0), padding,
                                                residual, relu)


def f4_weights(weight: torch.Tensor, panel: int) -> torch.Tensor:
    """``U = G g G^T`` of F(4 x 4, 3 x 3) for a [k, c, 3, 3] ``weight``, laid out as the kernel's matrix products
    read it: panels of ``panel`` (8 or 16, :func:`f4_panel`) output channels, ``[36, k / panel, c, panel]``."""
    k, c = weight.shape[:2]
    g = torch.tensor(_G4, dtype=weight.dtype, device=weight.device)
    u = torch.einsum("ai,kcij,bj->abck", g, weight, g).reshape(36, c, k // panel, panel)
    return u.permute(0, 2, 1, 3).contiguous()


def f4_panel(k: int) -> int:
    """How many output channels the F(4 x 4) kernel's matrix products take at a time for ``k`` of them: 16 (one
    AVX-512 register) on AVX-512 CPUs when ``k`` is a multiple of 16, else 8 (AVX2). On an Intel Xeon with two
    512-bit FMA units the 16-channel panels made resnet18's F(4 x 4) convolutions 1.2-1.4x faster at batch 1 and
    32; on AMD Zen 4, which splits 512-bit vectors in halves, they ran as fast as the 8-channel ones. The CPU itself
    must have AVX-512 too (the kernel checks it), not only torch's capability, which a test may set."""
    wide = torch.backends.cpu.get_cpu_capability() == "AVX512" and torch.cpu._is_avx512_supported()
    return 16 if k % 16 == 0 and wide else 8


def _grid(h, w, padding: int, m: int = 2) -> tuple:
    """The output size of a 3 x 3 stride-1 convolution and its tiles of m x m outputs: ``(ho, wo, th, tw)``."""
    ho, wo = h + 2 * padding - 2, w + 2 * padding - 2
    return ho, wo, -(-ho // m), -(-wo // m)


def _weights(g: torch.Tensor) -> torch.Tensor:
    """``G g G^T`` for every filter: [k, c, 3, 3] -> [4, 4, k, c]."""
    def rows(t0, t1, t2):  # G = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]]
        return t0, (t0 + t1 + t2) * 0.5, (t0 - t1 + t2) * 0.5, t2

    by_row = rows(*(g[:, :, i, :] for i in range(3)))              # 4 x [k, c, 3]
    return torch.stack([torch.stack(rows(*(r[:, :, j] for j in range(3)))) for r in by_row])


def _tiles(xp: torch.Tensor, th: int, tw: int) -> torch.Tensor:
    """``B^T d B`` for every 4 x 4 tile of the padded input: [n, c, 2th+2, 2tw+2] -> [16, n, c, th, tw]."""
    def rows(d0, d1, d2, d3):  # B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
        return d0 - d2, d1 + d2, d2 - d1, d1 - d3

    by_row = rows(*(xp[:, :, i:i + 2 * th:2, :] for i in range(4)))
    return torch.stack([t for r in by_row for t in rows(*(r[:, :, :, j:j + 2 * tw:2] for j in range(4)))])


def _outputs(m: torch.Tensor) -> torch.Tensor:
    """``A^T M A`` for every tile: [4, 4, ...] -> [2, 2, ...]."""
    def rows(m0, m1, m2, m3):  # A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]
        return m0 + m1 + m2, m1 - m2 - m3

    by_row = rows(*(m[i] for i in range(4)))
    return torch.stack([torch.stack(rows(*(r[j] for j in range(4)))) for r in by_row])


_CONV2D = (torch.conv2d, F.conv2d, torch.ops.aten.conv2d.default)  # the last: in a torch.export program


def _meta(node) -> torch.Tensor | None:
    """The example value of a graph node: Dynamo's ``example_value``, or ``val`` in a ``torch.export`` graph."""
    meta = getattr(node, "meta", {})
    value = meta.get("example_value", meta.get("val"))
    return value if isinstance(value, torch.Tensor) else None


def _eligible(node: torch.fx.Node, only_f4: bool = False, batch: int | None = None) -> tuple[int, int] | None:
    """``(padding, m)`` for a conv2d node that Winograd F(m x m, 3 x 3) can take (m = 4 where it pays and its
    kernel runs here, else 2; with ``only_f4``, None instead of 2), or None; at ``batch`` if given, else at the
    traced batch."""
    if node.op != "call_function" or node.target not in _CONV2D or node.kwargs:
        return None
    args = list(node.args) + [None] * (7 - len(node.args))
    x, weight, _bias, stride, padding, dilation, groups = args
    meta = [_meta(a) for a in (x, weight)]
    if any(not isinstance(t, torch.Tensor) for t in meta):
        return None
    xv, wv = meta
    pad = _pair(padding, 0)
    if (xv.dim() != 4 or xv.dtype != torch.float32 or tuple(wv.shape[2:]) != (3, 3)
            or _pair(stride, 1) != (1, 1) or _pair(dilation, 1) != (1, 1) or (groups or 1) != 1
            or pad is None or pad[0] != pad[1] or pad[0] > 2
            or min(wv.shape[0], wv.shape[1]) < MIN_CHANNELS):
        return None
    n, h, w = (_hint(size) for size in (batch or xv.shape[0], *xv.shape[2:]))
    if n is None or h is None or w is None:
        return None
    _, _, th, tw = _grid(h, w, pad[0], 4)
    # a dynamic batch counts at its traced size (2 in the predictor's graph for larger batches)
    if n * th * tw >= MIN_TILES_F4 and wv.shape[0] % 8 == 0 and wv.shape[1] % 8 == 0 and f4_unavailable() is None:
        return pad[0], 4
    _, _, th, tw = _grid(h, w, pad[0], 2)
    return (pad[0], 2) if th * tw >= MIN_TILES and not only_f4 else None


def _hint(size) -> int | None:
    """A size as an int; for a dynamic (symbolic) size, the value it had when traced, without adding a guard."""
    if isinstance(size, int):
        return size
    return getattr(getattr(size, "node", None), "hint", None)


def _pair(value, default) -> tuple | None:
    if value is None:
        return (default, default)
    if isinstance(value, int):
        return (value, value)
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return tuple(value)
    return None  # "same" / "valid" strings, symbolic sizes: left to the direct convolution


def rewrite(gm: torch.fx.GraphModule, only_f4: bool = False, amx: bool = False) -> int:
    """Replaces every eligible 3 x 3 stride-1 conv2d in a Dynamo graph by :func:`conv3x3_f4` (calls of at least
    ``MIN_TILES_F4`` tiles of 4 x 4 outputs, batch included, channels in multiples of 8, where the kernel runs) or
    :func:`conv3x3` (F(2 x 2, 3 x 3): maps of at least ``MIN_TILES`` tiles of 2 x 2; not with ``only_f4``). With
    ``amx``, the conv2d calls left (stride 2, 1 x 1, small maps), and at batch 1 all of them, that
    :func:`sampan.jit.amx.eligible` allows go to :func:`sampan.jit.amx.conv2d_bf16x3`.

    Returns how many were replaced (0 leaves the graph as it was).
    """
    count = 0
    for node in list(gm.graph.nodes):
        chosen = _eligible(node, only_f4)
        # a call of one image is bound by reading its weights, and F(4x4)'s are 4x the direct convolution's: the AMX
        # kernel takes it if it can (resnet18 at batch 1: 16.9 against 18.6 ms; at batch 32 F(4x4) stays, 477
        # against 501)
        geometry = _amx_geometry(node) if amx and (chosen is None or _traced_batch(node) == 1) else None
        if geometry is not None:
            chosen = None
        elif chosen is None:
            continue
        x, weight = node.args[:2]
        bias = node.args[2] if len(node.args) > 2 else None
        if chosen is not None:
            padding, m = chosen
            target, args = (conv3x3_f4 if m == 4 else conv3x3), (x, weight, bias, padding)
        else:
            from sampan.jit.amx import conv2d_bf16x3

            target, args = conv2d_bf16x3, (x, weight, bias, *geometry)
        with gm.graph.inserting_before(node):
            new = gm.graph.call_function(target, args)
        new.meta.update(node.meta)
        node.replace_all_uses_with(new)
        gm.graph.erase_node(node)
        if target is not conv3x3:
            _fuse_epilogue(gm.graph, new)
        count += 1
    if count:
        gm.graph.lint()
        gm.recompile()
    return count


def _traced_batch(node) -> int | None:
    """The batch size a conv2d node was traced at (a dynamic one: its traced value)."""
    x = _meta(node.args[0])
    return _hint(x.shape[0]) if x is not None and x.dim() == 4 else None


def _amx_geometry(node) -> tuple[int, int] | None:
    """``(stride, padding)`` of a conv2d node that the bf16x3 AMX kernel takes here, else None."""
    if node.op != "call_function" or node.target not in _CONV2D or node.kwargs:
        return None
    args = list(node.args) + [None] * (7 - len(node.args))
    x, weight, _bias, stride, padding, dilation, groups = args
    xv, wv = _meta(x), _meta(weight)
    if xv is None or wv is None:
        return None
    from sampan.jit import amx

    stride, padding = _pair(stride, 1), _pair(padding, 0)
    if not amx.eligible(wv, xv, stride, padding, _pair(dilation, 1), groups):
        return None
    return stride[0], padding[0]


# as Dynamo records them from Python code, and from an exported program (the predictor's graphs)
_RELU = {torch.relu, torch.relu_, F.relu, torch.ops.aten.relu.default, torch.ops.aten.relu_.default}
_ADD = {operator.add, operator.iadd, torch.add, torch.ops.aten.add.Tensor, torch.ops.aten.add_.Tensor}
_IN_PLACE_ADD = {operator.iadd, torch.ops.aten.add_.Tensor}  # they write their first argument
_BATCH_NORM = {F.batch_norm, torch.ops.aten.batch_norm.default}


def _fuse_epilogue(graph: torch.fx.Graph, conv: torch.fx.Node) -> None:
    """Moves what follows an F(4 x 4) or bf16x3 AMX node (whose function takes ``residual, relu, bn`` after the
    convolution's own arguments) into its kernel call, as far as the chain goes: an eval-mode batch norm
    (folded into the weights; freezing computes them once), a residual add of a tensor of the output's shape, and a
    ReLU. Each step must be the only user of the one before (resnet18 at batch 1: ten passes over activations that
    inductor ran as separate kernels)."""
    bn = residual = None
    relu = False
    chain = [conv]
    step = _only_user(conv)
    if step is not None and step.target in _BATCH_NORM:
        bn = _eval_batch_norm(step, conv)
        if bn is not None:
            chain.append(step)
            step = _only_user(step)
    if step is not None and step.target in _ADD and not step.kwargs and len(step.args) == 2:
        last = chain[-1]
        other = step.args[1] if step.args[0] is last else step.args[0] if step.args[1] is last else None
        if step.target in _IN_PLACE_ADD and step.args[0] is not last:
            other = None  # `residual += conv(...)` changes the residual, which others may read: left as it is
        if isinstance(other, torch.fx.Node) and _same_tensor_type(_meta(other), _meta(last)):
            residual = other
            chain.append(step)
            step = _only_user(step)
    if step is not None and _is_relu(step, chain[-1]):
        relu = True
        chain.append(step)
    if len(chain) == 1:
        return
    with graph.inserting_before(chain[-1]):  # where the residual is known (a downsample may come after the conv)
        fused = graph.call_function(conv.target, (*conv.args, residual, relu, bn))
    fused.meta.update(chain[-1].meta)
    chain[-1].replace_all_uses_with(fused)
    for node in reversed(chain):  # each was the only user of the one before
        graph.erase_node(node)


def _same_tensor_type(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    """Both known, of one dtype and one size (symbolic sizes compared by their traced values: no guard added)."""
    if a is None or b is None or a.dtype != b.dtype:
        return False
    sizes = [_hint(d) for d in a.shape]
    return None not in sizes and sizes == [_hint(d) for d in b.shape]


def _only_user(node: torch.fx.Node) -> torch.fx.Node | None:
    return next(iter(node.users)) if len(node.users) == 1 else None


def _eval_batch_norm(node: torch.fx.Node, source: torch.fx.Node) -> tuple | None:
    """``(running_mean, running_var, weight, bias, eps)`` of a batch norm call on ``source`` (``F.batch_norm`` or
    ``aten.batch_norm``) that uses its running statistics, else None."""
    normalized = normalize_function(node.target, node.args, node.kwargs, normalize_to_only_use_kwargs=True)
    if normalized is None:
        return None
    a = normalized.kwargs
    if a["input"] is not source or a["training"] is not False or not all(
            isinstance(a[k], torch.fx.Node) for k in ("running_mean", "running_var")):
        return None
    return a["running_mean"], a["running_var"], a["weight"], a["bias"], float(a["eps"])


def _is_relu(node: torch.fx.Node, source: torch.fx.Node) -> bool:
    if node.op == "call_method":
        return node.target in ("relu", "relu_") and node.args == (source,) and not node.kwargs
    return (node.op == "call_function" and node.target in _RELU and len(node.args) == 1 and node.args[0] is source
            and set(node.kwargs) <= {"inplace"})


__all__ = ["conv3x3", "conv3x3_f4", "f4_unavailable", "f4_failed", "f4_panel", "f4_weights", "rewrite", "auto_rewrite",
           "auto_unavailable", "f4_flops", "MIN_CHANNELS", "MIN_TILES", "MIN_TILES_F4", "AUTO_MIN_FLOPS"]
