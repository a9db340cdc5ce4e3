"""The predictor's reduced-precision candidate: the exported program in bfloat16 on CPUs with native bf16.

With ``Config.enable_mkldnn_bfloat16()`` (Paddle Inference's opt-in for oneDNN bf16 kernels) the
:class:`~sampan.inference.Predictor` also considers ``inductor-bf16``: the ``.pt2`` program (checked by
``sampan.jit._safety`` like every ``.pt2`` the predictor opens) compiled by ``torch.compile`` (inductor)
with ``freezing`` under ``torch.autocast("cpu", torch.bfloat16)``. Freezing folds the weights into the
graph as constants, so their bf16 copies are made once at compile time and convolutions run on oneDNN's
bf16 kernels (AVX-512 BF16 / AMX); outputs come back as float32.

It is verified against the fp32 reference (the first artifact, itself checked against eager when it was
saved) with a bf16 tolerance, and chosen only when it is the fastest verified candidate.

**Tolerance.** bf16 keeps 8 significant bits, so each rounding is off by up to 2^-9 (about 2e-3)
relative; oneDNN accumulates in fp32, and a ResNet-18 of random or trained weights lands at
4e-3 to 8e-3 of the largest logit (measured). The check accepts a maximum error of
``max_rel_error`` (default 2e-2, a 2.5x margin) times the largest absolute fp32 output, per output.
That bound also settles the top-1 class: every logit moves by less than the bound, so a row whose
fp32 top-1 leads its runner-up by more than twice the bound keeps its class. A real fault (other
weights, a wrong layout, an op lowered wrongly) is off by the order of the outputs themselves.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from sampan.inference import _pt2_candidate
from sampan.jit._specs import flatten_outputs
from sampan.jit.to_static import FrozenBackend
from sampan.spec import InputSpec

NAME = "inductor-bf16"


def refusal(config, exported: dict) -> str | None:
    """Why the bf16 candidate cannot be tried for ``config`` here, or None when it can."""
    return _pt2_candidate.refusal(
        config, exported, considered="bf16 candidates are considered",
        on_gpu="enable_mkldnn_bfloat16 is a CPU (oneDNN) option and this predictor runs on a GPU", here=_no_native_bf16)


def _no_native_bf16() -> str | None:
    from sampan.amp.plugin import cpu_has_native_bf16

    if not cpu_has_native_bf16():
        return ("this CPU has no native bfloat16 (AVX-512 BF16 or AMX): emulated bf16 is slower than fp32, "
                "so only fp32 candidates run")
    return None


def compile_bf16(module: torch.nn.Module, specs: list[InputSpec]) -> Callable:
    """``module`` compiled with freezing under bf16 autocast; dynamic dims follow ``specs``."""

    def forward(*args):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = module(*args)
        return [o.float() if o.dtype == torch.bfloat16 else o for o in flatten_outputs(out)]

    return _pt2_candidate.compile_frozen(forward, specs, FrozenBackend("inductor"))  # graphs of its own


def relative_error(outputs: list[np.ndarray], reference: list[np.ndarray]) -> float:
    """The largest ``max|out - ref| / max|ref|`` over the outputs (inf when shapes differ)."""
    if len(outputs) != len(reference):
        return float("inf")
    worst = 0.0
    for out, ref in zip(outputs, reference):
        out, ref = np.asarray(out, dtype=np.float64), np.asarray(ref, dtype=np.float64)
        if out.shape != ref.shape:
            return float("inf")
        if ref.size:
            scale = max(float(np.abs(ref).max()), np.finfo(np.float32).tiny)
            error = float(np.abs(out - ref).max()) / scale
            worst = max(worst, error if np.isfinite(error) else float("inf"))  # NaN counts as the worst
    return worst
