"""``create_predictor(config) -> Predictor``: serve an exported model from NumPy arrays."""
from __future__ import annotations

import contextlib
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch

from sampan.errors import SampanError, UnsafeFileError, bad_argument, first_line
from sampan.inference import bf16, winograd
from sampan.inference.config import Config
from sampan.jit import _artifacts as art
from sampan.jit import amx as jit_amx
from sampan.jit._specs import (allclose, check_file_samples, check_inputs, example_shapes, file_samples,
                               flatten_outputs, max_abs_diff)
from sampan.jit.save_load import read_export_metadata
from sampan.spec import InputSpec

_FORMAT = {"pt2": "pt2", "aoti": "aoti", "onnxruntime": "onnx"}


@dataclass
class Candidate:
    """One backend the :class:`Predictor` considered: its latency and why it was or was not chosen."""

    name: str
    latency_s: float | None = None
    chosen: bool = False
    reason: str = ""
    precision: str = "fp32"
    compile_s: float | None = None  # seconds spent compiling and checking it (the candidates built from the .pt2)

    def __str__(self) -> str:
        latency = f"{self.latency_s * 1e3:.3g} ms" if self.latency_s is not None else "not timed"
        built = f"; compiled in {self.compile_s:.1f} s" if self.compile_s is not None else ""
        return f"{'*' if self.chosen else ' '} {self.name:<17} {self.precision:<5} {latency:>12}  {self.reason}{built}"


