"""``torch.onnx.export(dynamo=True)`` with dynamic axes from ``InputSpec``, checked in ONNX Runtime."""
from __future__ import annotations

import contextlib
import io
import os
import threading
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import nn

from sampan.errors import SampanError, UnsafeFileError, bad_argument, first_line
from sampan.jit import _artifacts as art
from sampan.jit._specs import (export_dynamic_shapes, flatten_outputs, prepare_examples, run_on_examples,
                               specs_or_static)
from sampan.jit._specs import output_names as output_names_for
from sampan.jit.save_load import (ExportMismatchError, _check_outputs, check_layer, check_path, eager_forward,
                                  verify_sample)
from sampan.spec import InputSpec
from sampan.utils.imports import require
from sampan.utils.io import atomic_path
from sampan.utils.modes import eval_mode


def ort_session(path: str | os.PathLike, *, threads: int | None = None, providers: Sequence[str] | None = None):
    """An ``onnxruntime.InferenceSession`` on ``path`` (CPU unless ``providers`` says otherwise).

    Its settings are the ones given here, never the model's own (:func:`refuse_model_config`)."""
    ort = require("onnxruntime")
    refuse_model_config(path)
    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = int(threads)
    return ort.InferenceSession(os.fspath(path), sess_options=options,
                                providers=list(providers or ["CPUExecutionProvider"]))


_MODEL_CONFIG_SWITCH = "ORT_LOAD_CONFIG_FROM_MODEL"


def refuse_model_config(path: str | os.PathLike) -> None:
    """Refuses a model that carries ONNX Runtime session settings while ONNX Runtime would apply them.

    With ``ORT_LOAD_CONFIG_FROM_MODEL=1`` in the environment, ONNX Runtime reads the ``ort_config`` entry of the
    model's metadata and applies its ``session_options`` over the caller's: a model from someone else would turn on
    profiling (ONNX Runtime then writes ``onnxruntime_profile_*.json`` into the current folder, outside the
    model's) and pick the session's thread counts. ONNX Runtime has no switch to ignore the entry short of the
    variable (asking it not to read the model's config while the variable is set is an error), so such a file is
    refused. The model is parsed only while the variable is set."""
    if os.environ.get(_MODEL_CONFIG_SWITCH) != "1":
        return
    onnx = require("onnx")
    model = onnx.load(os.fspath(path), load_external_data=False)
    if any(prop.key == "ort_config" for prop in model.metadata_props):
        raise UnsafeFileError(
            f"Refusing {os.fspath(path)!r}: its metadata holds ONNX Runtime session settings ('ort_config'), which "
            f"ONNX Runtime applies because {_MODEL_CONFIG_SWITCH}=1 is set; they can write profiling files outside "
            f"the model's folder. HINT: unset {_MODEL_CONFIG_SWITCH} (Sampan sets the session's options itself), "
            "or ask for the model without that entry.", path=os.fspath(path), entry="ort_config")


