"""Run a quantized model on real int8 kernels in torch: :func:`compile_int8`.

The models that :func:`~sampan.quantization.quantize_dynamic` and :meth:`PTQ.convert` return are
*reference* int8 models: portable, about 4x smaller, but every call dequantizes the weights and
runs float kernels, so in eager torch they are slower than fp32. ``compile_int8`` lowers them
with inductor (``torch.compile`` with ``freezing=True``), which replaces the quantize /
dequantize patterns by int8 GEMM and convolution kernels:

* a :meth:`PTQ.convert` / :meth:`QAT.convert` model (torchao pt2e, ``X86InductorQuantizer``):
  inductor fuses its Q/DQ pairs into oneDNN ``qconv`` / ``qlinear`` ops. Such a model is already one
  captured graph, so inductor compiles it directly, once per input layout, and calls skip Dynamo's guards
  (a fifth of LeNet's int8 call at batch 32);
* a :func:`quantize_dynamic` model: its ``Int8Linear`` layers become torchao
  ``Int8DynamicActivationInt8WeightConfig`` layers (the same int8 weights within one rounding
  step, activations rounded
  to int8 per row at run time) and run ``torch._int_mm``. ``Int8RNN`` (LSTM / GRU) layers keep
  their reference kernels.

On a CPU without VNNI (AVX2-only x86, many AMD EPYC) inductor has no fast int8 GEMM: its C++ template falls
back to a scalar reference micro-kernel and oneDNN's ``qlinear`` ran the MLP at 2.8x fp32 there. A
:func:`quantize_dynamic` model then runs PyTorch's fbgemm kernels instead (``quantized::linear_dynamic``,
AVX2 ``vpmaddubsw`` with 7-bit activations so the 16-bit sums never saturate), eagerly, with the same int8
weights: 0.51x fp32 at batch 32 and 0.78-1.02x at batch 1 on that machine (flow ``"fbgemm"``; BENCHMARKS.md). At
one row fbgemm's fixed cost per call (about 20 us) is most of the time, so one or two rows go to Sampan's int8 GEMV
kernel instead (:mod:`sampan.quantization.gemv`: int16 rows times int8 weights, the ReLU that follows a layer in
an ``nn.Sequential`` folded in): 0.49-0.55x fp32 at batch 1 with oneDNN, fbgemm and ATen held to AVX2 on an AMD EPYC
Zen 4 (fbgemm alone 0.80x there; at two rows 0.38x against 0.49x, at three a tie). ``Int8Compiled.kernels`` says
which kernel takes a row or two, and why.

Both inductor flows lower through torchao's X86 inductor patterns (registered when its X86 quantizer is
imported, which ``compile_int8`` makes sure of): the int8 weights are prepacked once instead of
being reordered on every call. With ``max_autotune=True`` (the default) inductor also benchmarks
its own C++ int8 GEMM templates (AMX / AVX-512 VNNI micro-kernels) against oneDNN and keeps the
faster: the Linear-heavy MLP of ``sampan bench compress`` ran 0.57x fp32 at batch 1 and 0.23x at
batch 32 with it, 1.8x at batch 1 without it (oneDNN's qlinear), on the machine of
``BENCHMARKS.md``. Before the patterns were registered, ``torch._int_mm`` reordered the weights
on every call: 0.92x at batch 1. Measured and not used at batch 1: aten's weight-only
``_weight_int8pack_mm`` (3x fp32), torchao's ``Int8WeightOnlyConfig`` (inductor's freezing folds
its weights back to fp32: 1.1x), the pt2e dynamic-activation flow (1.16x).
"""
from __future__ import annotations

import copy
import re
import warnings
from typing import Any, Callable

import torch
from torch import nn

from sampan.errors import bad_argument, first_line
from sampan.quantization.dynamic import Int8Linear, Int8RNN, _dequantize
from sampan.utils.imports import require

