"""``sampan bench static``: eager vs ``to_static`` vs the exported predictor vs ONNX Runtime (CPU).

LeNet and resnet18 at batch 1 and 32, timed side by side (interleaved medians) in
one run. Compilation and export times are reported separately. ``to_static`` keeps, per input
shape, whichever of its compiled and eager paths measured faster after warm-up (column
``to_static path``), so ``eager/to_static`` stays at or above 1 within the timing noise. A second
``to_static(winograd=True)`` copy also times the frozen graph with Winograd 3 x 3 convolutions and keeps the
fastest of the three (column ``winograd path``).

Two predictors: the default one (fp32 candidates only; ``predictor/ort`` compares like with like) and
one with ``Config.enable_mkldnn_bfloat16()``, whose column ``predictor bf16 / ORT fp32`` crosses
precisions (its ``bf16 backend`` says which candidate it chose, and ``bf16 max diff`` how far its
outputs are from eager's: the largest absolute difference, and relative to the largest eager output).
On a CPU without native bf16 it refuses the bf16 candidate and runs an fp32 one. A third predictor has
``Config.enable_winograd()`` (fp32; column ``predictor winograd / ORT``, its backend in ``winograd backend``).
"""
from __future__ import annotations

import copy
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

from sampan.bench._timing import interleaved, print_table
from sampan.spec import InputSpec

BATCHES = (1, 32)


def _models() -> dict:
    from sampan.vision.models import LeNet, resnet18

    torch.manual_seed(0)
    return {
        "lenet": (LeNet().eval(), InputSpec([None, 1, 28, 28], "float32", "image")),
        "resnet18": (resnet18().eval(), InputSpec([None, 3, 224, 224], "float32", "image")),
    }


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def _prepare(name: str, net, spec: InputSpec, folder: Path, *, aoti: bool, threads: int) -> dict:
    """Compiles and exports once; returns the callables and the compile times."""
    import sampan
    from sampan.inference import Config, create_predictor
    from sampan.onnx.export import ort_session

    static = sampan.jit.to_static(copy.deepcopy(net), input_spec=[spec])
    static_winograd = sampan.jit.to_static(copy.deepcopy(net), input_spec=[spec], winograd=True)
    prefix = folder / name
    compile_s = {}
    _, compile_s["jit.save pt2"] = _timed(lambda: sampan.jit.save(net, prefix, input_spec=[spec]))
    if aoti:
        _, compile_s["jit.save aoti"] = _timed(lambda: sampan.jit.save(net, prefix, input_spec=[spec], format="aoti"))
    _, compile_s["onnx.export"] = _timed(lambda: sampan.onnx.export(net, prefix, input_spec=[spec]))
    predictors = {}
    for kind, enable in (("", None), (" bf16", Config.enable_mkldnn_bfloat16), (" winograd", Config.enable_winograd)):
        config = Config(prefix)
        config.set_cpu_math_library_num_threads(threads)
        if enable is not None:
            enable(config)
        predictors[kind], compile_s[f"create_predictor{kind}"] = _timed(lambda: create_predictor(config))
        if enable is not None:
            print(predictors[kind].report(), file=sys.stderr, flush=True)
    session = ort_session(f"{prefix}.onnx", threads=threads)
    return {"static": static, "static_winograd": static_winograd, "predictor": predictors[""],
            "predictor_bf16": predictors[" bf16"], "predictor_winograd": predictors[" winograd"], "session": session,
            "compile_s": compile_s}


