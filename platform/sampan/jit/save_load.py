"""``sampan.jit.save`` / ``load``: ``torch.export`` (and AOTInductor) programs with their input specs."""
from __future__ import annotations

import contextlib
import inspect
import os
import types
from pathlib import Path
from typing import Any, Literal, Sequence

import torch
from torch import nn

from sampan.errors import CheckpointError, SampanError, bad_argument, first_line
from sampan.jit import _artifacts as art
from sampan.jit import _safety
from sampan.jit._specs import (allclose, check_inputs, example_inputs, export_dynamic_shapes, flatten_outputs,
                               max_abs_diff, prepare_examples, run_on_examples, specs_or_static)
from sampan.jit._specs import output_names as checked_output_names
from sampan.jit.to_static import StaticFunction
from sampan.spec import InputSpec
from sampan.utils.modes import eval_mode


class ExportMismatchError(SampanError):
    """An exported artifact gives different outputs than the eager model.

    Attributes:
        format: ``"pt2"``, ``"aoti"`` or ``"onnx"``.
        max_abs_diff: the largest absolute difference found.
    """

    def __init__(self, message: str, *, format: str, max_abs_diff: float):
        super().__init__(message)
        self.format, self.max_abs_diff = format, max_abs_diff


def check_layer(layer: Any, name: str = "layer") -> None:
    """Raises a TypeError naming ``layer`` unless it is an ``nn.Module`` instance, with the fix for the usual
    mix-ups: a ``sampan.Model`` (its ``.network`` is exported), a layer class (an instance is), a function."""
    if isinstance(layer, nn.Module):
        return
    if isinstance(getattr(layer, "network", None), nn.Module):
        fix = f"export the network inside it: pass {name}=model.network"
    elif isinstance(layer, type) and issubclass(layer, nn.Module):
        fix = f"create the network first: pass {name}={layer.__name__}(...), an instance, not the class"
    else:
        fix = "wrap a function in an nn.Module to export it"
    raise TypeError(bad_argument(name, layer, "an nn.Module (an instance of the network)", fix))