# The int8 kernels inductor emits for the two flows, as they appear in its generated code.
INT8_KERNELS = {
    "onednn.qconv": re.compile(r"onednn\.qconv"),
    "onednn.qlinear": re.compile(r"onednn\.qlinear"),
    "_int_mm": re.compile(r"extern_kernels\._int_mm\("),
    "int8 micro-GEMM": re.compile(r"void kernel_micro_gemm\([^)]*?const u?int8_t\*", re.S),  # max-autotune's C++ template
}
# the fbgemm flow's calls of at most this many rows go to the int8 GEMV kernel (sampan.quantization.gemv), row by
# row. The MLP 64 -> 3 x 1024 -> 10 under AVX2 emulation on an AMD EPYC Zen 4, one thread, x fp32: 1 row 0.43x;
# 2 rows 0.38x against fbgemm's 0.49x; 3 rows a tie (0.37x / 0.39x); 4 rows and more fbgemm is faster
GEMV_MAX_ROWS = 2
_FEW = f"up to {GEMV_MAX_ROWS} rows"
# the fbgemm flow runs eagerly: the profiler sees its kernels
EAGER_OPS = {"fbgemm linear_dynamic": "quantized::linear_dynamic", "int8 GEMV": "sampan_int8::linear_w8"}
# inductor inlines a constant of at most this many values into the code instead of keeping a buffer (lowering.tensor);
# the per-channel weight scales of torchao's int8 Linear with that few outputs are such constants after freezing, and
# max-autotune's benchmark of its int8 GEMMs looks them up as buffers: "LoweringException: KeyError: 'buf6'"
# (torch 2.14, a 2-class head). Those layers stay weight-only there: float GEMMs on the int8-rounded weights.
INLINED_CONSTANT_MAX = 8


def _is_pt2e(model: nn.Module) -> bool:
    if not isinstance(model, torch.fx.GraphModule):
        return False
    return any(n.op == "call_function" and "quantize_per" in str(n.target) for n in model.graph.nodes)


def _pool_in_int8(model: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of a pt2e model whose ``dequantize -> max_pool2d -> quantize`` runs (same scale and zero point on
    both sides, as the X86 quantizer makes them) are one ``max_pool2d`` on the int8 values.

    The result is the same bit for bit: quantizing is monotonic, so the largest int8 value of a window is the
    int8 value of its largest float, and padding with the dtype's smallest value changes no maximum. Inductor
    would otherwise lower the run to ``quantized.max_pool2d``, which is slow on narrow channels-last maps:
    LeNet's two pools (6 and 16 channels) took 0.32 ms of its 1.1 ms int8 call at batch 32 (AMD EPYC, AVX-512
    VNNI, one thread); pooled by inductor's own loop, the int8 model ran 0.53x fp32 instead of 0.72x."""
    decomposed = torch.ops.quantized_decomposed
    out = copy.deepcopy(model)
    graph = out.graph
    changed = False
    for quant in list(graph.nodes):
        if quant.op != "call_function" or quant.target != decomposed.quantize_per_tensor.default:
            continue
        pool = quant.args[0]
        if (not isinstance(pool, torch.fx.Node) or pool.target != torch.ops.aten.max_pool2d.default
                or len(pool.users) != 1):
            continue
        dequant = pool.args[0]
        if (not isinstance(dequant, torch.fx.Node) or dequant.target != decomposed.dequantize_per_tensor.default
                or tuple(dequant.args[1:]) != tuple(quant.args[1:]) or dequant.kwargs or quant.kwargs):
            continue
        with graph.inserting_before(quant):
            pooled = graph.call_function(torch.ops.aten.max_pool2d.default, (dequant.args[0], *pool.args[1:]),
                                         dict(pool.kwargs))
        pooled.meta.update(pool.meta)
        quant.replace_all_uses_with(pooled)
        changed = True
    if changed:
        graph.eliminate_dead_code()
        graph.lint()
        out.recompile()
    return out


