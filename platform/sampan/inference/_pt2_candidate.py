"""What the predictor's opt-in candidates share (:mod:`~sampan.inference.bf16`, :mod:`~sampan.inference.winograd`):
each compiles the ``.pt2`` program with inductor's freezing, and is considered only with ``set_backend('auto')``
on the CPU."""
from __future__ import annotations

import types
from typing import Callable

import torch

from sampan.jit.to_static import FrozenBackend
from sampan.spec import InputSpec


def refusal(config, exported: dict, *, considered: str, on_gpu: str,
            here: Callable[[], str | None] = lambda: None) -> str | None:
    """Why a candidate cannot be tried for ``config``, or None when it can: a backend set (``considered`` says
    what would be considered with 'auto'), a file other than the ``.pt2`` named, a GPU (``on_gpu``), this machine
    (``here()``), no ``.pt2`` program."""
    if config.backend != "auto":
        return (f"Config.set_backend({config.backend!r}) asks for that backend only; {considered} with "
                "set_backend('auto')")
    if config.file_format not in (None, "pt2"):
        return (f"Config names the {config.file_format} file, which is served as it is; {considered} for "
                "Config(prefix) or Config('....pt2')")
    if config.use_gpu():
        return on_gpu
    reason = here()
    if reason:
        return reason
    if "pt2" not in exported:
        return "it compiles the .pt2 program and this model folder has none (export it with sampan.jit.save)"
    return None


def compile_frozen(forward: Callable, specs: list[InputSpec], backend: FrozenBackend) -> Callable:
    """``forward`` compiled by ``backend`` with inductor's freezing on; dynamic dims follow ``specs``.

    ``forward`` gets a code object of its own first: Dynamo keeps its graphs per code object, at most
    ``torch._dynamo.config.recompile_limit`` (8) of them, and every predictor's candidate is the same ``forward``
    source; shared, a process that creates a few predictors (a graph for batch 1 and one for larger batches each)
    would reach the limit and fail (``fullgraph=True``)."""
    own = types.FunctionType(forward.__code__.replace(), forward.__globals__, forward.__name__, forward.__defaults__,
                             forward.__closure__)
    own.__kwdefaults__ = forward.__kwdefaults__
    forward = own
    compiled = torch.compile(forward, backend=backend, fullgraph=True)
    dynamic = [list(s.dynamic_dims) for s in specs]

    def run(*args):
        for tensor, dims in zip(args, dynamic):
            if dims:
                torch._dynamo.mark_dynamic(tensor, dims)
        # Dynamo reads `freezing` while it traces (a first call, or a new size range), before the
        # backend runs, so the switch has to be on around the call itself.
        with torch._inductor.config.patch(freezing=True):
            return compiled(*args)

    return run