def check_path(path: Any, *, fix: str) -> None:
    """Raises a TypeError naming ``path`` unless it is a ``str`` or ``os.PathLike`` (``None`` included)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(bad_argument("path", path, "a path prefix (str or os.PathLike)", fix))


_PATH_FIX = "pass the prefix of the files, e.g. 'out/lenet' (writes out/lenet.pt2 and out/lenet.meta.json)"


@contextlib.contextmanager
def eager_forward(layer: nn.Module):
    """Temporarily removes a ``to_static`` wrapper: export traces the Python ``forward``.

    Both kinds: ``to_static(layer)`` (a wrapper on the layer, taken off) and ``@to_static`` on the class's
    ``forward`` (the undecorated function is bound on the layer for the block, shadowing the class's)."""
    check_layer(layer)
    own = layer.__dict__.get("forward")
    own = own if isinstance(own, StaticFunction) else None
    decorated = inspect.getattr_static(type(layer), "forward", None)
    decorated = decorated if isinstance(decorated, StaticFunction) else None
    if own is None and decorated is None:
        yield layer
        return
    if own is not None:
        del layer.forward
    if decorated is not None:
        layer.__dict__["forward"] = types.MethodType(decorated.original, layer)
    try:
        yield layer
    finally:
        layer.__dict__.pop("forward", None)
        if own is not None:
            layer.forward = own


def export_program(layer: nn.Module, specs: list[InputSpec], examples: tuple) -> torch.export.ExportedProgram:
    """``torch.export.export`` with ``Dim.DYNAMIC`` for every ``None`` dimension, explained on failure."""
    try:
        return torch.export.export(layer, examples, dynamic_shapes=export_dynamic_shapes(specs), strict=False)
    except Exception as exc:
        text = str(exc)
        fixed = any(word in text.lower() for word in ("specializ", "constraint", "conflicts between"))
        hint = ("a dimension marked None in the InputSpec is fixed by the model (e.g. a view to a constant size); "
                "make it static in the InputSpec" if fixed
                else "run sampan.jit.explain(layer, *examples) to find graph breaks, and fix them")
        # torch says which dimension, and why, below its first line
        detail = text.strip().split("\n", 1)[1].strip() if fixed and "\n" in text.strip() else ""
        if detail:
            detail = "\ntorch.export said:\n" + (detail if len(detail) <= _DETAIL else detail[:_DETAIL] + " [...]")
        raise SampanError(f"torch.export could not capture {type(layer).__name__} as one graph: {first_line(exc)}\n"
                          f"HINT: {hint}.{detail}") from exc


_DETAIL = 3000  # characters of torch's own explanation kept in the message


def _check_outputs(fmt: str, got: Any, expected: Any, *, rtol: float, atol: float) -> dict:
    diff = max_abs_diff(got, expected)
    if not allclose(got, expected, rtol=rtol, atol=atol):
        raise ExportMismatchError(
            f"The exported {fmt} model disagrees with eager by up to {diff:.3g} (rtol={rtol}, atol={atol}). "
            "HINT: the export is not trustworthy; report the model, or export another format.",
            format=fmt, max_abs_diff=diff)
    return {"max_abs_diff": diff, "rtol": rtol, "atol": atol}


def _aoti_package(program: torch.export.ExportedProgram, path: Path, device: str) -> None:
    from sampan.utils.io import atomic_path

    with atomic_path(path, keep_suffix=True) as tmp:  # a name ending in .pt2, as the packager wants
        tmp.unlink()  # the packager refuses to overwrite
        torch._inductor.aoti_compile_and_package(program, package_path=os.fspath(tmp))


def save(layer: nn.Module, path: str | os.PathLike, input_spec: Sequence[InputSpec] | None = None, *,
         format: Literal["pt2", "aoti"] = "pt2", output_names: Sequence[str] | None = None,
         examples: torch.Tensor | Sequence[torch.Tensor] | None = None, verify: bool = True, rtol: float = 1e-4,
         atol: float = 1e-4, device: str | None = None) -> Path:
    """Exports ``layer`` for deployment (``paddle.jit.save``): ``torch.export`` with dynamic dims.

    Writes ``path.pt2`` (``format="pt2"``, ``torch.export.save``) or ``path.aoti.pt2``
    (``format="aoti"``, ``torch._inductor.aoti_compile_and_package``, compiled for this CPU,
    or the GPU when ``device="cuda"``), and ``path.meta.json`` with the input specs, output
    names, the examples' shapes, versions and checksums. With ``verify`` the artifact is run on a batch size
    other than the example's (other dynamic dims at the example's sizes) and compared with eager.
    A layer whose ``forward`` was compiled by ``to_static`` (on the layer, or ``@to_static`` on its class's
    ``forward``) is exported from its Python ``forward``.

    Args:
        layer: the network (put in ``eval()`` mode for export), or a ``torch.export.ExportedProgram``.
        path: prefix, e.g. ``"out/lenet"`` (a ``.pt2`` suffix is stripped).
        input_spec: one ``sampan.InputSpec`` per input; ``None`` dims stay dynamic. Default: the
            ``input_spec`` given to ``to_static`` for ``layer`` (as Paddle does).
        format: ``"pt2"`` or ``"aoti"``.
        output_names: names for the outputs, one per tensor returned (nested tuples and dicts flattened;
            default ``output_0``, ...).
        examples: inputs to trace with, a tensor or one per input (default: random tensors from the specs,
            batch 2 and 8 along other dynamic dims; pass examples when the network needs other sizes, e.g. an
            image large enough for its convolutions). A dynamic dimension of size 1 is doubled, since
            ``torch.export`` would fix it to 1.

    Returns:
        The path of the written artifact.

    Example:
        >>> import sampan
        >>> net = sampan.vision.models.LeNet()
        >>> sampan.jit.save(net, "out/lenet", input_spec=[sampan.InputSpec([None, 1, 28, 28], name="image")])
        PosixPath('out/lenet.pt2')
    """
    if format not in ("pt2", "aoti"):
        raise ValueError(bad_argument("format", format, "'pt2' or 'aoti'", "use sampan.onnx.export for ONNX"))
    check_path(path, fix=_PATH_FIX)
    if not isinstance(layer, torch.export.ExportedProgram):
        check_layer(layer)  # before the specs: a to_static function would otherwise be told input_spec is missing
    specs = specs_or_static(input_spec, layer, what="sampan.jit.save")
    device = device or ("cuda" if format == "aoti" and torch.cuda.is_available() else "cpu")
    if isinstance(layer, torch.export.ExportedProgram):  # already exported: package it as it is
        return _save(layer.module(), art.prefix_of(path), specs, format, output_names, examples, verify, rtol,
                     atol, device, program=layer)
    with eager_forward(layer), eval_mode(layer):
        return _save(layer, art.prefix_of(path), specs, format, output_names, examples, verify, rtol, atol, device)


def _save(layer, prefix, specs, fmt, output_names, examples, verify, rtol, atol, device, program=None) -> Path:
    """Exports on ``device``; the caller's layer goes back to its own device afterwards (``Module.to`` moves in
    place, and a model still being trained on the GPU must not end up on the CPU because it was saved)."""
    home = next((t.device for t in (*layer.parameters(), *layer.buffers())), None)
    try:
        return _save_on(layer.to(device), prefix, specs, fmt, output_names, examples, verify, rtol, atol, device,
                        program)
    finally:
        if home is not None:
            layer.to(home)


def _save_on(layer, prefix, specs, fmt, output_names, examples, verify, rtol, atol, device, program) -> Path:
    examples = tuple(e.to(device) for e in prepare_examples(specs, examples))
    with torch.no_grad():
        outputs = flatten_outputs(run_on_examples(layer, specs, examples))  # names spec and layer on failure
    names = checked_output_names(output_names, len(outputs))
    program = program if program is not None else export_program(layer, specs, examples)
    file = art.artifact_path(prefix, fmt)
    file.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "pt2":
        from sampan.utils.io import atomic_path

        with atomic_path(file, keep_suffix=True) as tmp:  # torch.export.save warns about a name not ending in .pt2
            torch.export.save(program, tmp)
    else:
        _aoti_package(program, file, device)
        _safety.trust_aoti(art.sha256(file))  # compiled here, by this user: sampan.jit.load may open it
    shapes = [list(e.shape) for e in examples]
    check: dict[str, Any] = {}
    if verify:
        sample = tuple(e.to(device) for e in verify_sample(specs, shapes))
        with torch.no_grad():
            expected = layer(*sample)
        loaded = _load_runner(file, fmt, device)
        check = _check_outputs(fmt, loaded(*sample), expected, rtol=rtol, atol=atol)
    art.record_artifact(prefix, fmt, specs=specs, output_names=names, device=device, check=check,
                        weights=art.weights_digest(layer), example_shapes=shapes)
    return file


def verify_sample(specs: list[InputSpec], shapes: list[list[int]]) -> tuple[torch.Tensor, ...]:
    """Inputs to check an artifact on: one more along a dynamic batch than the traced ``shapes``, the traced
    sizes along the other dynamic dimensions (the network may need them, e.g. convolutions on large images)."""
    batch = next((shape[0] + 1 for spec, shape in zip(specs, shapes) if 0 in spec.dynamic_dims), 3)
    return example_inputs(specs, batch=batch, seed=1, like=shapes)


def _load_runner(file: Path, fmt: str, device: str):
    if fmt == "pt2":
        program = _safety.load_pt2(file)
        module = program.module()
        return module.to(device) if device != "cpu" else module
    return torch._inductor.aoti_load_package(os.fspath(file))


class LoadedProgram(nn.Module):
    """An exported model loaded back (``paddle.jit.TranslatedLayer``); checks inputs against its specs.

    Attributes:
        input_spec: the saved ``InputSpec`` list.
        output_names: the saved output names.
        format: ``"pt2"`` or ``"aoti"``.
        metadata: the parsed metadata file.
    """

    def __init__(self, runner, *, specs: list[InputSpec], output_names: list[str], fmt: str, meta: dict,
                 path: Path):
        super().__init__()
        if isinstance(runner, nn.Module):
            self.program = runner  # registered: .to(), .parameters() and state_dict() see the weights
        self.__dict__["_runner"] = runner
        self.input_spec = specs
        self.output_names = output_names
        self.format = fmt
        self.metadata = {k: v for k, v in meta.items() if not k.startswith("_")}
        self.path = path

    def forward(self, *inputs: torch.Tensor) -> Any:
        for i, value in enumerate(inputs):
            if not isinstance(value, torch.Tensor):
                _not_a_tensor(i, value, self.input_spec)
        check_inputs(self.input_spec, inputs)
        return self._runner(*inputs)

    def train(self, mode: bool = True) -> "LoadedProgram":
        """Sets ``training`` only, so ``loaded.eval()`` and ``sampan.Model(loaded)`` work as with any module.

        The exported graph is fixed: it runs as it was exported (in eval mode: dropout off, batch-norm
        running statistics) whatever the mode; torch.export's module itself refuses ``train()`` and
        ``eval()``.
        """
        if not isinstance(mode, bool):
            raise ValueError(bad_argument("mode", mode, "a bool", "call loaded.train() or loaded.eval()"))
        self.training = mode
        return self

    def extra_repr(self) -> str:
        specs = ", ".join(f"{s.name}: {s.to_list()} {s.dtype}" for s in self.input_spec)
        return f"format={self.format!r}, path={os.fspath(self.path)!r}, inputs=[{specs}]"


def _not_a_tensor(index: int, value: Any, specs: list[InputSpec]) -> None:
    """Raises the TypeError for a loaded program's input that is not a tensor (a NumPy array would otherwise fail
    deep in the program, a list be taken for a rank-0 input)."""
    spec = specs[index] if index < len(specs) else None
    what = f"a torch.Tensor for input {spec.name!r} ({spec.to_list()} {spec.dtype})" if spec else "a torch.Tensor"
    if isinstance(value, (list, tuple)):
        fix = "pass one tensor per input as separate arguments: loaded(x) or loaded(*inputs)"
    elif hasattr(value, "__array__"):
        fix = "convert it with torch.from_numpy(x) (or serve NumPy arrays with sampan.inference.create_predictor)"
    else:
        fix = f"pass torch.as_tensor(x, dtype=torch.{spec.dtype if spec else 'float32'})"
    kind = f"{type(value).__module__}.{type(value).__name__}"
    shown = (f"a {kind} of shape {list(value.shape)}" if hasattr(value, "shape")
             else f"a {type(value).__name__} of {len(value)} item(s)" if isinstance(value, (list, tuple)) else value)
    raise TypeError(bad_argument(f"inputs[{index}]", shown, what, fix))


def load(path: str | os.PathLike, *, format: Literal["pt2", "aoti"] | None = None,
         device: str | None = None) -> LoadedProgram:
    """Loads what :func:`save` wrote (``paddle.jit.load``) as a callable module that checks its inputs.

    Calls ``torch.export.load`` (``.pt2``) or ``torch._inductor.aoti_load_package`` (``.aoti.pt2``).
    Checks the metadata, the file's checksum and the torch version first.

    Args:
        path: the prefix given to ``save`` (suffixes are accepted too).
        format: which artifact; default: the one named by ``path``'s suffix, else ``"pt2"``,
            else ``"aoti"``.

    Example:
        >>> import sampan
        >>> net = sampan.jit.load("out/lenet")        # doctest: +SKIP
        >>> net(torch.randn(7, 1, 28, 28)).shape      # doctest: +SKIP
        torch.Size([7, 10])
    """
    check_path(path, fix="pass the prefix given to sampan.jit.save, e.g. 'out/lenet'")
    prefix = art.prefix_of(path)
    meta = read_export_metadata(path, prefix, name="path")
    fmt = format or _format_from(path, meta)
    if fmt not in ("pt2", "aoti"):
        raise ValueError(bad_argument("format", fmt, "'pt2' or 'aoti'",
                                      "load ONNX files with sampan.inference.create_predictor"))
    file = art.check_artifact(prefix, meta, fmt)
    device = _check_device(device, meta["artifacts"][fmt].get("device", "cpu"), fmt)
    try:
        runner = _load_runner(file, fmt, device)
    except Exception as exc:
        raise CheckpointError(f"Could not load the {fmt} model {os.fspath(file)!r}: {exc}. "
                              "HINT: export the model again with this torch.", path=os.fspath(file)) from exc
    return LoadedProgram(runner, specs=meta["_specs"], output_names=meta["outputs"], fmt=fmt, meta=meta, path=file)


def _check_device(device: Any, exported_on: str, fmt: str) -> str:
    """``device``, else the one the artifact was exported on, refused with a ValueError naming ``device`` when torch
    does not know it (Paddle's ``"gpu"``) or this machine lacks it (instead of a load failure saying to export
    again)."""
    chosen = device or exported_on
    try:
        kind = torch.device(chosen).type
    except (RuntimeError, TypeError):
        raise ValueError(bad_argument("device", device, "a torch device such as 'cpu', 'cuda' or 'cuda:0'",
                                      "write device='cuda' for the GPU (Paddle's 'gpu')")) from None
    if kind == "cuda" and not torch.cuda.is_available():
        where = "" if device else f" (the {fmt} file was exported for {exported_on!r})"
        fix = ("pass device='cpu' to run the program on the CPU" if fmt == "pt2"
               else "export it again on this machine: sampan.jit.save(net, path, format='aoti', device='cpu')")
        expected = f"a device this machine has; no CUDA device is available{where}"
        raise ValueError(bad_argument("device", chosen, expected, fix))
    return chosen


def read_export_metadata(path: str | os.PathLike, prefix: Path, *, name: str) -> dict:
    """``prefix``'s metadata (:func:`sampan.jit._artifacts.read_metadata`); when there is none and ``path`` is a
    folder or a training checkpoint rather than an export, the :class:`MissingModelError` says so, naming
    ``name`` (the caller's argument), and how to get or name an export."""
    try:
        return art.read_metadata(prefix)
    except art.MissingModelError as exc:
        message = _not_an_export(os.fspath(path), name)
        if message is None:
            raise
        raise art.MissingModelError(message, path=exc.path) from None


_CHECKPOINT_SUFFIXES = (".pt", ".pth", ".pdparams", ".ckpt", ".bin", ".safetensors")


def _not_an_export(text: str, name: str) -> str | None:
    """What ``text`` is when it is not an export (a folder, a checkpoint or weights file), worded as a bad-input
    message; None for a plain missing path."""
    expected = "the prefix of an exported model (what sampan.jit.save / sampan.onnx.export wrote)"
    if os.path.isdir(text):
        found = sorted(p.name[: -len(art.META_SUFFIX)] for p in Path(text).glob("*" + art.META_SUFFIX))
        if not found:
            return bad_argument(name, text, expected, "it is a folder with no *.meta.json in it: export first with "
                                "sampan.jit.save(net, 'out/lenet', input_spec=[...]) and pass 'out/lenet'")
        listed = f" (exports there: {', '.join(found[:5])}{', ...' if len(found) > 5 else ''})"
        return bad_argument(name, text, f"{expected}, not a folder", f"name the export inside the folder, "
                            f"e.g. {name}={os.path.join(text, found[0])!r}{listed}")
    known = (art.META_SUFFIX, *art.SUFFIXES.values())
    for candidate in (text, *(text + suffix for suffix in _CHECKPOINT_SUFFIXES)):
        if os.path.isfile(candidate) and not candidate.endswith(known):
            return bad_argument(
                name, text, f"{expected}, not a checkpoint or weights file (Model.save, torch.save)",
                f"{candidate!r} is one: load it into its network (model.load(path), or "
                "net.load_state_dict(torch.load(path, weights_only=True))), export that with "
                "sampan.jit.save(net, 'out/lenet', input_spec=[...]) and pass 'out/lenet' here")
    return None


def _format_from(path: str | os.PathLike, meta: dict) -> str:
    text = os.fspath(path)
    if text.endswith(art.SUFFIXES["aoti"]):
        return "aoti"
    if text.endswith(art.SUFFIXES["pt2"]):
        return "pt2"
    for fmt in ("pt2", "aoti"):
        if fmt in meta["artifacts"]:
            return fmt
    return "pt2"