def _torchao_dynamic(model: nn.Module, max_autotune: bool) -> tuple[nn.Module, str]:
    """Swaps every ``Int8Linear`` for an ``nn.Linear`` that torchao quantizes to int8 activations x int8 weights;
    returns the model and how it runs. With ``max_autotune``, layers of at most ``INLINED_CONSTANT_MAX`` outputs
    stay ``Int8Linear`` (weight-only: freezing folds their dequantized weights into float ones), which inductor's
    autotuner cannot take as int8 GEMMs."""
    from sampan.quantization._pt2e import reduce_range
    from sampan.quantization.dynamic import _replace

    require("torchao")
    from torchao import quantization

    names = [n for n, m in model.named_modules() if isinstance(m, Int8Linear)]
    small = [n for n in names if max_autotune and model.get_submodule(n).out_features <= INLINED_CONSTANT_MAX]
    names = [n for n in names if n not in small]
    swapped = copy.deepcopy(model)
    for name in names:
        # the dequantized weights lie on the int8 grid; torchao's symmetric per-row rounding (range
        # -128..127) gives back the same int8 values within one step (7-bit ones on a CPU without VNNI)
        swapped = _replace(swapped, name, swapped.get_submodule(name).dequantize())  # name "": the model itself
    wanted = set(names)
    config = quantization.Int8DynamicActivationInt8WeightConfig(set_inductor_config=False, reduce_range=reduce_range())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantization.quantize_(swapped, config, filter_fn=lambda module, fqn: fqn in wanted)
    kernels = "inductor: int8 GEMMs"
    if small:
        layers = ", ".join(repr(n) if n else "the model" for n in small)
        kernels += (f"; float GEMMs on the int8-rounded weights for {layers} (at most {INLINED_CONSTANT_MAX} outputs: "
                    "inductor inlines their scales, which its max-autotune cannot benchmark; max_autotune=False runs "
                    "them on int8 GEMMs)")
    return swapped.eval(), kernels


class FbgemmInt8Linear(nn.Module):
    """An ``Int8Linear`` on int8 kernels for CPUs without VNNI: calls of up to ``GEMV_MAX_ROWS`` rows through the
    int8 GEMV kernel (:func:`sampan.quantization.gemv.linear_w8`: rows rounded to int16, within about 1e-4 of the
    weight-only reference's largest output), larger ones through PyTorch's fbgemm dynamic int8 Linear
    (fbgemm-prepacked copies of the same int8 weights; activations rounded per call to 7 bits, fbgemm's
    ``reduce_range``). ``relu`` applies the ReLU that followed the layer. Both kernels take float32: an input of
    another floating dtype (bf16, fp16) is computed in float32 and the output cast back to it.

    ``weight`` reads back the dequantized float weight, read-only, as ``Int8Linear.weight`` does: code that reads a
    Linear's ``.weight`` instead of calling it (``nn.TransformerEncoderLayer``'s fused inference path) runs its own
    float kernels on the same int8-rounded weights."""

    def __init__(self, layer: Int8Linear, gemv: bool):
        super().__init__()
        self.in_features, self.out_features, self.gemv = layer.in_features, layer.out_features, gemv
        self.relu = False  # set by _fbgemm_dynamic when a ReLU follows the layer
        engine = torch.backends.quantized.engine
        torch.backends.quantized.engine = "fbgemm"  # prepacks for fbgemm; the packed weights keep their kernel
        try:
            with warnings.catch_warnings():
                # torch.ao.quantization and quantized tensors are deprecated in favour of torchao, which has no
                # AVX2 int8 kernel: the warnings would only tell the user about Sampan's internals
                warnings.simplefilter("ignore")
                from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

                self.fbgemm = DynamicLinear(layer.in_features, layer.out_features, bias_=layer.bias is not None,
                                            dtype=torch.qint8)
                zeros = torch.zeros(layer.out_features, dtype=torch.long)
                weight = torch._make_per_channel_quantized_tensor(layer.weight_int8,
                                                                  layer.weight_scale.double().flatten(), zeros, 0)
                self.fbgemm.set_weight_bias(weight, None if layer.bias is None else layer.bias.detach().float())
        finally:
            torch.backends.quantized.engine = engine
        self.register_buffer("weight_int8", layer.weight_int8)
        self.register_buffer("weight_scale", layer.weight_scale.float().flatten())
        self.register_buffer("bias", None if layer.bias is None else layer.bias.detach().float())
        self._gemv_args()

    @property
    def weight(self) -> torch.Tensor:
        """The dequantized weight ``[out_features, in_features]`` in the scales' dtype (not a parameter)."""
        return _dequantize(self.weight_int8, self.weight_scale, self.weight_scale.dtype)

    def _gemv_args(self) -> None:
        # the kernel's buffers in one plain attribute: at one row, reading three buffers through
        # nn.Module.__getattr__ cost a tenth of a 1024 x 1024 layer's time
        self._args = (self.weight_int8, self.weight_scale, self.bias)

    def _apply(self, fn, recurse=True):  # .to(), .float() ... replace the buffers: take the new ones
        out = super()._apply(fn, recurse)
        self._gemv_args()
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32 and x.is_floating_point():
            # fbgemm and the GEMV kernel take float32 only: in float32, then back to the input's dtype (bf16 in, bf16
            # out, as Int8Linear and nn.Linear in a bf16 model)
            return self.forward(x.float()).to(x.dtype)
        if self.gemv and x.numel() <= GEMV_MAX_ROWS * self.in_features:
            return torch.ops.sampan_int8.linear_w8(x, *self._args, self.relu)
        y = self.fbgemm(x)
        return torch.relu_(y) if self.relu else y

    def extra_repr(self) -> str:
        few = "int8 GEMV" if self.gemv else "fbgemm"
        return (f"in_features={self.in_features}, out_features={self.out_features}, {_FEW}: {few}, "
                f"more: fbgemm{', relu' if self.relu else ''}")