def export(layer: nn.Module, path: str | os.PathLike, input_spec: Sequence[InputSpec] | None = None, *,
           output_names: Sequence[str] | None = None, opset_version: int | None = None,
           examples: torch.Tensor | Sequence[torch.Tensor] | None = None, verify: bool = True, rtol: float = 1e-4,
           atol: float = 1e-4, quiet: bool = True) -> Path:
    """Exports ``layer`` to ``path.onnx`` and checks it in ONNX Runtime against eager.

    Calls ``torch.onnx.export(..., dynamo=True)``; ``None`` dims of the ``InputSpec`` become
    dynamic axes. The file is then run in ONNX Runtime on a batch size other than the traced
    one and compared with eager (guarding against silent export bugs such as pytorch#169178);
    a disagreement raises :class:`sampan.jit.ExportMismatchError`. The check and the input
    specs go in ``path.meta.json`` so that ``sampan.inference`` can serve the file. In-place ``Hardswish`` and
    ``Hardsigmoid`` layers (MobileNetV3's) are traced out of place, a fifth faster for MobileNetV3; should the check
    find that this changed the result, the layer is exported again as it computes.

    Args:
        layer: the network (exported in ``eval()`` mode; a ``to_static`` one from its Python ``forward``), or a
            ``torch.export.ExportedProgram``.
        path: ``"out/lenet"`` or ``"out/lenet.onnx"``.
        input_spec: one ``sampan.InputSpec`` per input. Default: the ``input_spec`` given to ``to_static``
            for ``layer``.
        output_names: names of the outputs in the ONNX graph, one per tensor returned (nested tuples and dicts
            flattened; default ``output_0``, ...).
        opset_version: ONNX opset (default: torch's choice).
        examples: inputs to trace with, a tensor or one per input (default: random tensors from the specs, batch
            2 and 8 along other dynamic dims); the check runs at the examples' sizes, one more along the batch.

    Example:
        >>> import sampan
        >>> net = sampan.vision.models.LeNet()
        >>> sampan.onnx.export(net, "out/lenet", input_spec=[sampan.InputSpec([None, 1, 28, 28], name="image")])  # doctest: +SKIP
        PosixPath('out/lenet.onnx')
    """
    check_path(path, fix="pass the prefix of the files, e.g. 'out/lenet' (writes out/lenet.onnx and "
               "out/lenet.meta.json)")
    if not isinstance(layer, torch.export.ExportedProgram):
        check_layer(layer)
    _check_opset(opset_version)
    specs = specs_or_static(input_spec, layer, what="sampan.onnx.export")
    require("onnxscript")
    require("onnx")
    prefix = art.prefix_of(path)
    file = art.artifact_path(prefix, "onnx")
    file.parent.mkdir(parents=True, exist_ok=True)
    examples = prepare_examples(specs, examples)
    shapes = [list(e.shape) for e in examples]
    if isinstance(layer, torch.export.ExportedProgram):  # already exported: convert it as it is
        reference = layer.module()
        with torch.no_grad():
            names = output_names_for(output_names, len(flatten_outputs(reference(*examples))))
        _export_file(layer, examples, specs, names, file, opset_version, quiet)
        check = _verify(reference, file, specs, shapes, rtol, atol) if verify else {}
        art.record_artifact(prefix, "onnx", specs=specs, output_names=names, device="cpu", check=check,
                            weights=art.weights_digest(reference), example_shapes=shapes)
        return file
    with eager_forward(layer):
        with eval_mode(layer):
            with torch.no_grad():
                n_out = len(flatten_outputs(run_on_examples(layer, specs, examples)))
            names = output_names_for(output_names, n_out)
            with _activations_out_of_place(layer, enabled=verify) as changed:
                _export_file(layer, examples, specs, names, file, opset_version, quiet)
            try:
                check = _verify(layer, file, specs, shapes, rtol, atol) if verify else {}
            except ExportMismatchError:
                if not changed:
                    raise
                # the network reads an activation's input again after the activation overwrote it: export it as
                # it computes, in place
                _export_file(layer, examples, specs, names, file, opset_version, quiet)
                check = _verify(layer, file, specs, shapes, rtol, atol)
            weights = art.weights_digest(layer)
    art.record_artifact(prefix, "onnx", specs=specs, output_names=names, device="cpu", check=check,
                        weights=weights, example_shapes=shapes)
    return file


# In-place activations that the export decomposes slowly: ``torch.onnx.export`` decomposes ``hardswish_`` and
# ``hardsigmoid_`` (not their out-of-place forms, which ONNX has) under symbolic shapes, ~0.15 CPU-seconds a layer on an
# AVX2 EPYC: half of exporting torchvision's MobileNetV3, whose every block has ``Hardswish(inplace=True)``.
_SLOW_IN_PLACE = (nn.Hardswish, nn.Hardsigmoid)


@contextlib.contextmanager
def _activations_out_of_place(layer: nn.Module, *, enabled: bool = True):
    """While it is open, the in-place activations of :data:`_SLOW_IN_PLACE` in ``layer`` compute out of place (the
    same values, unless the network reads an activation's input again afterwards: the check against eager, run
    after, tells); yields whether it changed any. Their flags are put back on exit, even on error."""
    changed = [m for m in layer.modules() if isinstance(m, _SLOW_IN_PLACE) and m.inplace is True] if enabled else []
    for module in changed:
        module.inplace = False
    try:
        yield bool(changed)
    finally:
        for module in changed:
            module.inplace = True


_TORCHLIB: dict[tuple, object] = {}  # (opset version, the ops torch has) -> the registry torchlib filled
_TORCHLIB_LOCK = threading.Lock()  # one export at a time swaps torch's from_torchlib (threads exporting at once)