def _row(name: str, batch: int, net, spec: InputSpec, parts: dict, repeat: int) -> dict:
    x = spec.example(batch=batch)
    xn = x.numpy()
    static, predictor, session = parts["static"], parts["predictor"], parts["session"]
    predictor_bf16 = parts["predictor_bf16"]
    with torch.inference_mode():
        _, first_call = _timed(lambda: static(x))  # compiles for this size range (1, 2..15, 16+)
        parts["static_winograd"](x)
        parts["static_winograd"](x)  # the second call compiles the Winograd variant and chooses
        eager_out = net(x).numpy()
        bf16_out = predictor_bf16.run([xn])[0]  # compiles the bf16 graph for this size range, if chosen
        parts["predictor_winograd"].run([xn])    # likewise
        times = interleaved({
            "eager": lambda: net(x),
            "to_static": lambda: static(x),
            "to_static winograd": lambda: parts["static_winograd"](x),
            "predictor": lambda: predictor.run([xn]),
            "predictor bf16": lambda: predictor_bf16.run([xn]),
            "predictor winograd": lambda: parts["predictor_winograd"].run([xn]),
            "onnxruntime": lambda: session.run(None, {spec.name: xn}),
        }, repeat=repeat, warmup=2)
    bf16_diff = float(abs(bf16_out - eager_out).max())
    return {
        "model": name, "batch": batch,
        **{f"{k} ms": v * 1e3 for k, v in times.items()},
        "eager/to_static": times["eager"] / times["to_static"],
        "eager/to_static winograd": times["eager"] / times["to_static winograd"],
        "winograd path": _path(parts["static_winograd"], x),
        "eager/predictor": times["eager"] / times["predictor"],
        "predictor/ort": times["predictor"] / times["onnxruntime"],
        "predictor backend": _backend(predictor),
        "predictor bf16 / ORT fp32": times["predictor bf16"] / times["onnxruntime"],
        "bf16 backend": f"{predictor_bf16.backend} ({predictor_bf16.precision})",
        "bf16 max diff": f"{bf16_diff:.2g} ({bf16_diff / float(abs(eager_out).max()):.1e} rel)",
        "predictor winograd / ORT": times["predictor winograd"] / times["onnxruntime"],
        "winograd backend": _backend(parts["predictor_winograd"]),
        "to_static path": _path(static, x),
        "to_static compile s": first_call,
    }


def _backend(predictor) -> str:
    """The predictor's backend; for ``inductor-winograd``, with what computes its convolutions (Winograd F(4x4),
    AMX bf16x3) at batch 1."""
    from sampan.inference import winograd

    if predictor.backend != winograd.NAME:
        return predictor.backend
    return f"{predictor.backend} ({winograd.describe(predictor.winograd_convolutions)} at batch 1)"


def _path(static, x: torch.Tensor) -> str:
    """The path to_static kept for this input shape (measured after warm-up), as ``sampan.jit.explain`` shows it."""
    for key, choice in static.forward.choices.items():
        if key and key[0][0] == tuple(x.shape):
            return choice.kept
    return "compiled"


def run(quick: bool = False, threads: int | None = None) -> dict:
    """Measures and prints the table; returns ``{"rows": [...], "compile_s": {...}, "threads": n}``.

    ``quick`` skips the AOTInductor package (minutes to compile resnet18 on 2 cores) and repeats less.
    ``threads`` (default ``$SAMPAN_BENCH_THREADS`` or torch's setting) is used by torch and ONNX Runtime
    alike; on a busy machine 1 thread avoids OpenMP oversubscription stalls.
    """
    threads = threads or int(os.environ.get("SAMPAN_BENCH_THREADS", "0")) or torch.get_num_threads()
    torch.set_num_threads(threads)
    rows, compile_s = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (net, spec) in _models().items():
            print(f"static: exporting {name} (pt2{', aoti' if not quick else ''}, onnx)...", file=sys.stderr, flush=True)
            parts = _prepare(name, net, spec, Path(tmp), aoti=not quick, threads=threads)
            compile_s[name] = parts["compile_s"]
            for batch in BATCHES:
                print(f"static: timing {name} at batch {batch}...", file=sys.stderr, flush=True)
                if name == "lenet":  # calls of tens of microseconds: many rounds for a stable median
                    repeat = 50 if quick else 200
                else:
                    repeat = (5 if quick else 20) if batch == 1 else (3 if quick else 10)
                rows.append(_row(name, batch, net, spec, parts, repeat))
    columns = ["model", "batch", "eager ms", "to_static ms", "predictor ms", "onnxruntime ms", "eager/to_static",
               "to_static path", "to_static winograd ms", "eager/to_static winograd", "winograd path",
               "eager/predictor", "predictor/ort", "predictor backend", "predictor bf16 ms",
               "predictor bf16 / ORT fp32", "bf16 backend", "bf16 max diff", "predictor winograd ms",
               "predictor winograd / ORT", "winograd backend"]
    print_table(f"static: eager vs to_static vs predictor vs ONNX Runtime (CPU, {torch.get_num_threads()} threads)",
                rows, columns)
    compile_rows = [{"model": m, **{k: v for k, v in c.items()},
                     **{f"to_static b{r['batch']}": r["to_static compile s"] for r in rows if r["model"] == m}}
                    for m, c in compile_s.items()]
    print_table("static: compile and export times (s)", compile_rows,
                sorted({k for r in compile_rows for k in r}, key=lambda k: (k != "model", k)))
    return {"rows": rows, "compile_s": compile_s, "threads": torch.get_num_threads()}
