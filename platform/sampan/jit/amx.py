"""Float32 convolutions by three bfloat16 products on AMX, for frozen inference graphs on CPUs that have it.

Intel's AMX (Sapphire Rapids and later Xeons) multiplies bfloat16 matrices 16 x 16 x 32 at a time into float32
sums: on one core of an Intel Xeon here, oneDNN's bf16 convolution of resnet18's 512-channel 7 x 7 layer took
0.25 ms where its float32 one took 1.45. bf16 alone changes the results (8 significant bits: resnet18's logits
move by 4e-3 of their scale, which is why the predictor's bf16 candidate is opt-in). This module keeps float32's
results instead: each float32 value is split into two bf16 halves, ``v = hi + lo`` to about 2^-18 of ``v``, and a
product is ``hi(x) hi(w) + hi(x) lo(w) + lo(x) hi(w)`` (the "bf16x3" trick), summed in float32 by the tile
multiply. The outputs land within about 5e-6 of the float64 result relative to their scale (float32's direct
convolution: 1e-6 to 2e-6; Winograd F(4 x 4)'s: 1e-5), for three times bf16's multiplications, which AMX has to
spare.

:func:`conv2d_bf16x3` runs in a small C++ kernel (``amx_conv.cpp``, built once per machine on first use by
``torch.utils.cpp_extension``, 10-30 s): the input is split once, each block of 64 output pixels gathers its rows
(im2col), and the weights, split and packed once (:func:`pack_weights`, constant-folded by inductor's freezing), are
read as they stream. resnet18's convolutions alone at batch 1, one thread, weights from memory, against oneDNN's
float32 (BENCHMARKS.md, "static", twenty-first session): 512 channels at 7 x 7 2.52 -> 1.41 ms, the stride-2
256 -> 512 one 1.37 -> 0.73, the 1 x 1 stride-2 128 -> 256 one 0.152 -> 0.075.

:func:`sampan.jit.winograd.rewrite` with ``amx=True`` (the predictor's ``inductor-winograd`` candidate and
``to_static``'s timed Winograd variant, on CPUs where :func:`unavailable` is None) gives it the convolutions
Winograd does not take: the stride-2 and 1 x 1 ones and 3 x 3 ones on maps too small for F(4 x 4); and in a graph
traced at batch 1 also those F(4 x 4) would take (resnet18 at batch 1: 16.9 against 18.6 ms). A batch norm,
residual add and ReLU that follow run in its output pass, as for F(4 x 4).
"""
from __future__ import annotations

import functools
import sys
from pathlib import Path

import torch
from torch.nn.utils.fusion import fuse_conv_bn_weights

# fewer input channels than this: left to oneDNN. resnet18's RGB stem (3 channels, 7 x 7, stride 2) took 0.85x
# oneDNN's time alone, but the network at batch 1 ran 0.4 ms slower with it in the kernel (interleaved, twice)
MIN_CHANNELS = 16
_SOURCE = Path(__file__).with_name("amx_conv.cpp")
_NAME = "sampan_amx_conv_v1"  # torch's extension cache rebuilds it when the source changes
OP = "sampan_amx::conv2d_bf16x3"


def unavailable() -> str | None:
    """Why the bf16x3 AMX convolution cannot run here, or None once its kernel is built and loaded (the first call
    builds it, 10-30 s, kept by torch's extension cache for later processes; the answer is kept for the process).

    It needs Linux, a CPU with AMX-BF16 whose vector instructions torch uses at AVX-512 (``ATEN_CPU_CAPABILITY``
    set lower turns it off too), and a C++ compiler."""
    reason = cpu_unavailable()
    if reason is not None:
        return reason
    from sampan.utils import cpp_kernels

    return cpp_kernels.load(_NAME, _SOURCE, OP, "the AMX convolution kernel", _shape,
                            fakes={"sampan_amx::pack_bf16x3": _packed_shape})


def cpu_unavailable() -> str | None:
    """Why this machine cannot run the kernel at all (the OS, the CPU, torch's vector width), or None; unlike
    :func:`unavailable` it builds nothing, so a failed build is not taken for a CPU without AMX."""
    if not sys.platform.startswith("linux"):
        return f"AMX needs Linux's permission for its tile data, and this is {sys.platform}"
    capability = torch.backends.cpu.get_cpu_capability()
    if capability != "AVX512":
        return f"torch runs this CPU's vector instructions at {capability}, and the AMX kernel needs AVX512"
    if not (_torch_says("_is_amx_tile_supported") and _torch_says("_is_avx512_bf16_supported")
            and _cpu_flag("amx_bf16")):
        return "this CPU has no AMX-BF16 (Intel Xeon from Sapphire Rapids on)"
    if not _torch_says("_init_amx"):
        return "Linux did not allow this process AMX's tile data"
    return None