@contextlib.contextmanager
def _torchlib_registry_once():
    """While it is open, ``torch.onnx.export`` gets a copy of a registry of torchlib's ONNX functions built once
    instead of building it again: it builds it on every call (``ONNXRegistry.from_torchlib`` reads and parses the
    source of some 540 onnxscript functions), 0.5-1.4 CPU-seconds, half of what exporting LeNet costs.

    The registry holds a function only for the ops torch has when it is built (the quantized ones appear when
    ``torch.ao.quantization`` is imported), so one is built for each set of registered ops (the first export of a
    process registers ~60 as it imports the exporter's modules: the second builds it again). Each export gets its
    own copy of the lists, so what one adds (a custom translation) never reaches another. Where torch's internals
    differ from torch 2.14's, the export builds its registry itself, as before. Exports in other threads wait: each
    would otherwise save the other's replacement as torch's own and put it back."""
    with _TORCHLIB_LOCK:
        try:
            from torch.onnx._internal.exporter import _registration
            registry_class = _registration.ONNXRegistry
            build = registry_class.__dict__["from_torchlib"]
            assert isinstance(build, classmethod) and isinstance(getattr(registry_class(), "functions", None), dict)
            default_opset = _registration._constants.TORCHLIB_OPSET
            ops = hash(tuple(sorted(torch._C._dispatch_get_all_op_names())))
        except (ImportError, AttributeError, KeyError, AssertionError):
            yield
            return

        def from_torchlib(cls, opset_version=default_opset):
            key = (opset_version, ops)
            if key not in _TORCHLIB:
                _TORCHLIB.clear()  # only the newest is asked for again: ops are added, seldom taken away
                _TORCHLIB[key] = build.__func__(cls, opset_version)
            built, registry = _TORCHLIB[key], cls()
            registry.__dict__.update(built.__dict__)
            registry.functions = {target: list(metas) for target, metas in built.functions.items()}
            return registry

        registry_class.from_torchlib = classmethod(from_torchlib)
        try:
            yield
        finally:
            registry_class.from_torchlib = build


_OPSET_FIX = "leave opset_version out (torch's choice), or pass 18 or more"


def _check_opset(opset_version) -> None:
    """Refuses an ``opset_version`` that is not an int (``"17"``), or is below 7 or above what ``onnx`` knows."""
    if opset_version is None:
        return
    if isinstance(opset_version, bool) or not isinstance(opset_version, int):
        raise TypeError(bad_argument("opset_version", opset_version, "an int such as 18, or None", _OPSET_FIX))
    newest = require("onnx").defs.onnx_opset_version()
    if not 7 <= opset_version <= newest:
        raise ValueError(bad_argument("opset_version", opset_version, f"an ONNX opset from 7 to {newest}", _OPSET_FIX))


def _written_opset(path: Path) -> int | None:
    """The default-domain opset of the ONNX file at ``path`` (None if it declares none)."""
    model = require("onnx").load(os.fspath(path), load_external_data=False)
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def _export_file(layer, examples, specs, names, file: Path, opset_version, quiet: bool) -> None:
    sink = io.StringIO()
    redirect = contextlib.redirect_stdout(sink) if quiet else contextlib.nullcontext()
    with atomic_path(file) as tmp:
        onnx_file = tmp.with_suffix(".onnx")
        try:
            try:
                with redirect, _torchlib_registry_once():
                    program = isinstance(layer, torch.export.ExportedProgram)
                    torch.onnx.export(layer, examples, os.fspath(onnx_file), dynamo=True, external_data=False,
                                      dynamic_shapes=None if program else export_dynamic_shapes(specs),
                                      input_names=[s.name for s in specs],
                                      output_names=names, opset_version=opset_version)
            except Exception as exc:
                raise SampanError(f"torch.onnx.export could not export {type(layer).__name__}: {first_line(exc)}\n"
                                  "HINT: check that torch.export works first (sampan.jit.save), and "
                                  "sampan.jit.explain for graph breaks.") from exc
            if opset_version is not None:  # torch keeps its own opset when it cannot convert: refuse, write nothing
                written = _written_opset(onnx_file)
                if written != opset_version:
                    raise ValueError(bad_argument(
                        "opset_version", opset_version, f"an opset torch.onnx.export can convert this model to (it "
                        f"could not, and kept opset {written})", _OPSET_FIX))
            onnx_file.replace(tmp)
        finally:
            onnx_file.unlink(missing_ok=True)


def _verify(layer: nn.Module, file: Path, specs: list[InputSpec], shapes: list[list[int]], rtol: float,
            atol: float) -> dict:
    sample = verify_sample(specs, shapes)
    with torch.no_grad():
        expected = layer(*sample)
    session = ort_session(file)
    got = session.run(None, {s.name: t.numpy() for s, t in zip(specs, sample)})
    return _check_outputs("onnx", [torch.from_numpy(np.asarray(g)) for g in got], flatten_outputs(expected),
                          rtol=rtol, atol=atol)