def _fbgemm_dynamic(model: nn.Module) -> tuple[nn.Module, str]:
    """Swaps every ``Int8Linear`` for a :class:`FbgemmInt8Linear` over the same int8 values and scales, folding
    a ReLU that follows one in an ``nn.Sequential`` into it (the ReLU's entry is removed, the other names stay);
    returns the model and how it runs a row or two."""
    from sampan.quantization.dynamic import _replace
    from sampan.quantization.gemv import gemv_unavailable

    reason = gemv_unavailable()
    swapped = copy.deepcopy(model)
    for name in [n for n, m in swapped.named_modules() if isinstance(m, Int8Linear)]:
        swapped = _replace(swapped, name, FbgemmInt8Linear(swapped.get_submodule(name), gemv=reason is None))
    for seq in [m for m in swapped.modules() if isinstance(m, nn.Sequential)]:
        names = list(seq._modules)
        for first, then in zip(names, names[1:]):
            layer = seq._modules.get(first)  # None: a ReLU removed in an earlier step
            if isinstance(layer, FbgemmInt8Linear) and type(seq._modules[then]) is nn.ReLU:
                layer.relu = True
                # the ReLU's entry goes (an Identity costs 2 us a call); the others keep their names
                del seq._modules[then]
    few = "int8 GEMV kernel" if reason is None else f"fbgemm (the int8 GEMV kernel cannot run here: {reason})"
    return swapped.eval(), f"{_FEW}: {few}; more rows: fbgemm"


