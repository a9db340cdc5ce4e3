"""Deploy a quantized model: ONNX for ONNX Runtime, in the int8 layout that runs fastest there.

An int8 model can take several forms in ONNX (``sampan/quantization/_onnx_layouts.py``), and
which one ONNX Runtime runs fastest depends on the model: int8 kernels win on large Linear layers
(the MLP of ``sampan bench compress``: 0.3-0.5x fp32), but for LeNet's 6- and 16-channel
convolutions ONNX Runtime's QLinearConv, with its NHWC transposes, is 1.8-2.5x *slower* than fp32.
:func:`export_onnx` therefore builds each candidate layout, checks it against the quantized torch
model, times it against the float graph of the same model and keeps the best (see its docstring);
:func:`layout_report` says what was chosen and why.

* A :func:`quantize_dynamic` model is exported in float through ``sampan.onnx.export`` first.
  Layers kept in float (the skip list) stay float in the ONNX file too. LSTM / GRU stay float in
  ONNX (their weights pass through reshaping ops there); they are int8 in the torch model and ``jit.save``.
* A :class:`PTQ` / :class:`QAT` model exports its QuantizeLinear / DequantizeLinear pairs, which
  the other layouts are built from.

Investigated and left out (``sampan bench compress`` machine, LeNet, batch 1 / 32, one thread):
ONNX Runtime's own static quantization in QDQ or QOperator format, U8S8 or S8S8, per-tensor or
per-channel, ran 1.7-1.9x fp32 (S8S8 QOperator 4-10x); the Q/DQ graph with the convolutions kept
float 1.5x / 2.0x.

``sampan.jit.save`` works on both kinds of quantized model unchanged (int8 weights in the ``.pt2``).
"""
from __future__ import annotations

import contextlib
import logging
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Literal, Sequence

import numpy as np
import torch
from torch import nn

from sampan.errors import bad_argument
from sampan.quantization import _onnx_layouts as layouts
from sampan.quantization.compiled import _is_pt2e
from sampan.quantization.dynamic import Int8Linear, dequantize
from sampan.utils.imports import require
from sampan.utils.io import atomic_path

Layout = Literal["auto", "qdq", "dynamic", "weight_only"]
LAYOUTS = ("auto", "qdq", "dynamic", "weight_only")
INT8_OPS = {"QLinearConv", "QGemm", "QLinearMatMul", "MatMulInteger", "DynamicQuantizeMatMul", "ConvInteger",
            "MatMulIntegerToFloat", "QLinearAdd", "QLinearGlobalAveragePool"}
MARGIN = 0.05  # an int8-kernel layout must beat fp32 by this much overall to be worth its rounding
BATCHES = (1, 32)


@contextlib.contextmanager
def _quiet_root_logger():
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # onnxruntime.quantization logs advice on the root logger
    try:
        yield
    finally:
        root.setLevel(level)