class _TorchBackend:
    def __init__(self, runner: Callable, device: str):
        self.runner, self.device = runner, device

    def __call__(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        tensors = [torch.from_numpy(np.ascontiguousarray(a)).to(self.device) for a in arrays]
        with torch.inference_mode():
            out = self.runner(*tensors)
        return [_own_array(o) for o in flatten_outputs(out)]  # a dict or nested tuples: flat, as the names are


def _own_array(tensor: torch.Tensor) -> np.ndarray:
    """An output as an array of its own: a program may return a buffer of the model or an input as it is, and
    ``numpy()`` shares memory, so writing into the returned array would change the model or the caller's input.
    The copy costs about a microsecond for a classifier's logits (a memcpy of the output)."""
    tensor = tensor.detach()
    return tensor.numpy().copy() if tensor.device.type == "cpu" else tensor.cpu().numpy()


class _OrtBackend:
    def __init__(self, session, names: list[str]):
        self.session, self.names = session, names
        self.outputs = [o.name for o in session.get_outputs()]
        native = getattr(session, "_sess", None)
        if native is not None and session.get_providers() == ["CPUExecutionProvider"]:
            # The Predictor has already checked the inputs against the saved specs, so on the CPU it
            # calls ONNX Runtime's native session directly and skips InferenceSession.run's own
            # per-call validation (a few microseconds: most of the overhead for a small model).
            # With a GPU provider the wrapper stays, for its fallback to the CPU provider.
            self._run = lambda feed: native.run(self.outputs, feed, None)
        else:
            self._run = lambda feed: session.run(self.outputs, feed)

    def __call__(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        return self._run(dict(zip(self.names, arrays)))


def _load_backend(name: str, file, config: Config, specs: list[InputSpec]):
    device = config.device
    if name == "pt2":
        from sampan.jit._safety import load_pt2

        module = load_pt2(file).module()
        return _TorchBackend(module.to(device) if device != "cpu" else module, device)
    if name == "aoti":
        return _TorchBackend(torch._inductor.aoti_load_package(str(file)), device)
    from sampan.onnx.export import ort_session

    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if config.use_gpu() else None
    return _OrtBackend(ort_session(file, threads=config.cpu_math_library_num_threads(), providers=providers),
                       [s.name for s in specs])


_BACKEND = {fmt: name for name, fmt in _FORMAT.items()}


def _candidates(config: Config, meta: dict) -> list[str]:
    exported = meta["artifacts"]
    # a backend set, else a file named with its suffix (Config("out/lenet.pt2")), is the only candidate
    backend = config.backend if config.backend != "auto" else _BACKEND.get(config.file_format)
    if backend is not None:
        if _FORMAT[backend] not in exported:
            art.check_artifact(config.prefix, meta, _FORMAT[backend])  # raises, naming what exists
        return [backend]
    names = [n for n in ("pt2", "aoti", "onnxruntime") if _FORMAT[n] in exported]
    on_gpu = config.use_gpu()
    # an AOTInductor package runs only on the device it was compiled for
    return [n for n in names if n != "aoti" or exported["aoti"].get("device", "cpu").startswith("cuda") == on_gpu]


class Predictor:
    """Runs an exported model on NumPy arrays (``paddle.inference.Predictor``).

    Inputs are checked against the saved ``InputSpec`` first: a wrong count, rank, static
    dimension or dtype raises ``ValueError`` naming the input and the expected spec.

    With ``config.enable_mkldnn_bfloat16()``, ``backend="auto"`` also tries ``"inductor-bf16"`` (the
    program in bfloat16, :mod:`sampan.inference.bf16`), verified against the fp32 reference with a bf16
    tolerance and kept only when it is the fastest.
    With ``config.enable_winograd()`` it also tries ``"inductor-winograd"`` (the program frozen, its 3 x 3
    convolutions by Winograd, :mod:`sampan.inference.winograd`), verified with the fp32 tolerance; it tries it
    without being asked for networks with heavy 3 x 3 convolutions (``Config.winograd_auto``; F(4 x 4) only
    there). On CPUs with AMX-BF16 that candidate computes the other convolutions by three bf16 products
    (:mod:`sampan.jit.amx`, float32 results to about 5e-6); ``winograd_convolutions`` and the report say how many
    each way computes.

    Attributes:
        backend: the backend in use (``"pt2"``, ``"aoti"``, ``"onnxruntime"``, ``"inductor-bf16"`` or
            ``"inductor-winograd"``).
        precision: the precision the chosen backend computes in (``"fp32"`` or ``"bf16"``).
        timings: seconds per call of each verified candidate measured by ``backend="auto"``.
        rejected: candidates that failed to load, disagreed with the reference or were refused (bf16 on a
            CPU without native bf16, on a GPU, or with a backend set), with the reason.
        candidates: every :class:`Candidate` considered, with its latency and the reason it was
            (``chosen``) or was not chosen; :meth:`report` prints them.
        compile_seconds: seconds spent compiling and checking each candidate built from the ``.pt2`` program
            (``inductor-bf16``, ``inductor-winograd``), whether it was kept or not.
        winograd_convolutions: how many convolutions of the verified ``inductor-winograd`` candidate's batch-1
            graph each way computes (``{"AMX bf16x3": 19}`` for resnet18 on an AMX CPU, ``{"F(4x4)": 10}`` elsewhere).
    """

    def __init__(self, config: Config):
        self.config = config
        self._meta = read_export_metadata(config.model_path, config.prefix, name="model_path")
        self._specs: list[InputSpec] = self._meta["_specs"]
        self._outputs: list[str] = self._meta["outputs"]
        self._example_shapes = example_shapes(self._meta, self._specs)
        for spec in self._specs:
            if spec.dtype == "bfloat16":  # the predictor takes and returns NumPy arrays, which have no bfloat16
                raise ValueError(
                    f"Input {spec.name!r} of {config.prefix} is bfloat16, a type NumPy lacks, and the predictor takes "
                    "NumPy arrays. HINT: export with float32 inputs and cast inside the model "
                    "(x.to(torch.bfloat16)), or run the program with sampan.jit.load, which takes torch tensors.")
        self._fast = [(np.dtype(s.dtype), len(s.shape),  # numpy interns dtypes
                       [(i, d) for i, d in enumerate(s.shape) if d is not None]) for s in self._specs]
        self.timings: dict[str, float] = {}
        self.rejected: dict[str, str] = {}
        self.candidates: list[Candidate] = []
        self.bf16_error: float | None = None
        self.winograd_convolutions: dict[str, int] = {}  # the Winograd candidate's, by kind (batch-1 graph)
        self.compile_seconds: dict[str, float] = {}
        if config.use_gpu() and not torch.cuda.is_available():
            raise ValueError("Config.enable_use_gpu() was called but no CUDA device is available. "
                             "HINT: call config.disable_gpu() to run on the CPU.")
        if config.cpu_math_library_num_threads():
            torch.set_num_threads(config.cpu_math_library_num_threads())
        names = _candidates(config, self._meta)
        if config.warmup_steps or len(names) > 1:  # refused before a backend is loaded: no sample for these specs
            check_file_samples(self._specs, batch=2 if len(names) > 1 else 1, like=self._example_shapes,
                               source=art.meta_path(config.prefix), fix=_SAMPLE_FIX)
        self.backend, self._run = self._choose(names)
        self.warmup()

    # -- selection ---------------------------------------------------------------------------------
    def _choose(self, names: list[str]) -> tuple[str, Callable]:
        loaded = self._load(names)
        # the opt-in candidates compiled from the .pt2 program (enable_mkldnn_bfloat16, enable_winograd); Winograd
        # also on its own where it may pay (heavy 3x3 convolutions), else it is not listed
        auto = self.config.winograd_auto() and winograd.auto_refusal(
            self.config, self._meta["artifacts"], lambda: self._pt2_module(loaded)) is None
        opt_in = ((bf16, self.config.mkldnn_bfloat16_enabled()), (winograd, self.config.winograd_enabled() or auto))
        for kind, enabled in opt_in:
            if enabled:
                names = [*names, kind.NAME]
                refused = kind.refusal(self.config, self._meta["artifacts"])
                if refused:
                    self.rejected[kind.NAME] = f"refused: {refused}"
        extra = [n for n in (bf16.NAME, winograd.NAME) if n in names and n not in self.rejected]
        if len(loaded) == 1 and not extra:
            name = next(iter(loaded))
            why = ("requested by Config.set_backend" if self.config.backend != "auto"
                   else "the file Config names" if self.config.file_format else "the only one that loaded")
            self._record(names, {}, name, why)
            return name, loaded[name]
        sample = self._sample(batch=1, seed=2)
        outputs = {name: run(sample) for name, run in loaded.items()}
        # the first artifact is torch.export's program of the eager model (checked against eager when saved)
        first = next(iter(outputs))
        reference = outputs[first]
        for name in list(loaded):
            if not allclose(outputs[name], reference, rtol=1e-3, atol=1e-4):
                self.rejected[name] = f"disagrees with {first} by {max_abs_diff(outputs[name], reference):.3g}"
                warnings.warn(f"Predictor: the {name} backend disagrees with the others; not using it.", RuntimeWarning)
                del loaded[name]
        with _compile_progress(extra) as step:
            if bf16.NAME in extra:
                step(bf16.NAME)
                self._try_bf16(loaded, sample, reference, first)
            if winograd.NAME in extra:
                step(winograd.NAME)
                self._try_winograd(loaded, sample, reference, first, only_f4=not self.config.winograd_enabled())
            step(None)
            self.compile_seconds = step.seconds
            self.timings = _time_each(loaded, sample)
        best = min(self.timings, key=self.timings.get)
        self._record(names, self.timings, best, "fastest of the verified backends")
        return best, loaded[best]

    def _load(self, names: list[str]) -> dict[str, Callable]:
        loaded: dict[str, Callable] = {}
        for name in names:
            try:
                file = art.check_artifact(self.config.prefix, self._meta, _FORMAT[name])
                loaded[name] = _load_backend(name, file, self.config, self._specs)
            except Exception as exc:
                if len(names) == 1 or (isinstance(exc, UnsafeFileError) and name != "aoti"):
                    raise  # a file that would run code means the folder was tampered with: say so, do not fall back
                self.rejected[name] = f"{type(exc).__name__}: {exc}"
        if not loaded:
            raise SampanError(f"No backend could load {str(self.config.prefix)!r}: {self.rejected}")
        return loaded

    def _try_bf16(self, loaded: dict[str, Callable], sample: list[np.ndarray], reference: list[np.ndarray],
                  first: str) -> None:
        """Adds the bf16 candidate to ``loaded`` when it compiles and agrees with the fp32 ``reference``;
        otherwise records why not (a model inductor cannot take falls back to the fp32 candidates).

        With a dynamic dimension it is also checked at batch 2: inductor compiles one graph for batch 1 and
        one for every larger batch, and each graph that may serve is checked before it can be chosen."""
        tolerance = self.config.bf16_max_rel_error
        try:
            run = _TorchBackend(bf16.compile_bf16(self._pt2_module(loaded), self._specs), "cpu")
            error = bf16.relative_error(run(sample), reference)
            if any(s.dynamic_dims for s in self._specs):
                sample2 = self._sample(batch=2, seed=4)
                error = max(error, bf16.relative_error(run(sample2), loaded[first](sample2)))
        except UnsafeFileError:
            raise  # a tampered .pt2 is refused outright, as for the fp32 candidates
        except Exception as exc:  # noqa: BLE001 - any failure to compile means: serve fp32, say why
            self.rejected[bf16.NAME] = f"could not compile or run it: {first_line(exc)}"
            return
        if error > tolerance:
            self.rejected[bf16.NAME] = (f"disagrees with {first} (fp32) by a relative error of {error:.3g} > "
                                        f"{tolerance:.3g} (Config.enable_mkldnn_bfloat16(max_rel_error=...))")
            warnings.warn(f"Predictor: the {bf16.NAME} backend disagrees with fp32 beyond its tolerance; not "
                          "using it.", RuntimeWarning)
            return
        self.bf16_error = error
        loaded[bf16.NAME] = run

    def _try_winograd(self, loaded: dict[str, Callable], sample: list[np.ndarray], reference: list[np.ndarray],
                      first: str, only_f4: bool = False) -> None:
        """Adds the Winograd candidate to ``loaded`` when it replaced a convolution and agrees with the
        ``reference`` within the fp32 tolerance (at batch 2 too, with a dynamic dimension); else records why not."""
        try:
            amx = jit_amx.unavailable() is None
            compiled, backend = winograd.compile_winograd(self._pt2_module(loaded), self._specs, only_f4=only_f4,
                                                          amx=amx)
            run = _TorchBackend(compiled, "cpu")
            checks = [(run(sample), reference)]
            if any(s.dynamic_dims for s in self._specs):
                sample2 = self._sample(batch=2, seed=4)
                checks.append((run(sample2), loaded[first](sample2)))
        except UnsafeFileError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure to compile means: the other candidates, say why
            self.rejected[winograd.NAME] = f"could not compile or run it: {first_line(exc)}"
            return
        if not backend.rewritten:
            self.rejected[winograd.NAME] = ("the model has no 3x3 stride-1 convolution that Winograd takes"
                                            + (" and no other that the AMX kernel takes" if amx else ""))
            return
        for out, ref in checks:
            if not allclose(out, ref, rtol=1e-3, atol=1e-4):
                self.rejected[winograd.NAME] = f"disagrees with {first} by {max_abs_diff(out, ref):.3g}"
                warnings.warn(f"Predictor: the {winograd.NAME} backend disagrees with the others; not using it.",
                              RuntimeWarning)
                return
        self.winograd_convolutions = backend.kinds[0]
        loaded[winograd.NAME] = run

    def _pt2_module(self, loaded: dict[str, Callable]) -> torch.nn.Module:
        """The ``.pt2`` program as a module (the loaded candidate's, else loaded now: checked like every ``.pt2``)."""
        pt2 = loaded.get("pt2")
        if isinstance(pt2, _TorchBackend):
            return pt2.runner
        return _load_backend("pt2", art.check_artifact(self.config.prefix, self._meta, "pt2"), self.config,
                             self._specs).runner

    def _record(self, names: list[str], timings: dict[str, float], best: str, why: str) -> None:
        for name in names:
            if name == best:
                reason = why
            elif name in self.rejected:
                reason = self.rejected[name]
                reason = reason if reason.startswith("refused: ") else f"rejected: {reason}"
            else:
                reason = f"slower than {best}"
            if name == winograd.NAME and name in timings:
                reason += f" ({winograd.describe(self.winograd_convolutions)} at batch 1)"
            if name == bf16.NAME and name in timings:
                reason += (f" (bf16 vs fp32: max relative error {self.bf16_error:.2g} <= "
                           f"{self.config.bf16_max_rel_error:.2g})")
            self.candidates.append(Candidate(name, timings.get(name), name == best, reason, _precision(name),
                                             self.compile_seconds.get(name)))

    def report(self) -> str:
        """Each candidate backend, its latency at batch 1 and why it was or was not chosen.

        Example:
            >>> print(predictor.report())  # doctest: +SKIP
            Predictor candidates (precision, latency at batch 1 timed interleaved, why):
            * onnxruntime       fp32     0.0412 ms  fastest of the verified backends
              pt2               fp32      0.215 ms  slower than onnxruntime
        """
        head = "Predictor candidates (precision, latency at batch 1 timed interleaved, why):"
        return "\n".join([head, *(str(c) for c in self.candidates)])

    # -- Paddle-style API --------------------------------------------------------------------------
    def get_input_names(self) -> list[str]:
        return [s.name for s in self._specs]

    def get_output_names(self) -> list[str]:
        return list(self._outputs)

    @property
    def input_spec(self) -> list[InputSpec]:
        return list(self._specs)

    def run(self, inputs: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
        """Runs the model: one array per input, in ``get_input_names()`` order; returns one array per output
        (in ``get_output_names()`` order, nested tuples and dicts flattened), each an array of its own.

        Paddle's handles (``get_input_handle(name).copy_from_cpu(x)``, then ``run()``) have no counterpart:
        pass the arrays here and read the returned list."""
        if self._fits(inputs):  # the common case, checked cheaply: small models are served in microseconds
            return self._run(inputs)
        if inputs is None:
            raise TypeError(bad_argument(
                "inputs", None, f"a list of numpy arrays, one per input {self.get_input_names()}",
                "Sampan's predictor has no input handles to fill first (Paddle's copy_from_cpu): call "
                "outputs = predictor.run([array, ...]); it returns the output arrays"))
        if not isinstance(inputs, (list, tuple)):
            raise TypeError(bad_argument("inputs", inputs, "a list of numpy arrays, one per input",
                                         f"pass [array] for inputs {self.get_input_names()}"))
        arrays = [np.ascontiguousarray(_as_array(x, i, spec)) for i, (x, spec) in enumerate(zip(inputs, self._specs))]
        check_inputs(self._specs, arrays if len(arrays) == len(inputs) else list(inputs))
        return self._run(arrays)

    def _fits(self, inputs: Any) -> bool:
        if type(inputs) is not list or len(inputs) != len(self._fast):
            return False
        for array, (dtype, ndim, static) in zip(inputs, self._fast):
            if type(array) is not np.ndarray or array.dtype is not dtype or array.ndim != ndim:
                return False
            shape = array.shape
            for i, size in static:
                if shape[i] != size:
                    return False
        return True

    def warmup(self, steps: int | None = None) -> None:
        """Runs ``steps`` (default ``config.warmup_steps``) calls on a sample so the first real call is fast."""
        steps = self.config.warmup_steps if steps is None else steps
        if not steps:
            return  # no sample built: a model too large for one is served this way (Config.set_warmup(0))
        sample = self._sample(batch=1, seed=3)
        for _ in range(steps):
            self._run(sample)

    def _sample(self, *, batch: int, seed: int) -> list[np.ndarray]:
        """Random inputs at ``batch``, other dynamic dimensions at the sizes the model was exported with
        (``example_shapes`` in meta.json; 8 for files written before Sampan kept them); refused, naming the input,
        before anything is allocated when the meta file's shapes make one too large (``UnsafeFileError``)."""
        return [t.numpy() for t in file_samples(self._specs, batch=batch, seed=seed, like=self._example_shapes,
                                                source=art.meta_path(self.config.prefix), fix=_SAMPLE_FIX)]

    def __getattr__(self, name: str) -> Any:
        if name in _PADDLE_HANDLES:
            raise AttributeError(
                f"Predictor has no {name}(): Sampan's predictor takes and returns NumPy arrays, without handles. "
                f"HINT: outputs = predictor.run([array, ...]) with one array per input {self.get_input_names()}; "
                f"outputs is a list of arrays, one per output {self.get_output_names()} "
                "(see docs/MIGRATING_FROM_PADDLE.md, 'Static graph and deployment').")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def precision(self) -> str:
        return _precision(self.backend)

    def __repr__(self) -> str:
        specs = ", ".join(f"{s.name}: {s.to_list()} {s.dtype}" for s in self._specs)
        return (f"Predictor(backend={self.backend!r}, precision={self.precision!r}, device={self.config.device!r}, "
                f"inputs=[{specs}])")


# what to do when the samples the predictor builds from a meta file's InputSpecs would be too large
_SAMPLE_FIX = ("a model you exported yourself whose input is that large for real is served on real inputs without "
               "samples (they are built only to choose a backend and to warm up): call config.set_warmup(0) and "
               "config.set_backend('pt2') (or 'onnxruntime'). A model from someone else: ask them to export it "
               "again with the input's real shape, its variable dimensions None.")

# Paddle Inference's handle API (and its older names): refused with a pointer to run([array])
_PADDLE_HANDLES = frozenset({"get_input_handle", "get_output_handle", "get_input_tensor", "get_output_tensor",
                             "zero_copy_run"})


def _precision(backend: str) -> str:
    return "bf16" if backend == bf16.NAME else "fp32"


def _as_array(value: Any, index: int, spec: InputSpec) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, torch.Tensor):
        if value.dtype == torch.bfloat16:  # NumPy has no bfloat16: .numpy() would fail without naming the input
            raise TypeError(bad_argument(f"inputs[{index}]", f"a torch.bfloat16 tensor of shape {list(value.shape)}",
                                         f"an array of {spec.dtype} for input {spec.name!r}",
                                         f"pass x.to(torch.{spec.dtype})"))
        return value.detach().cpu().numpy()
    raise TypeError(bad_argument(f"inputs[{index}]", value, f"a numpy array for input {spec.name!r} "
                                 f"({spec.to_list()} {spec.dtype})", f"use np.asarray(x, dtype='{spec.dtype}')"))


class _Steps:
    """``step(name)`` ends the step before it (its seconds go to ``seconds[name]``; the bar, if any, moves on) and
    starts the next of :func:`_compile_progress`: the candidate compiled next, or None for the timing."""

    def __init__(self, bar):
        self.bar, self.seconds = bar, {}
        self._name: str | None = None
        self._t0: float | None = None

    def __call__(self, name: str | None) -> None:
        now = time.perf_counter()
        if self._t0 is not None:
            if self._name is not None:
                self.seconds[self._name] = now - self._t0
            if self.bar is not None:
                self.bar.update(1)
        if self.bar is not None:
            self.bar.set_description(f"create_predictor: compiling {name}" if name
                                     else "create_predictor: timing the candidates")
        self._name, self._t0 = name, now


@contextlib.contextmanager
def _compile_progress(names: list[str]):
    """A tqdm.auto bar (a widget in a notebook, text elsewhere) over the candidates compiled now, ``names``, then
    the timing; none when nothing is compiled (the common case takes well under a second). It is removed when done.
    Yields a :class:`_Steps`."""
    if not names:
        yield _Steps(None)
        return
    from tqdm.auto import tqdm

    bar = tqdm(total=len(names) + 1, desc="create_predictor", unit="step", leave=False)
    try:
        yield _Steps(bar)
        bar.update(1)
    finally:
        bar.close()


def _time_each(runners: dict[str, Callable], sample: list[np.ndarray], repeat: int = 7) -> dict[str, float]:
    """Median seconds per call, candidates interleaved in a shuffled order (``sampan.utils.timing``)."""
    from sampan.utils.timing import interleaved

    return interleaved({name: (lambda run=run: run(sample)) for name, run in runners.items()}, repeat=repeat)


def create_predictor(config: Config) -> Predictor:
    """Builds a :class:`Predictor` (``paddle.inference.create_predictor``).

    Example:
        >>> import numpy as np, sampan
        >>> predictor = sampan.inference.create_predictor(sampan.inference.Config("out/lenet"))  # doctest: +SKIP
        >>> [logits] = predictor.run([np.zeros((4, 1, 28, 28), "float32")])                     # doctest: +SKIP
    """
    if not isinstance(config, Config):
        raise TypeError(bad_argument("config", config, "a sampan.inference.Config",
                                     "write create_predictor(sampan.inference.Config('out/lenet'))"))
    return Predictor(config)