class Int8Compiled(nn.Module):
    """A quantized model compiled onto int8 kernels; built by :func:`compile_int8`, for inference only.

    Every new input shape compiles once (shapes are static: int8 kernels are chosen per shape). As with
    ``torch.compile``, calls in shapes beyond the first 8 run uncompiled (a warning says so once): use a few
    fixed batch sizes.

    Attributes:
        module: the int8 model that was compiled (runs the reference kernels if called directly).
        flow: ``"pt2e"`` (static PTQ / QAT), ``"dynamic"`` (int8 activations rounded at run time, inductor) or
            ``"fbgemm"`` (eagerly, for CPUs without VNNI: one or two rows by Sampan's int8 GEMV kernel with int16
            activations, more rows by PyTorch's fbgemm int8 Linear).
        kernels: how the model runs, in words (the fbgemm flow: which kernel takes a row or two, and why). Where
            inductor fails to compile an input shape, it says so: the model is compiled again without max-autotune
            and, where that fails too, ``module`` runs uncompiled (a RuntimeWarning each time).
    """

    def __init__(self, module: nn.Module, flow: str, max_autotune: bool, kernels: str = ""):
        super().__init__()
        self.module, self.flow, self.max_autotune = module, flow, max_autotune
        self.kernels = kernels or {"pt2e": "inductor: oneDNN int8 convolutions and Linear layers",
                                   "dynamic": "inductor: int8 GEMMs"}.get(flow, "")
        self._compiled = None if flow == "fbgemm" else self._compile()
        self._shapes: set[tuple] = set()

    def _compile(self) -> Callable:
        backend = _Int8Backend(self.max_autotune)
        if self.flow == "pt2e":
            return _PerLayout(self.module, backend)
        return torch.compile(self.module, dynamic=False, backend=backend)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if self._compiled is None:  # eager int8 kernels, which have no gradients
            if not torch.is_grad_enabled():  # the context costs 2-3 us, a tenth of a layer at one row
                return self.module(*args, **kwargs)
            with torch.no_grad():
                return self.module(*args, **kwargs)
        with torch.no_grad():  # freezing folds the weights only in an inference graph
            if isinstance(self._compiled, _PerLayout):
                args = self._compiled.positional(args, kwargs)
                graph = self._compiled.graphs.get(_PerLayout.layout(args))
                return graph(*args) if graph is not None else self._compile_call(args, {})
            shapes = tuple((a.shape, a.dtype) for a in args if isinstance(a, torch.Tensor))
            if shapes in self._shapes:
                from torch._dynamo.utils import counters

                graphs = counters["stats"]["unique_graphs"]
                out = self._compiled(*args, **kwargs)
                if counters["stats"]["unique_graphs"] == graphs:
                    return out
                # it compiled after all (torch.compile's caches were reset), so without freezing: again
                self._compiled = self._compile()
            out = self._compile_call(args, kwargs)
            self._shapes.add(shapes)
            return out

    def _compile_call(self, args: tuple, kwargs: dict) -> Any:
        """A call that may compile. Dynamo reads ``freezing`` while it captures (weights as constants, not inputs);
        the patch costs ~50 us, so only calls that may compile pay it. Where inductor fails (a bug in torch:
        a lowering error, an autotuner that cannot benchmark a kernel), once more without max-autotune, then
        eagerly."""
        from torch._dynamo.exc import BackendCompilerFailed

        while self._compiled is not None:
            try:
                with torch._inductor.config.patch(freezing=True):
                    return self._compiled(*args, **kwargs)
            except (BackendCompilerFailed, _CompileFailed) as exc:
                self._fall_back(exc)
        return self.module(*args, **kwargs)  # a bug in the model itself raises here, as in eager

    def _fall_back(self, exc: Exception) -> None:
        """After inductor failed: without max-autotune if it was on, else eagerly; ``kernels`` and a warning say
        why."""
        inner = getattr(exc, "inner_exception", exc)
        targets = [line.strip() for line in str(inner).splitlines() if line.strip().startswith("target:")]
        reason = "; ".join([f"{type(inner).__name__}: {first_line(inner)}", *targets])
        if self.max_autotune:
            self.max_autotune = False
            self._compiled = self._compile()
            done = "compiled again without max-autotune"
            self.kernels = f"{self.kernels} (without max-autotune: inductor failed with it: {reason})"
        else:
            self._compiled = None
            done = "running the int8 model eagerly (Int8Compiled.module)"
            self.kernels = f"eager: Int8Compiled.module, uncompiled (inductor failed: {reason})"
        warnings.warn(f"compile_int8: inductor could not compile the {self.flow} int8 model ({reason}); {done}. "
                      "Int8Compiled.kernels records it. HINT: a newer torch may fix it; backend='fbgemm' runs "
                      "a quantize_dynamic model eagerly on fbgemm's int8 kernels.", RuntimeWarning, stacklevel=6)

    def int8_kernels(self, *example_inputs: Any) -> list[str]:
        """Compiles afresh for ``example_inputs`` and lists the int8 kernels in inductor's generated code.

        Resets ``torch.compile``'s caches (as ``sampan.jit.explain`` does). Example:
            >>> import torch
            >>> from sampan.quantization import compile_int8, quantize_dynamic
            >>> int8_net = quantize_dynamic(torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU()))
            >>> compile_int8(int8_net).int8_kernels(torch.randn(4, 64))  # doctest: +SKIP
            ['int8 micro-GEMM']
        """
        if self._compiled is None:  # eager int8 kernels: the profiler sees them
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU]) as prof:
                self.forward(*example_inputs)
            seen = {e.name for e in prof.events()}
            return [name for name, op in EAGER_OPS.items() if op in seen]
        from torch._inductor.utils import run_and_get_code

        if isinstance(self._compiled, _PerLayout):  # its own graphs would skip the compile
            self._compiled = self._compile()
        # a cache hit would skip the code generation that run_and_get_code listens to
        with torch._inductor.config.patch(fx_graph_cache=False), \
                torch._functorch.config.patch(enable_autograd_cache=False):
            _, code = run_and_get_code(self.forward, *example_inputs)
        text = "\n".join(code)
        return [name for name, pattern in INT8_KERNELS.items() if pattern.search(text)]

    def train(self, mode: bool = True) -> "Int8Compiled":
        if mode:
            raise RuntimeError("An Int8Compiled model is for inference only. HINT: train the float model "
                               "(or the QAT model) and call compile_int8 on the converted result again.")
        return super().train(False)