def _session(model, *, reference: bool = False, optimized: Path | None = None):
    """A one-thread CPU session on an in-memory model; ``reference`` turns ONNX Runtime's fusions off."""
    ort = require("onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3  # no warnings on stderr (serializing an NCHWc-optimized graph warns)
    if reference:  # no int8 kernel fusion: runs the Q/DQ graph exactly as torch's reference does
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if optimized is not None:
        options.optimized_model_filepath = os.fspath(optimized)
    return ort.InferenceSession(model.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"])


class _Candidate:
    """One layout: its graph, the check against torch, its session and what ONNX Runtime made of it."""

    def __init__(self, name: str, model, folder: Path):
        onnx = require("onnx")
        self.name, self.model = name, model
        optimized = folder / f"{name}.optimized.onnx"
        self.session = _session(model, optimized=optimized)
        ops = [n for n in onnx.load(os.fspath(optimized)).graph.node]
        self.kernels = sorted({n.op_type for n in ops})
        self.folded = not (layouts.cast_nodes(model) & {n.name for n in ops})
        self.ranges: dict[str, tuple[float, float]] = {}  # calibrated input ranges of a static model
        self.check: dict = {}
        self.latency: dict[int, float] = {}
        self.reason = ""

    def summary(self, fp32: dict[int, float]) -> dict:
        return {"layout": self.name, "bytes": len(self.model.SerializeToString()),
                "latency_ms": {str(b): t * 1e3 for b, t in self.latency.items()},
                "x_fp32": {str(b): t / fp32[b] for b, t in self.latency.items()},
                "kernels": self.kernels, "int8_kernels": sorted(INT8_OPS & set(self.kernels)),
                "weights_folded": self.folded, "verified": bool(self.check), "reason": self.reason,
                "max_abs_diff": self.check.get("max_abs_diff")}


def _verify(model: nn.Module, candidate: _Candidate, specs, atol: float, examples) -> dict:
    """Runs the candidate against the torch model; ``qdq`` with ONNX Runtime's fusions off, to 1e-3."""
    from sampan.jit.save_load import ExportMismatchError
    from sampan.spec import example_inputs

    if examples is not None:
        sample = tuple(examples)
    else:  # random inputs, kept inside the range a static model was calibrated to (it clips outside)
        ranges = candidate.ranges
        sample = tuple(t.clamp(*ranges[s.name]) if s.name in ranges else t
                       for s, t in zip(specs, example_inputs(specs, batch=3, seed=1)))
    with torch.no_grad():
        expected = model(*sample)
    reference = candidate.name == "qdq"  # the fused int8 kernels round differently (accuracy shows their effect)
    session = _session(candidate.model, reference=True) if reference else candidate.session
    got = session.run(None, {s.name: t.numpy() for s, t in zip(specs, sample)})[0]
    diff = float(np.abs(np.asarray(got) - expected.detach().numpy()).max())
    scale = float(expected.abs().max()) or 1.0
    allowed = (1e-3 if reference else atol) * scale
    if diff > allowed:
        raise ExportMismatchError(f"The int8 ONNX model ({candidate.name} layout) disagrees with the quantized "
                                  f"torch model by {diff:.3g} (allowed {allowed:.3g}).", format="onnx",
                                  max_abs_diff=diff)
    return {"max_abs_diff": diff, "atol": allowed, "int8": True, "reference_kernels": reference}


def _verified(candidate: _Candidate, model: nn.Module, specs, atol: float, examples, *, strict: bool) -> bool:
    """Checks the candidate against torch; a disagreement raises when ``strict``, else rejects it."""
    try:
        candidate.check = _verify(model, candidate, specs, atol, examples)
    except Exception as exc:
        if strict:
            raise
        candidate.reason = f"rejected: {exc}"
        return False
    return True


def _batches(specs) -> tuple[int, ...]:
    first = specs[0].shape[0] if specs[0].shape else 1
    return BATCHES if first is None else (int(first),)


def _time(fp32, candidates: list[_Candidate], specs) -> dict[int, float]:
    """Interleaved medians (one thread) of the float graph and each candidate at every batch size."""
    from sampan.spec import example_inputs
    from sampan.utils.timing import interleaved_for

    fp32_times = {}
    for batch in _batches(specs):
        feed = {s.name: t.numpy() for s, t in zip(specs, example_inputs(specs, batch=batch, seed=4))}
        runs = {"fp32": lambda: fp32.run(None, feed)}
        runs.update({c.name: (lambda s=c.session: s.run(None, feed)) for c in candidates})
        times = interleaved_for(runs, 0.25, rounds=(5, 60), warmup=2)  # ~0.25 s of timing per batch size
        fp32_times[batch] = times["fp32"]
        for c in candidates:
            c.latency[batch] = times[c.name]
    return fp32_times


def _overall(candidate: _Candidate, fp32: dict[int, float]) -> float:
    """Geometric mean over the timed batch sizes of latency / fp32 latency."""
    ratios = [candidate.latency[b] / fp32[b] for b in fp32]
    return math.exp(sum(map(math.log, ratios)) / len(ratios))


def _choose(candidates: list[_Candidate], fp32: dict[int, float]) -> tuple[_Candidate, str]:
    fast = [c for c in candidates if c.name != "weight_only" and _why_not_fast(c, fp32) is None]
    shown = ", ".join(f"{c.name} {_overall(c, fp32):.2f}x" for c in candidates)
    if fast:
        best = min(fast, key=lambda c: _overall(c, fp32))
        return best, f"fastest verified layout, {_overall(best, fp32):.2f}x fp32 overall (timed: {shown})"
    fallback = next((c for c in candidates if c.name == "weight_only"), None)
    if fallback is None:  # weight_only disagreed with torch (it never did): keep the fastest that did not
        best = min(candidates, key=lambda c: _overall(c, fp32))
        return best, f"the fastest verified layout, though slower than fp32 (timed: {shown})"
    folded = "ONNX Runtime folds its int8 weights at load and runs the fp32 kernels" if fallback.folded \
        else "but ONNX Runtime did NOT fold its int8 weights"
    return fallback, (f"no int8-kernel layout beats fp32 in ONNX Runtime by {MARGIN:.0%} for this model "
                      f"(timed: {shown}); weight_only keeps the file int8: {folded}")


def _why_not_fast(candidate: _Candidate, fp32: dict[int, float]) -> str | None:
    """Why an int8-kernel layout does not count as faster than fp32 (None when it does)."""
    for batch in fp32:
        if candidate.latency[batch] > fp32[batch]:
            return f"slower than fp32 at batch {batch} ({candidate.latency[batch] / fp32[batch]:.2f}x)"
    if _overall(candidate, fp32) > 1 - MARGIN:
        return f"within {MARGIN:.0%} of fp32 overall ({_overall(candidate, fp32):.2f}x): timing noise"
    return None


def _reason(candidate: _Candidate, chosen: _Candidate, why: str, fp32: dict[int, float]) -> str:
    if candidate is chosen:
        return why
    if not fp32:
        return "not requested"
    if candidate.name == "weight_only":
        return f"an int8-kernel layout is faster ({chosen.name})"
    return _why_not_fast(candidate, fp32) or f"slower than {chosen.name}"


def _linear_weights(model: nn.Module, float_model) -> set[str]:
    """Initializer names of the weights of ``model``'s Int8Linear layers in its float export (the exporter
    names them after the parameters, ``fc1.weight``, or ``fc1.weight_Transposed`` when it pre-transposes)."""
    wanted = {f"{n}.weight" for n, m in model.named_modules() if isinstance(m, Int8Linear)}
    return {i.name for i in float_model.graph.initializer if i.name.split("_Transposed")[0] in wanted}


def _check_layout(layout: Any, is_pt2e: bool) -> str:
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise ValueError(bad_argument("layout", layout, f"one of {', '.join(map(repr, LAYOUTS))}",
                                      "leave layout='auto' to time each layout and keep the fastest"))
    if layout == "qdq" and not is_pt2e:
        raise ValueError(bad_argument("layout", layout, "'auto', 'dynamic' or 'weight_only' for a "
                                      "quantize_dynamic model", "'qdq' needs static int8 activations: "
                                      "a PTQ.convert / QAT.convert model"))
    return layout


def _candidates(model: nn.Module, file: Path, is_pt2e: bool, wanted: list[str], folder: Path):
    """The float graph and every wanted layout that applies to this model."""
    onnx = require("onnx")
    exported = onnx.load(os.fspath(file))
    if is_pt2e:
        float_model, weights = layouts.float_graph_of_qdq(exported)
    else:
        float_model = exported
        weights = layouts.weights_of(float_model, _linear_weights(model, float_model))
    built = {}
    for name in wanted:
        if name == "qdq":
            built[name] = exported
        elif name == "weight_only":
            built[name] = layouts.weight_only(float_model, weights)
        else:
            with _quiet_root_logger():
                graph = layouts.dynamic(float_model, weights, folder)
            if graph is not None:
                built[name] = graph
    candidates = [_Candidate(name, graph, folder) for name, graph in built.items()]
    ranges = layouts.input_ranges(exported) if is_pt2e else {}
    for candidate in candidates:
        candidate.ranges = ranges
    return float_model, candidates


def export_onnx(model: nn.Module, path: str | os.PathLike, input_spec: Sequence[Any], *, layout: Layout = "auto",
                atol: float = 0.05, examples: Sequence[torch.Tensor] | None = None) -> Path:
    """Exports a quantized model to ``path.onnx`` in the int8 layout that ONNX Runtime runs best.

    How ``layout="auto"`` chooses: it builds every layout that applies (``qdq`` for a PTQ / QAT
    model; ``dynamic`` when int8 Linear layers exist; ``weight_only`` always), checks each against
    the quantized torch model (a layout that disagrees is dropped), and times them interleaved on
    one thread against the float graph of the same model at batch 1 and 32 (or the spec's fixed
    batch size). An int8-kernel layout (``qdq``, ``dynamic``) is kept when it is the fastest, not
    slower than fp32 at any batch size and at least 5% faster overall (geometric mean of the
    ratios): less is timing noise, and its activation rounding costs accuracy. Otherwise the
    model is written ``weight_only``: int8 weights that ONNX Runtime folds at load, so it runs at
    fp32 speed from a file about 4x smaller. :func:`layout_report` shows each candidate's
    latency and the reason; the same record is in ``path.meta.json``. Takes about a second more
    than the plain export for LeNet.

    Args:
        model: from :func:`quantize_dynamic`, :meth:`PTQ.convert` or :meth:`QAT.convert`.
        path: prefix such as ``"out/lenet_int8"`` (``.onnx`` and ``.meta.json`` are written).
        input_spec: one ``sampan.InputSpec`` per input.
        layout: ``"auto"``, or one layout to write without timing: ``"qdq"`` (ONNX Runtime fuses
            the QuantizeLinear / DequantizeLinear pairs into QLinearConv / QGemm), ``"dynamic"``
            (``MatMulInteger`` Linear layers, activations rounded per call) or ``"weight_only"``.
        atol: the allowed ONNX-vs-torch difference relative to the largest output for the
            ``dynamic`` and ``weight_only`` layouts (they round activations differently from the
            torch model). ``qdq`` is checked with ONNX Runtime's fusions off, where it must match
            torch to 1e-3.
        examples: real inputs for those checks (default: random ones from ``input_spec``; a
            statically quantized model is only accurate inside the range it was calibrated on).

    Returns:
        The ``.onnx`` path.

    Raises:
        ValueError: an unknown ``layout``, or ``"qdq"`` for a ``quantize_dynamic`` model.
        sampan.jit.ExportMismatchError: the requested layout (or every layout) disagrees with torch.

    Example:
        >>> import numpy as np, torch, sampan
        >>> from sampan.quantization import export_onnx, layout_report, quantize_dynamic
        >>> net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
        >>> spec = [sampan.InputSpec([None, 64], name="x")]
        >>> export_onnx(quantize_dynamic(net), "out/mlp_int8", spec)
        PosixPath('out/mlp_int8.onnx')
        >>> print(layout_report("out/mlp_int8"))
        int8 ONNX layouts of mlp_int8 (ONNX Runtime, one thread, timed interleaved):
          fp32 graph       b1 ... ms   b32 ... ms
        ...
        >>> x = np.random.rand(4, 64).astype("float32")
        >>> (logits,) = sampan.inference.create_predictor(sampan.inference.Config("out/mlp_int8")).run([x])
        >>> logits.shape
        (4, 10)
    """
    from sampan.jit import _artifacts as art
    from sampan.jit._specs import require_specs
    from sampan.onnx import export

    specs = require_specs(input_spec, what="export_onnx")
    model.eval()
    is_pt2e = _is_pt2e(model)
    layout = _check_layout(layout, is_pt2e)
    if is_pt2e:  # a pt2e model: its Q/DQ pairs export as they are (checked below, per layout)
        file = export(model, path, specs, verify=False)
    else:  # float export, checked exactly; the int8 layouts are built from it
        file = export(dequantize(model), path, specs)
    wanted = [layout] if layout != "auto" else (["qdq"] if is_pt2e else []) + ["dynamic", "weight_only"]
    with tempfile.TemporaryDirectory() as tmp:
        float_model, candidates = _candidates(model, file, is_pt2e, wanted, Path(tmp))
        if not candidates:
            raise ValueError(bad_argument("layout", layout, "a layout that applies to this model",
                                          "it has no int8 Linear layer for 'dynamic'; use 'weight_only' or 'auto'"))
        verified = [c for c in candidates if _verified(c, model, specs, atol, examples, strict=layout != "auto")]
        if not verified:
            from sampan.jit.save_load import ExportMismatchError
            raise ExportMismatchError("No int8 ONNX layout agrees with the quantized torch model: "
                                      + "; ".join(c.reason for c in candidates), format="onnx",
                                      max_abs_diff=float("nan"))
        if layout == "auto":
            fp32 = _time(_session(float_model), verified, specs)
            chosen, why = _choose(verified, fp32)
        else:
            fp32, chosen, why = {}, verified[0], f"requested (layout={layout!r}), not timed"
    for candidate in verified:
        candidate.reason = _reason(candidate, chosen, why, fp32)
    with atomic_path(file) as tmp:
        tmp.write_bytes(chosen.model.SerializeToString())
    record = {"chosen": chosen.name, "reason": why, "fp32_ms": {str(b): t * 1e3 for b, t in fp32.items()},
              "candidates": [c.summary(fp32) for c in candidates]}
    meta = art.read_metadata(art.prefix_of(file))
    art.record_artifact(art.prefix_of(file), "onnx", specs=specs, output_names=meta["outputs"], device="cpu",
                        check={**chosen.check, "layout": record}, weights=meta["weights"])
    return file


def layout_report(path: str | os.PathLike) -> str:
    """The int8 layouts :func:`export_onnx` weighed for ``path``: latency, ratio to fp32, kernels, reason.

    Example:
        >>> from sampan.quantization import layout_report
        >>> print(layout_report("out/lenet_int8"))  # doctest: +SKIP
        int8 ONNX layouts of lenet_int8 (ONNX Runtime, one thread, timed interleaved):
          fp32 graph       b1 0.0231 ms   b32 0.409 ms
          qdq              b1 0.0479 ms 2.07x   b32 1.17 ms 2.85x   int8 kernels: QGemm, QLinearConv
            slower than fp32 at batch 1 (2.07x)
          dynamic          b1 0.0241 ms 1.04x   b32 0.398 ms 0.97x   int8 kernels: DynamicQuantizeMatMul
            slower than fp32 at batch 1 (1.04x)
        * weight_only      b1 0.0232 ms 1.01x   b32 0.409 ms 1.00x   int8 kernels: none (fp32 kernels)
            no int8-kernel layout beats fp32 in ONNX Runtime by 5% for this model (...)
    """
    from sampan.jit import _artifacts as art

    prefix = art.prefix_of(path)
    record = art.read_metadata(prefix)["artifacts"].get("onnx", {}).get("check", {}).get("layout")
    if record is None:
        raise ValueError(bad_argument("path", os.fspath(path), "the prefix of a model written by export_onnx",
                                      "export it with sampan.quantization.export_onnx(model, path, input_spec)"))
    lines = [f"int8 ONNX layouts of {prefix.name} (ONNX Runtime, one thread, timed interleaved):"]
    if record["fp32_ms"]:
        lines.append(f"  {'fp32 graph':<16} " + "   ".join(f"b{b} {t:.3g} ms" for b, t in record["fp32_ms"].items()))
    for c in record["candidates"]:
        times = "   ".join(f"b{b} {t:.3g} ms {c['x_fp32'][b]:.2f}x" for b, t in c["latency_ms"].items()) or "not timed"
        mark = "*" if c["layout"] == record["chosen"] else " "
        int8 = ", ".join(c["int8_kernels"]) or "none (fp32 kernels)"
        lines.append(f"{mark} {c['layout']:<16} {times}   int8 kernels: {int8}")
        lines.append(f"    {c['reason']}")
    return "\n".join(lines)


class OnnxModel:
    """Runs an ONNX file in ONNX Runtime on torch tensors; for side-by-side reports.

    Example:
        >>> import torch
        >>> from sampan.quantization import OnnxModel
        >>> fast = OnnxModel("out/mlp_int8.onnx"); fast(torch.randn(1, 64)).shape  # doctest: +SKIP
        torch.Size([1, 10])
    """

    def __init__(self, path: str | os.PathLike, *, threads: int | None = None):
        from sampan.onnx.export import ort_session

        self.path = Path(path)
        self.session = ort_session(self.path, threads=threads)
        self.names = [i.name for i in self.session.get_inputs()]

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor:
        feeds = {n: t.detach().cpu().numpy() for n, t in zip(self.names, inputs)}
        return torch.from_numpy(self.session.run(None, feeds)[0])

    def size_bytes(self) -> int:
        return self.path.stat().st_size