def failed() -> str | None:
    """Why the kernel failed to load in this process; None when it loaded or was not tried (builds nothing)."""
    from sampan.utils import cpp_kernels

    return cpp_kernels.failure(_NAME)


def _torch_says(name: str) -> bool:
    """``torch.cpu.<name>()`` (private probes of torch 2.x), False where this torch lacks it."""
    probe = getattr(torch.cpu, name, None)
    return bool(probe()) if probe is not None else False


@functools.lru_cache(maxsize=None)  # asked for every convolution a rewrite looks at
def _cpu_flag(flag: str) -> bool:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            return any(line.startswith("flags") and flag in line.split() for line in f)
    except OSError:
        return False


def _packed_shape(weight):
    """:func:`pack_weights`' result for tracing: ``[panels, steps, 2, 16, 16, 2]`` int16 (an even count of panels of
    16 output channels; steps of 32 of the ``c kh kw`` inputs)."""
    k, c, kh, kw = weight.shape
    return weight.new_empty(((k + 31) // 32 * 2, (c * kh * kw + 31) // 32, 2, 16, 16, 2), dtype=torch.int16)


def _shape(x, packed, out_channels, kh, kw, stride, padding, bias=None, residual=None, relu=False):
    """The output's shape and layout (channels last, as the kernel writes it), for tracing."""
    n, _, h, w = x.shape
    ho, wo = (h + 2 * padding - kh) // stride + 1, (w + 2 * padding - kw) // stride + 1
    return x.new_empty((n, out_channels, ho, wo)).to(memory_format=torch.channels_last)


def pack_weights(weight: torch.Tensor) -> torch.Tensor:
    """A float32 ``[k, c, kh, kw]`` weight split into bf16 halves and packed as the kernel reads it (int16 bits)."""
    return torch.ops.sampan_amx.pack_bf16x3(weight)


def conv2d_bf16x3(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride: int, padding: int,
                  residual: torch.Tensor | None = None, relu: bool = False, bn: tuple | None = None) -> torch.Tensor:
    """``F.conv2d(x, weight, bias, stride, padding)`` in float32 by three bf16 products on AMX (CPU; output channels
    in multiples of 16); the result is in the channels-last layout.

    As :func:`sampan.jit.winograd.conv3x3_f4`, it can take what follows: an eval-mode batch norm ``bn =
    (running_mean, running_var, weight, bias, eps)`` folded into the weights, then ``+ residual``, then a ReLU.

    Raises RuntimeError saying why when the kernel cannot run here (:func:`unavailable`). Example:
        >>> import torch
        >>> import torch.nn.functional as F
        >>> from sampan.jit.amx import conv2d_bf16x3
        >>> x, w = torch.randn(1, 16, 12, 12), torch.randn(32, 16, 3, 3)
        >>> y = conv2d_bf16x3(x, w, None, 2, 1)  # doctest: +SKIP
        >>> torch.allclose(y, F.conv2d(x, w, stride=2, padding=1), atol=1e-3)  # doctest: +SKIP
        True
    """
    reason = unavailable()
    if reason is not None:
        raise RuntimeError(f"the bf16x3 AMX convolution cannot run here: {reason}. HINT: use F.conv2d.")
    k, c, kh, kw = weight.shape
    if k % 16:
        raise ValueError(f"conv2d_bf16x3: output channels must be a multiple of 16 (the tiles' width), got weight of "
                         f"shape {tuple(weight.shape)}. HINT: use F.conv2d.")
    if bn is not None:
        mean, var, gamma, beta, eps = bn
        weight, bias = fuse_conv_bn_weights(weight, bias, mean, var, eps, gamma, beta)
    x = x.contiguous(memory_format=torch.channels_last)  # the producer writes that layout itself in a graph
    if residual is not None:
        residual = residual.contiguous(memory_format=torch.channels_last)
    return torch.ops.sampan_amx.conv2d_bf16x3(x, pack_weights(weight), k, kh, kw, stride, padding, bias, residual,
                                              relu)


def eligible(weight: torch.Tensor, x: torch.Tensor, stride: tuple | None, padding: tuple | None,
             dilation: tuple | None, groups) -> bool:
    """Whether a conv2d of these (example) arguments can run here by :func:`conv2d_bf16x3`: float32, square stride
    and padding, no dilation or groups, at least ``MIN_CHANNELS`` inputs and outputs in multiples of 16."""
    return (x.dim() == 4 and x.dtype == torch.float32 and weight.dtype == torch.float32 and (groups or 1) == 1
            and stride is not None and stride[0] == stride[1] and padding is not None and padding[0] == padding[1]
            and dilation == (1, 1) and weight.shape[0] % 16 == 0 and weight.shape[1] >= MIN_CHANNELS
            and unavailable() is None)


__all__ = ["conv2d_bf16x3", "pack_weights", "unavailable", "cpu_unavailable", "failed", "eligible", "MIN_CHANNELS"]