class _CompileFailed(Exception):
    """Inductor failed on a pt2e graph that :class:`_PerLayout` compiled (as Dynamo's ``BackendCompilerFailed``)."""

    def __init__(self, inner: Exception):
        super().__init__(f"{type(inner).__name__}: {inner}")
        self.inner_exception = inner


class _PerLayout:
    """A pt2e model compiled by inductor once per input layout and called without Dynamo.

    A pt2e model is already one captured graph, so Dynamo has nothing to capture; it only checked its ~120
    guards (every frozen weight, scale and zero point) and ran its wrappers on each call: about 0.25 ms of
    LeNet's 1.3 ms int8 call at batch 32 (AMD EPYC Zen 3, AVX2, one thread; 0.70x fp32 through Dynamo, 0.55x
    without). Inductor's code asserts the sizes and strides it was compiled for, so a graph is kept per layout
    (sizes, strides, dtype, device) of the inputs, as Dynamo's guards would recompile. As Dynamo does after its
    ``recompile_limit``, a call in a layout beyond the first ``MAX_LAYOUTS`` runs the int8 model uncompiled (a
    warning says so once): each compile costs seconds and holds its own copy of the weights."""

    MAX_LAYOUTS = 8  # torch._dynamo.config.recompile_limit's default

    def __init__(self, module: torch.fx.GraphModule, backend: "_Int8Backend"):
        self.module, self.backend = module, backend
        self.graphs: dict[tuple, Callable] = {}
        self._warned = False

    @staticmethod
    def layout(args: tuple) -> tuple:
        return tuple((a.shape, a.stride(), a.dtype, a.device) if isinstance(a, torch.Tensor) else repr(a)
                     for a in args)

    def positional(self, args: tuple, kwargs: dict) -> tuple:
        if not kwargs:
            return args
        import inspect

        return inspect.signature(self.module.forward).bind(*args, **kwargs).args

    def __call__(self, *args: Any) -> Any:
        key = self.layout(args)
        graph = self.graphs.get(key)
        if graph is not None:
            return graph(*args)
        if len(self.graphs) >= self.MAX_LAYOUTS:
            if not self._warned:
                self._warned = True
                warnings.warn(f"compile_int8: {self.MAX_LAYOUTS} input layouts (sizes, strides) compiled already; "
                              "calls in other layouts run the int8 model uncompiled (reference kernels, slower). "
                              "HINT: pad or split inputs to a few fixed batch sizes.", RuntimeWarning, stacklevel=6)
            return self.module(*args)
        try:  # a copy: inductor's passes before autograd may rewrite the graph they get in place
            graph = self.graphs[key] = self.backend(copy.deepcopy(self.module), list(args))
        except Exception as exc:  # noqa: BLE001 - any inductor failure: fall back (Int8Compiled._fall_back)
            raise _CompileFailed(exc) from exc
        return graph(*args)


