"""The predictor's Winograd candidate: the exported program, frozen, with its 3 x 3 convolutions by Winograd.

With ``Config.enable_winograd()`` the :class:`~sampan.inference.Predictor` also considers ``inductor-winograd``:
the ``.pt2`` program (checked by ``sampan.jit._safety`` like every ``.pt2`` the predictor opens) compiled by
inductor with freezing, its 3 x 3 stride-1 convolutions replaced by :mod:`sampan.jit.winograd` (F(4 x 4, 3 x 3)
in a C++ kernel built on first use where a map is large enough, else F(2 x 2, 3 x 3)). Fewer multiplications is
the one way left to beat ONNX Runtime on a CPU whose direct convolutions already run at the FMA units' peak
(AVX2-only CPUs; resnet18 on a 2-core AMD EPYC: 0.77x ONNX Runtime's latency at batch 1, 0.66x at batch 32,
BENCHMARKS.md).

It computes in float32 and is verified against the reference (the first artifact) with the fp32 tolerance of
the other candidates (Winograd's rounding error is ~1e-5 of the outputs' scale), at batch 1 and, with a
dynamic dimension, at batch 2; it is chosen only when it is the fastest verified candidate.

Without ``enable_winograd()`` / ``disable_winograd()`` the candidate is tried **on its own** where it pays
(:func:`auto_refusal`): a CPU whose widest vectors are AVX2 and a program whose 3 x 3 convolutions that
F(4 x 4, 3 x 3) takes carry at least ``sampan.jit.winograd.AUTO_MIN_FLOPS`` at batch 1 (resnet18, not the
course's small networks, which never pay the compile). Elsewhere nothing changes.
"""
from __future__ import annotations

import functools
from typing import Callable

import torch

from sampan.inference import _pt2_candidate
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
    CPU and the config allow the candidate at all."""
    from sampan.jit import winograd as jit_winograd

    reason = refusal(config, exported) or jit_winograd.auto_unavailable()
    if reason:
        return reason
    flops = jit_winograd.f4_flops(program(), batch=1)
    if flops < jit_winograd.AUTO_MIN_FLOPS:
        return (f"its 3x3 convolutions that F(4x4) takes carry {flops / 1e9:.2g} GFLOP at batch 1, under the "
                f"{jit_winograd.AUTO_MIN_FLOPS / 1e9:.2g} that pays for the compile; Config.enable_winograd() tries it")
    return None


def compile_winograd(module: torch.nn.Module, specs: list[InputSpec],
                     only_f4: bool = False) -> tuple[Callable, FrozenBackend]:
    """``module`` compiled with freezing and the Winograd rewrite (F(4 x 4) only, with ``only_f4``); the backend
    tells how many convolutions it replaced (``backend.rewritten``, after the first call)."""
    from sampan.jit.winograd import rewrite

    backend = FrozenBackend("inductor", rewrite=functools.partial(rewrite, only_f4=only_f4))

    def forward(*args):
        out = module(*args)
        return list(out) if isinstance(out, (list, tuple)) else [out]

    return _pt2_candidate.compile_frozen(forward, specs, backend), backend
