"""The predictor's Winograd candidate: the exported program, frozen, with its 3 x 3 convolutions by Winograd.

The :class:`~sampan.inference.Predictor` may also consider ``inductor-winograd``: the ``.pt2`` program (checked by
``sampan.jit._safety`` like every ``.pt2`` the predictor opens) compiled by inductor with freezing, its 3 x 3
stride-1 convolutions replaced by :mod:`sampan.jit.winograd` (F(4 x 4, 3 x 3) in a C++ kernel built on first use,
else F(2 x 2, 3 x 3) with ``Config.enable_winograd()``). Fewer multiplications is the one way left to beat ONNX
Runtime on a CPU whose direct convolutions already run at the FMA units' peak. resnet18, one thread: 0.77x ONNX
Runtime's latency at batch 1 and 0.66x at batch 32 on an AVX2-only AMD EPYC (Zen 3); 0.72x and 0.68x on an
AVX-512 one (Zen 4), since the kernel computes its matrix products itself (BENCHMARKS.md, "static").

On Intel Xeons with AMX-BF16 (Sapphire Rapids and later; :func:`sampan.jit.amx.unavailable` is None) it also
gives the convolutions Winograd does not take (stride 2, 1 x 1, 3 x 3 on maps too small for F(4 x 4)), and in
the batch-1 graph all it can (one image is bound by reading weights, and F(4 x 4)'s are 4x as many), to
:func:`sampan.jit.amx.conv2d_bf16x3`: float32 convolutions by three bf16 products on AMX's tile multiply, within
about 5e-6 of float64 (relative to the outputs' scale). resnet18, one thread, on such a Xeon: 0.71-0.76x ONNX
Runtime at batch 1 (Winograd alone: 0.84-0.93x, bound by memory), 0.65-0.69x at batch 32. The report says how many
convolutions each way computes (:func:`describe`).

It computes in float32 and is verified against the reference (the first artifact) with the fp32 tolerance of
the other candidates (Winograd's rounding error is ~1e-5 of the outputs' scale), at batch 1 and, with a
dynamic dimension, at batch 2; it is chosen only when it is the fastest verified candidate.

Without ``enable_winograd()`` / ``disable_winograd()`` the candidate is tried **on its own** where it may pay
(:func:`auto_refusal`): a program whose 3 x 3 convolutions that F(4 x 4, 3 x 3) takes carry at least
``sampan.jit.winograd.AUTO_MIN_FLOPS`` at batch 1 (resnet18, not the course's small networks, which never pay the
compile: about 20 s for resnet18 on one core). Only F(4 x 4) is used so.
"""
from __future__ import annotations

from collections import Counter
from typing import Callable

import torch

from sampan.inference import _pt2_candidate
from sampan.jit._specs import flatten_outputs
from sampan.jit.to_static import FrozenBackend
from sampan.spec import InputSpec

NAME = "inductor-winograd"


def refusal(config, exported: dict) -> str | None:
    """Why the Winograd candidate cannot be tried for ``config``, or None when it can."""
    return _pt2_candidate.refusal(
        config, exported, considered="the Winograd candidate is considered",
        on_gpu="enable_winograd is a CPU option (cuDNN picks Winograd on its own) and this predictor runs on a GPU")


def auto_refusal(config, exported: dict, program: Callable[[], torch.nn.Module]) -> str | None:
    """Why the candidate is not tried on its own for ``config`` (left to the default), or None when it is.

    ``program`` returns the ``.pt2`` program's module; it is loaded (and its convolutions counted) only when the
    config allows the candidate at all. The F(4 x 4) kernel is built (once per machine) only for a program with a
    convolution it would take."""
    from sampan.jit import winograd as jit_winograd

    reason = refusal(config, exported)
    if reason:
        return reason
    flops = jit_winograd.f4_flops(program(), batch=1)
    if flops < jit_winograd.AUTO_MIN_FLOPS:
        # a convolution it would take was counted only where the kernel loaded: else say why it did not
        unavailable = jit_winograd.f4_failed()
        return (f"its 3x3 convolutions that F(4x4) takes carry {flops / 1e9:.2g} GFLOP at batch 1, under the "
                f"{jit_winograd.AUTO_MIN_FLOPS / 1e9:.2g} that pays for the compile; Config.enable_winograd() tries it"
                + (f" ({unavailable})" if unavailable else ""))
    return None


def compile_winograd(module: torch.nn.Module, specs: list[InputSpec], only_f4: bool = False,
                     amx: bool = False) -> tuple[Callable, FrozenBackend]:
    """``module`` compiled with freezing and the Winograd rewrite (F(4 x 4) only, with ``only_f4``; the other
    convolutions by :mod:`sampan.jit.amx` where it can, with ``amx``); the backend tells how many convolutions it
    replaced (``backend.rewritten``, after the first call)."""
    from sampan.jit.winograd import rewrite

    def counted(gm: torch.fx.GraphModule) -> int:
        replaced = rewrite(gm, only_f4=only_f4, amx=amx)
        backend.kinds.append(kinds(gm))
        return replaced

    backend = FrozenBackend("inductor", rewrite=counted)
    backend.kinds = []  # per graph compiled (batch 1 first, then larger batches): what computes its convolutions

    def forward(*args):
        return flatten_outputs(module(*args))

    return _pt2_candidate.compile_frozen(forward, specs, backend), backend


def kinds(gm: torch.fx.GraphModule) -> dict[str, int]:
    """How many of a rewritten graph's convolutions each way computes, by name (``"F(4x4)"``, ``"F(2x2)"``,
    ``"AMX bf16x3"``)."""
    from sampan.jit.amx import conv2d_bf16x3
    from sampan.jit.winograd import conv3x3, conv3x3_f4

    names = {conv3x3_f4: "F(4x4)", conv3x3: "F(2x2)", conv2d_bf16x3: "AMX bf16x3"}
    return dict(Counter(names[n.target] for n in gm.graph.nodes if n.op == "call_function" and n.target in names))


def describe(counts: dict[str, int]) -> str:
    """:func:`kinds`' counts in words: "convolutions: 10 by Winograd F(4x4), 9 by three bf16 products on AMX"."""
    words = {"F(4x4)": "Winograd F(4x4)", "F(2x2)": "Winograd F(2x2)", "AMX bf16x3": "three bf16 products on AMX"}
    if not counts:
        return "no convolution rewritten"
    return "convolutions: " + ", ".join(f"{n} by {words[k]}" for k, n in counts.items())