class _Int8Backend:
    """Inductor with max-autotune (and freezing) switched on while it compiles, and only then: set
    inside the backend (called once per new input shape) they cost nothing per call."""

    def __init__(self, max_autotune: bool):
        self.options = {"freezing": True, "max_autotune": max_autotune, "force_fuse_int_mm_with_mul": True}

    def __call__(self, graph_module: torch.fx.GraphModule, example_inputs: list) -> Any:
        from torch._inductor.compile_fx import compile_fx

        with torch._inductor.config.patch(**self.options), warnings.catch_warnings():
            # torchao's lowering builds zero-point tensors with torch.tensor(tensor), which torch warns about
            warnings.filterwarnings("ignore", message=r"To copy construct from a tensor")
            return compile_fx(graph_module, example_inputs)


def compile_int8(model: nn.Module, *, max_autotune: bool = True, backend: str = "auto") -> Int8Compiled:
    """Compiles a quantized model onto int8 kernels (``torch.compile`` + inductor freezing).

    Args:
        model: from :func:`~sampan.quantization.quantize_dynamic`, :meth:`PTQ.convert` or
            :meth:`QAT.convert` (not modified).
        max_autotune: also try inductor's own int8 GEMM templates and keep the fastest kernel per
            layer (slower to compile: seconds per layer and input shape). A :func:`quantize_dynamic` model's Linear
            layers of at most 8 outputs then run float GEMMs on their int8-rounded weights (torch's autotuner
            fails on their int8 GEMMs); ``Int8Compiled.kernels`` names them.
        backend: for a :func:`quantize_dynamic` model, ``"inductor"`` (torchao's int8 layers compiled) or
            ``"fbgemm"`` (PyTorch's fbgemm int8 Linear, eager); ``"auto"`` takes fbgemm on a CPU without
            VNNI, where inductor has no fast int8 GEMM, and inductor elsewhere. Static models always use inductor.

    Returns:
        An :class:`Int8Compiled` module; its first call per input shape compiles.

    Raises:
        TypeError: ``model`` is not a quantized model.

    Example:
        >>> import torch
        >>> from sampan.quantization import compile_int8, quantize_dynamic
        >>> mlp = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
        >>> fast = compile_int8(quantize_dynamic(mlp))          # doctest: +SKIP
        >>> logits = fast(torch.randn(32, 64))                   # int8 GEMMs  # doctest: +SKIP
    """
    if not isinstance(model, nn.Module):
        raise TypeError(bad_argument("model", model, "a quantized torch.nn.Module"))
    if backend not in ("auto", "inductor", "fbgemm"):
        raise ValueError(bad_argument("backend", backend, "'auto', 'inductor' or 'fbgemm'"))
    if _is_pt2e(model):
        return Int8Compiled(_pool_in_int8(model).eval(), "pt2e", max_autotune)
    if any(isinstance(m, Int8Linear) for m in model.modules()):
        from sampan.quantization._pt2e import pt2e, reduce_range

        if backend == "fbgemm" or (backend == "auto" and reduce_range()):  # no VNNI: fbgemm has AVX2 int8 kernels
            module, kernels = _fbgemm_dynamic(model)
            return Int8Compiled(module, "fbgemm", max_autotune, kernels)
        # torchao's X86 quantizer module registers inductor's pattern for `_int_mm` with a constant
        # weight: prepacked int8 weights (oneDNN qlinear / the C++ micro-GEMM). Without it every call
        # reorders the weights and batch 1 ran 0.92x fp32 (0.57x with it) on the BENCHMARKS.md machine.
        pt2e()
        module, kernels = _torchao_dynamic(model, max_autotune)
        return Int8Compiled(module, "dynamic", max_autotune, kernels)
    if any(isinstance(m, Int8RNN) for m in model.modules()):
        raise TypeError(bad_argument("model", type(model).__name__, "a model with int8 Linear or convolution layers",
                                     "int8 LSTM / GRU layers have no compiled int8 kernel; use export_onnx "
                                     "or keep the reference model"))
    raise TypeError(bad_argument("model", type(model).__name__,
                                 "a model quantized by quantize_dynamic, PTQ.convert or QAT.convert",
                                 "quantize it first: compile_int8(sampan.quantization.quantize_dynamic(model))"))
