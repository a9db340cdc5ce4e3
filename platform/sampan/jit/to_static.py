"""``sampan.jit.to_static``: develop with the dynamic graph, run a compiled static one (``torch.compile``)."""
from __future__ import annotations

import dataclasses
import functools
import inspect
import time
import types
import warnings
from typing import Any, Callable, Literal

import torch
from torch import nn

from sampan.errors import SampanError, bad_argument
from sampan.jit._specs import allclose, check_call, max_abs_diff, normalize_specs

Status = Literal["pending", "compiled", "eager"]


class StaticGraphError(SampanError):
    """``to_static(..., full_graph=True)`` could not turn the function into one graph.

    Attributes:
        report: the :class:`~sampan.jit.explain.ExplainReport` (graph breaks, source lines, hints), or None.
    """

    def __init__(self, message: str, *, report=None):
        super().__init__(message)
        self.report = report


class StaticFunction:
    """A function or ``forward`` compiled by ``torch.compile`` the first time it runs.

    Dynamic dimensions (``None`` in the ``InputSpec``) are marked so that other batch sizes
    reuse the graph; a call the ``InputSpec`` contradicts raises a ``ValueError``. Use :func:`to_static` to build one.

    Attributes:
        status: ``"pending"`` before the first call, ``"compiled"`` or ``"eager"`` (fell back).
        verified: True / False once compiled output was compared with eager, None before.
        max_abs_diff: the largest difference found by that comparison.
        compile_seconds: wall time of the first (compiling) call.
        fallback_reason: why it fell back to eager (with the graph breaks), or None.
        choices: with ``pick_faster``, one :class:`PathChoice` per inference input shape: the compiled
            and eager times measured after warm-up and the path kept for that shape.
        train_choice: with ``pick_faster``, the :class:`PathChoice` for training calls (gradients on, layer in
            ``train()`` mode), measured once at the first training call on a whole training step (forward and
            backward), or None before (and in a distributed job, where training always runs compiled).
        winograd_note: with ``winograd=True``, why the Winograd variant was not timed for the last new
            input shape (no convolution it takes, a compile error, a disagreement with eager), or None.
        training_passes: what ``Model.prepare(to_static=True)`` changed for training besides compiling
            (:mod:`sampan.jit.training`), e.g. ``["fused Adam", "channels-last activations"]``.
    """

    def __init__(self, fn: Callable, *, layer: nn.Module | None, input_spec, backend: str, full_graph: bool,
                 verify: bool, freezing: bool | None, rtol: float, atol: float, pick_faster: bool = True,
                 winograd: bool | str = False):
        self.original = fn
        self.layer = layer
        self.input_spec = normalize_specs(input_spec)
        self.backend = backend
        self.full_graph = full_graph
        self.verify = verify
        self.freezing = (backend == "inductor") if freezing is None else bool(freezing)
        self.rtol, self.atol = rtol, atol
        self.status: Status = "pending"
        self.verified: bool | None = None
        self.max_abs_diff: float | None = None
        self.compile_seconds: float | None = None
        self.fallback_reason: str | None = None
        self.pick_faster = pick_faster
        # a third inference candidate (frozen graph, 3x3 convolutions by Winograd), timed with the other two
        self.winograd = winograd if winograd == "auto" else bool(winograd)
        self.choices: dict[tuple, PathChoice] = {}
        self.winograd_note: str | None = None  # why the Winograd variant was not a candidate, when it was not
        self.train_choice: PathChoice | None = None
        self.training_passes: list[str] = []  # set by Model.prepare(to_static=True): fused optimizer, layout
        self._train_path: str | None = None  # the path training calls take: set by the probe or a checkpoint
        self.on_layout_change: Callable[[], object] | None = None  # Model.prepare: align the optimizer's state
        self._compiled: dict[bool | str, Callable] = {}
        self._frozen_fingerprint: tuple | None = None
        self._frozen_storages: list = []  # the frozen generation's weight storages, kept while it may serve
        # the last inference call's key, if its choice was eager: (layer, key, choice), its key ((shape, dtype),)
        # for the one tensor argument, checked in a few attribute reads instead of the full path's ~7 us (LeNet at
        # batch 1 is a 150 us call)
        self._eager_shape: tuple | None = None
        self._frozen_backend: FrozenBackend | None = None  # the frozen graph's, when "auto" rewrites or probes it
        functools.update_wrapper(self, fn)

    @property
    def input_spec(self) -> list | None:
        """The ``InputSpec`` list every call is checked against (``None`` dims dynamic), or None."""
        return self._input_spec

    @input_spec.setter
    def input_spec(self, input_spec) -> None:
        self._input_spec = specs = normalize_specs(input_spec)
        self._dynamic_dims = () if specs is None else tuple(list(s.dynamic_dims) for s in specs)
        self._admitted: list | None = None  # the (shape, dtype) of each tensor of the last call the check passed

    # -- descriptor: @to_static on a method binds like a function ---------------------------------
    def __get__(self, instance, owner=None):
        """``@to_static`` on a layer class's ``forward``: each instance gets a StaticFunction of its own (made at
        its first lookup, kept in the instance's ``__dict__``), as Paddle keeps one per instance: two networks of
        one class have their own frozen graph, faster-path choices and training path. A lookup through
        ``super()`` from a subclass that overrides ``forward`` binds this one like a function."""
        if instance is None:
            return self
        if torch.compiler.is_compiling():  # traced inside a graph being compiled (a DDP wrapper's): inlined there
            return functools.partial(self.original if self.layer is None else self, instance)
        if (self.layer is None and isinstance(instance, nn.Module) and "forward" not in instance.__dict__
                and inspect.getattr_static(type(instance), "forward", None) is self):
            own = instance.__dict__["forward"] = self._for_layer(instance)
            return own
        return types.MethodType(self, instance)

    def _for_layer(self, layer: nn.Module, input_spec=None) -> "StaticFunction":
        """A StaticFunction of ``layer``'s own, for a layer whose class's ``forward`` is this one (``@to_static``):
        the decorator's options around the class's plain ``forward`` bound to ``layer``, nothing compiled or measured
        yet (:meth:`__get__` makes it at the layer's first lookup). Its frozen graph, path choices, training path,
        layout and ``Model.prepare`` settings are then the layer's, not every instance's. ``input_spec`` is used
        where the decorator gave none."""
        return StaticFunction(types.MethodType(self.original, layer), layer=layer,
                              input_spec=self.input_spec if self.input_spec is not None else input_spec,
                              backend=self.backend, full_graph=self.full_graph, verify=self.verify,
                              freezing=self.freezing, rtol=self.rtol, atol=self.atol, pick_faster=self.pick_faster,
                              winograd=self.winograd)

    # -- copies (copy.deepcopy, pickle) -------------------------------------------------------------
    def __getstate__(self) -> dict:
        """What a copy keeps: the options, the status of an eager fallback and the training path, never the
        compiled graphs. Those close over the original's ``forward`` and hold its weights, so a deep copy (EMA
        weights, ``sampan.pruning.prune``, quantization) would compute with the original's weights; a copy
        compiles again with its own module at its first call (status ``"pending"``)."""
        state = dict(self.__dict__)
        for cache in ("_frozen_shapes", "_winograd_backend", "_recompile_reset"):
            state.pop(cache, None)
        state.update(_compiled={}, _frozen_fingerprint=None, _frozen_storages=[], _eager_shape=None,
                     _frozen_backend=None, choices={}, winograd_note=None,
                     on_layout_change=None, training_passes=[])  # both belong to the Model training the original
        if self.status == "compiled":  # an eager fallback stays one: the copy has the same code
            state.update(status="pending", verified=None, max_abs_diff=None, compile_seconds=None)
        return state

    def __setstate__(self, state: dict) -> None:
        """A copy's state; one pickled before calls were checked against ``input_spec`` (a plain attribute then)
        gets the spec's derived fields made again."""
        if "_input_spec" in state:
            self.__dict__.update(state)
            return
        state = dict(state)
        spec = state.pop("input_spec", None)
        self.__dict__.update(state)
        self.input_spec = spec

    def __repr__(self) -> str:
        name = getattr(self.original, "__qualname__", repr(self.original))
        return f"StaticFunction({name}, backend={self.backend!r}, status={self.status!r})"

    # -- compilation -------------------------------------------------------------------------------
    def _module(self, args: tuple) -> nn.Module | None:
        if self.layer is not None:
            return self.layer
        return args[0] if args and isinstance(args[0], nn.Module) else None

    def _fingerprint(self, module: nn.Module | None) -> tuple:
        """What tells the weights the frozen graph holds from changed ones: each tensor's identity, its memory
        (``w.data = ...`` and ``torch.nn.utils.vector_to_parameters`` swap it without a version bump) and its
        version counter (in-place writes: an optimizer step, ``load_state_dict``, ``w.mul_`` under ``no_grad``).
        An in-place write through ``w.data`` bumps no counter: :meth:`refreeze` is needed after one."""
        if module is None:
            return ()
        tensors = (*module.parameters(), *module.buffers())
        # inference tensors (a module built or copied under torch.inference_mode) keep no version
        # counter; they cannot be trained either, so their identity and memory are enough
        try:
            return tuple((id(t), t.data_ptr(), -1 if t.is_inference() else t._version) for t in tensors)
        except RuntimeError:  # a tensor subclass without memory of its own (torchao's quantized weights)
            return tuple((id(t), _address(t), -1 if t.is_inference() else t._version) for t in tensors)

    def _compiled_fn(self, frozen: bool | str) -> Callable:
        """The compiled function: unfrozen (False), frozen (True) or frozen with Winograd convolutions."""
        if frozen not in self._compiled:
            # Dynamo keeps its cache per backend object: a fresh one per frozen generation means an
            # unfrozen call or a refreeze never reuses a graph holding the old weights as constants.
            if frozen == "winograd":
                from sampan.jit.amx import unavailable as amx_unavailable
                from sampan.jit.winograd import auto_rewrite, rewrite

                # winograd="auto" timed on an AVX-512 CPU: F(4x4) where convolutions are heavy, as on AVX2; on a
                # CPU with AMX the other convolutions of this variant by three bf16 products (sampan.jit.amx)
                backend = self._winograd_backend = FrozenBackend(self.backend, rewrite=functools.partial(
                    auto_rewrite if self.winograd == "auto" else rewrite, amx=amx_unavailable() is None))
            elif frozen and self._auto_winograd() == "timed":
                from sampan.jit.winograd import f4_flops

                # the plain frozen graph, probed: its F(4x4) work decides whether a Winograd variant is timed
                backend = self._frozen_backend = FrozenBackend(self.backend, probe=f4_flops)
            elif frozen and self._auto_winograd() == "rewrite":
                from sampan.jit.winograd import auto_rewrite

                # winograd="auto" on an AVX2-only CPU: the one frozen graph takes F(4x4) where convolutions are heavy
                backend = self._frozen_backend = FrozenBackend(self.backend, rewrite=auto_rewrite)
            else:
                backend = FrozenBackend(self.backend) if frozen else self.backend
            # random ops (dropout) draw from torch's generator as in eager, not from inductor's own: training
            # compiled follows the eager loss curve, and switching paths changes no dropout mask
            options = {"fallback_random": True} if self.backend == "inductor" and not frozen else None
            self._compiled[frozen] = torch.compile(self.original, backend=backend, fullgraph=True, options=options)
        return self._compiled[frozen]

    def _auto_winograd(self) -> str | None:
        """What ``winograd="auto"`` does here (see :func:`to_static`): ``"rewrite"`` (AVX2-only CPUs: the one
        frozen graph takes Winograd F(4x4)), ``"timed"`` (AVX-512: a frozen graph with F(4x4) is timed beside the
        plain one when the convolutions are heavy) or None."""
        from sampan.jit.winograd import auto_unavailable

        if not (self.winograd == "auto" and self.backend == "inductor" and self.freezing and self.pick_faster):
            return None
        if auto_unavailable() is None:
            return "rewrite"
        return "timed" if torch.backends.cpu.get_cpu_capability() == "AVX512" else None

    def _checked(self, args: tuple, kwargs: dict) -> list[torch.Tensor]:
        """This call's tensors (positional, then keyword), checked against ``input_spec``: a count, rank, size the spec
        fixes or dtype they contradict raises a ValueError that names the spec and the fix (as Paddle's to_static
        refuses them), before anything compiles for them. Only tensors unlike the last call's are checked in full
        (once per new shape): a call shaped like the last costs one comparison per tensor (under 1 us)."""
        if self._input_spec is None:
            return []
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if kwargs:
            tensors += [v for v in kwargs.values() if isinstance(v, torch.Tensor)]
        seen = [(t.shape, t.dtype) for t in tensors]
        if seen != self._admitted:
            check_call(self._input_spec, tensors, callee=self._name())
            self._admitted = seen
        return tensors

    def _mark_dynamic(self, args: tuple, kwargs: dict) -> None:
        """Checks the call (:meth:`_checked`) and marks the dimensions its ``input_spec`` leaves dynamic."""
        for tensor, dims in zip(self._checked(args, kwargs), self._dynamic_dims):
            if dims:
                torch._dynamo.mark_dynamic(tensor, dims)

    def _use_frozen(self, module: nn.Module | None) -> bool:
        """Frozen (weights as constants) only for inference, and only while the weights are unchanged."""
        if not self.freezing or torch.is_grad_enabled() or (module is not None and module.training):
            return False
        fingerprint = self._fingerprint(module)
        if self._frozen_fingerprint is None:
            self._frozen_fingerprint = fingerprint
            # the frozen weights' memory stays allocated (the frozen graph holds them anyway) so that no new
            # tensor can get its address: a later `w.data = ...` would otherwise match the fingerprint again
            self._frozen_storages = [] if module is None else [
                _storage(t) for t in (*module.parameters(), *module.buffers())]
        return fingerprint == self._frozen_fingerprint

    def refreeze(self) -> None:
        """Folds the current weights into a new frozen graph at the next inference call (after training)."""
        self._compiled.pop(True, None)
        self._compiled.pop("winograd", None)
        self._frozen_fingerprint = None
        self._frozen_storages = []
        self.choices.clear()

    def _run_compiled(self, args: tuple, kwargs: dict, winograd: bool = False) -> Any:
        try:
            return self._call_compiled(args, kwargs, winograd)
        except Exception as exc:  # noqa: BLE001 - only torch's recompile limit is handled here
            if not _is_recompile_limit(exc):
                raise
            return self._past_recompile_limit(args, kwargs)

    def _past_recompile_limit(self, args: tuple, kwargs: dict) -> Any:
        """Many models of one class in one process (a course, a sweep) share ``forward``'s code object,
        and torch keeps at most ``recompile_limit`` graphs per code object. Drop that code's old graphs
        (of models built earlier) once and compile again; should the limit be hit again, run eagerly."""
        code = getattr(self.original, "__code__", None)
        if code is not None and not getattr(self, "_recompile_reset", False):
            self._recompile_reset = True
            torch._C._dynamo.eval_frame.reset_code(code)
            try:
                return self._call_compiled(args, kwargs)
            except Exception as exc:  # noqa: BLE001
                if not _is_recompile_limit(exc):
                    raise
        self.status = "eager"
        self.fallback_reason = (f"torch's recompile limit ({torch._dynamo.config.recompile_limit} graphs per "
                                f"function) was reached for {self._name()}")
        _warn_recompile_limit_once(self.fallback_reason)
        return self.original(*args, **kwargs)

    def _call_compiled(self, args: tuple, kwargs: dict, winograd: bool = False) -> Any:
        self._mark_dynamic(args, kwargs)
        frozen = self._use_frozen(self._module(args))
        if frozen:
            variant = "winograd" if winograd else True
            # inductor reads `freezing` from its global config while it compiles (first call, and a
            # recompile for a new size range); torch.compile(options={"freezing": True}) is not seen
            # there in torch 2.14, so resnet18 ran no faster than eager. Patching it around the call is.
            # The patch costs ~50 us (LeNet's whole compiled call is ~100 us), so only calls that may
            # compile pay it: the first of each input shape in this frozen generation.
            fn = self._compiled_fn(variant)
            shapes = (variant, *((a.shape, a.dtype) for a in args if isinstance(a, torch.Tensor)))
            seen = self.__dict__.setdefault("_frozen_shapes", {})
            if seen.get(shapes) is fn:
                from torch._dynamo.utils import counters

                graphs = counters["stats"]["unique_graphs"]
                out = fn(*args, **kwargs)
                if counters["stats"]["unique_graphs"] == graphs:
                    return out
                # it compiled after all (torch.compile's caches were reset), so without freezing: again
                self._compiled.pop(variant, None)
                fn = self._compiled_fn(variant)
            module = self._module(args)
            if module is not None:
                _settle_ambiguous(module)  # before the weights become the frozen graph's constants
            with torch._inductor.config.patch(freezing=True):
                out = fn(*args, **kwargs)
            seen[shapes] = fn
            return out
        return self._compiled_fn(False)(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling():  # inside a graph being compiled (a DDP wrapper's): one graph with it
            return self.original(*args, **kwargs)
        fast = self._eager_shape
        if (fast is not None and len(args) == 1 and not kwargs and not torch.is_grad_enabled()
                and isinstance(args[0], torch.Tensor) and (args[0].shape, args[0].dtype) == fast[1][0]
                and not fast[0].training and self.choices.get(fast[1]) is fast[2]):
            return self._run_eager(fast[2], args, kwargs)  # the same shape as last time (analysis modes too)
        if self.status == "eager":  # fell back: its calls fit the spec too, as its first one did
            if not _analysis_mode_on():
                self._checked(args, kwargs)
            return self.original(*args, **kwargs)
        if _analysis_mode_on():  # FLOP counts, summaries: a measurement, not a call the spec governs
            return self.original(*args, **kwargs)
        if self._training_call(args) and (self._train_path is not None or self._probes_training(args)):
            return self._train(args, kwargs)
        if self.status == "compiled":
            key = self._choice_key(args)
            choice = self.choices.get(key) if key is not None else None
            if choice is not None and choice.path == "eager":
                self._remember_eager(key, choice, args, kwargs)
                return self._run_eager(choice, args, kwargs)
            out = self._run_compiled(args, kwargs, winograd=choice is not None and choice.winograd)
            if self.verify and self.verified is None:
                self._verify(args, kwargs, out)
            if key is not None and choice is None:
                self._choose(key, args, kwargs)
                choice = self.choices[key]
            self._remember_eager(key, choice, args, kwargs)
            return out
        return self._first_call(args, kwargs)

    def _remember_eager(self, key: tuple | None, choice: "PathChoice | None", args: tuple, kwargs: dict) -> None:
        """Keeps this inference call's shape for ``__call__``'s short path when its choice is eager (one tensor,
        a layer to read ``training`` from), else forgets the last one."""
        eager = (choice is not None and choice.path == "eager" and self.layer is not None and len(args) == 1
                 and not kwargs and isinstance(args[0], torch.Tensor))
        self._eager_shape = (self.layer, key, choice) if eager else None

    def _run_eager(self, choice: "PathChoice", args: tuple, kwargs: dict) -> Any:
        """The eager forward, with oneDNN off when that is what was kept for this shape."""
        if choice.onednn_off:
            return _without_onednn(self.original, args, kwargs)
        return self.original(*args, **kwargs)

    # -- the faster path for training -------------------------------------------------------------
    @property
    def first_training_step_waits(self) -> bool:
        """Whether the next training call compiles, or times the paths, before it trains (seconds to a minute
        on a CPU): ``Model.fit``'s progress bar says so while the first step runs."""
        if self.status == "eager" or self._train_path == "eager":
            return False
        return self.status == "pending" or (self._train_path is None and self._measures_training())

    def _training_call(self, args: tuple) -> bool:
        if not torch.is_grad_enabled():
            return False
        module = self._module(args)
        return module is None or module.training

    def _probes_training(self, args: tuple) -> bool:
        """Whether a training call should first measure the paths: with ``pick_faster``, once, on one process
        (in a distributed job the ranks could choose differently, and their replicas would drift apart)."""
        return self._measures_training() and self._module(args) is not None

    def _measures_training(self) -> bool:
        """Whether a training call of a layer would measure the paths first (see :meth:`_probes_training`)."""
        return (self.pick_faster and self.train_choice is None
                and not (torch.distributed.is_available() and torch.distributed.is_initialized()))

    def _train(self, args: tuple, kwargs: dict) -> Any:
        if self._train_path is None:
            self._choose_training(args, kwargs)
        if self._train_path == "eager" or self.status == "eager":
            self._checked(args, kwargs)  # the compiled path checks them too: the faster path must not change that
            return self.original(*args, **kwargs)
        if self.status == "pending":  # restored from a checkpoint before the first call
            return self._first_call(args, kwargs)
        return self._run_compiled(args, kwargs)

    def _choose_training(self, args: tuple, kwargs: dict) -> None:
        """Times a training step (forward, then backward from the outputs) on each candidate, interleaved after a
        warm-up, and keeps the fastest for every later training call. Candidates: the compiled and the eager
        forward and, for a layer with 2-d convolutions on the CPU, each in the default (NCHW) and in the
        channels-last layout.

        Neither is always faster on the CPU: inductor's own max-pool-with-indices kernel ran 0.8 ms where
        ATen's channels-last one runs 27 us (digits CNN, torch 2.14), and channels-last made resnet18's eager
        training step slower. This runs at the first training call, before an optimizer holds state shaped
        like the weights (``on_layout_change`` lets ``Model`` align one that does). The probe leaves
        no trace: the layer's buffers (batch-norm statistics), the gradients and the random generators are put
        back after every run.
        """
        from sampan.utils.timing import interleaved_for

        module = self._module(args)
        restore = _snapshot(module, [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)])
        if self.status == "pending":  # compile (or fall back, saying why) before timing anything
            try:
                self._first_call(args, kwargs)
            finally:
                restore()
            if self.status == "eager":
                return
        layouts = [None]
        if any(isinstance(m, nn.Conv2d) for m in module.modules()) and next(module.parameters()).device.type == "cpu":
            layouts = ["contiguous", "channels_last"]

        failed: dict[tuple, str] = {}
        original_layout = _layout_of(module)

        def step(path: str, layout: str | None) -> Callable[[], None]:
            def run() -> None:
                if (path, layout) in failed:
                    return
                _set_layout(module, layout)
                self._train_path = path
                try:
                    out = self.original(*args, **kwargs) if path == "eager" else self._run_compiled(args, kwargs)
                    _backward(out)
                except Exception as exc:  # a compiled graph that cannot take this layout is no candidate
                    if path == "eager" or layout in (None, original_layout):
                        raise  # the layer's own error, or compiled in its own layout: the caller must see it
                    failed[(path, layout)] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                finally:
                    restore()
            return run

        runs = {(path, layout): step(path, layout) for path in ("compiled", "eager") for layout in layouts}
        try:
            times = interleaved_for(runs, 1.0, rounds=(3, 15))  # the warm-up compiles each layout's graph
        finally:
            self._train_path = None
            _set_layout(module, original_layout)
        for key, why in failed.items():  # e.g. torch 2.11 on a GPU host ran the NCHW graph on channels-last weights
            times.pop(key)
            warnings.warn(f"to_static: the compiled training step in the {key[1].replace('_', '-')} layout failed "
                          f"({why}); it is not a candidate.", RuntimeWarning, stacklevel=4)
        path, layout = min(times, key=times.get)
        self.set_train_choice(PathChoice(path, min(t for (p, _), t in times.items() if p == "compiled"),
                                         min(t for (p, _), t in times.items() if p == "eager"), layout), module)

    def set_train_choice(self, choice: "PathChoice | dict | None", module: nn.Module | None = None) -> None:
        """Sets the path (and layout) of training calls, as a checkpoint restores it so that a resumed run takes
        the same path; None measures again at the next training call. A change of the weights' layout calls
        ``on_layout_change`` (``Model`` keeps a fused optimizer's state in the weights' layout with it).

        Args:
            choice: a :class:`PathChoice`, its ``dataclasses.asdict`` (a checkpoint's), or None.
            module: the network whose weights take the choice's layout where this has no ``layer`` of its own
                (``@to_static`` on a class's ``forward``); the ``layer`` where it has one.
        """
        if isinstance(choice, dict):
            choice = PathChoice(**choice)
        self.train_choice = choice
        self._train_path = choice.path if choice is not None else None
        module = self.layer if self.layer is not None else module
        if choice is not None and module is not None and _set_layout(module, choice.layout) \
                and self.on_layout_change is not None:
            self.on_layout_change()

    # -- the faster path per input shape -----------------------------------------------------------
    def _choice_key(self, args: tuple) -> tuple | None:
        """The input shapes of an inference call (no gradients, layer in eval mode), or None."""
        if not self.pick_faster or torch.is_grad_enabled():
            return None
        module = self._module(args)
        if module is not None and module.training:
            return None
        return tuple((tuple(a.shape), a.dtype) for a in args if isinstance(a, torch.Tensor))

    def _choose(self, key: tuple, args: tuple, kwargs: dict) -> None:
        """Times compiled against eager on this call's inputs (after warm-up) and keeps the faster.

        Compiled code is not always faster: for a small model at batch 1, the compiled call's fixed
        overhead (guards, wrappers) can exceed the work it saves. About half a second per shape.
        A CPU model with convolutions also gets eager with oneDNN off as a candidate (:func:`_without_onednn`).
        """
        from sampan.utils.timing import interleaved_for

        runs = {"compiled": lambda: self._run_compiled(args, kwargs), "eager": lambda: self.original(*args, **kwargs)}
        if self._onednn_off_applies(args, kwargs):
            runs[_ONEDNN_OFF] = lambda: _without_onednn(self.original, args, kwargs)
        if self._winograd_timed(args) and self._winograd_applies(args, kwargs):
            runs["winograd"] = lambda: self._run_compiled(args, kwargs, winograd=True)
        # winograd="auto": the frozen graph compiled for these inputs (just now) may hold F(4x4) convolutions
        auto = (self._auto_winograd() == "rewrite" and self._use_frozen(self._module(args))
                and self._frozen_backend.rewritten > 0)
        times = interleaved_for(runs, 0.5, rounds=(5, 25))
        path = min(times, key=times.get)
        self.choices[key] = PathChoice("eager" if path in ("eager", _ONEDNN_OFF) else "compiled", times["compiled"],
                                       times["eager"], winograd=path == "winograd" or (auto and path == "compiled"),
                                       winograd_seconds=times.get("winograd"), onednn_off=path == _ONEDNN_OFF,
                                       onednn_off_seconds=times.get(_ONEDNN_OFF))

    def _onednn_off_applies(self, args: tuple, kwargs: dict) -> bool:
        """Whether eager with oneDNN off is a candidate for these inputs: a module with convolutions, CPU tensors,
        oneDNN on now, and the same outputs as eager (within ``rtol`` / ``atol``) when run so."""
        module = self._module(args)
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        if (module is None or not torch._C._get_mkldnn_enabled() or not tensors
                or any(t.device.type != "cpu" for t in tensors)
                or not any(isinstance(m, nn.modules.conv._ConvNd) for m in module.modules())):
            return False
        return allclose(_without_onednn(self.original, args, kwargs), self.original(*args, **kwargs),
                        rtol=self.rtol, atol=self.atol)

    def _winograd_timed(self, args: tuple) -> bool:
        """Whether a Winograd variant is a candidate: ``winograd=True``, or ``"auto"`` on AVX-512 when the frozen
        graph just compiled for these inputs has at least ``AUTO_MIN_FLOPS`` of F(4x4) work."""
        if self.winograd is True:
            return True
        if not (self._auto_winograd() == "timed" and self._use_frozen(self._module(args))):
            return False
        from sampan.jit.winograd import AUTO_MIN_FLOPS

        return self._frozen_backend is not None and self._frozen_backend.probed >= AUTO_MIN_FLOPS

    def _winograd_applies(self, args: tuple, kwargs: dict) -> bool:
        """Compiles the Winograd variant for these inputs; True when it replaced a convolution and agrees with eager."""
        if not self._use_frozen(self._module(args)):
            return False
        try:
            out = self._run_compiled(args, kwargs, winograd=True)
        except Exception as exc:  # noqa: BLE001 - the direct-convolution graph stays; say why
            self.winograd_note = f"Winograd variant failed to compile: {_first_line(exc)}"
            return False
        if not self._winograd_backend.rewritten:
            self.winograd_note = "no 3x3 stride-1 convolution that Winograd takes"
            return False
        expected = self.original(*args, **kwargs)
        if not allclose(out, expected, rtol=self.rtol, atol=self.atol):
            self.winograd_note = f"Winograd variant disagreed with eager by {max_abs_diff(out, expected):.3g}: not used"
            return False
        self.winograd_note = None
        return True

    def _first_call(self, args: tuple, kwargs: dict) -> Any:
        self._checked(args, kwargs)  # before the try: a call the spec refuses is the caller's mistake, not a compile's
        start = time.perf_counter()
        try:
            out = self._run_compiled(args, kwargs)
        except Exception as exc:  # compilation failed: is it the model or the compiler?
            return self._fall_back(args, kwargs, exc)
        self.compile_seconds = time.perf_counter() - start
        if self.status == "eager":  # past torch's recompile limit: ran eagerly, already said so
            return out
        self.status = "compiled"
        if self.verify:
            self._verify(args, kwargs, out)
        return out

    def _verify(self, args: tuple, kwargs: dict, out: Any) -> None:
        module = self._module(args)
        if module is not None and module.training:
            return  # dropout and batch-norm statistics differ run to run: verify at the first eval call
        with torch.no_grad():
            expected = self.original(*args, **kwargs)
        self.max_abs_diff = max_abs_diff(out, expected)
        self.verified = allclose(out, expected, rtol=self.rtol, atol=self.atol)
        if not self.verified:
            warnings.warn(
                f"to_static: the compiled {self._name()} differs from eager by up to {self.max_abs_diff:.3g} "
                f"(rtol={self.rtol}, atol={self.atol}). HINT: compare with backend='aot_eager' to see whether "
                "inductor causes it, or pass freezing=False; the compiled version is still used.",
                RuntimeWarning, stacklevel=4)

    def _fall_back(self, args: tuple, kwargs: dict, exc: Exception) -> Any:
        out = self.original(*args, **kwargs)  # a bug in the model itself raises here, as in eager
        from sampan.jit.explain import explain

        try:
            report = explain(self.original, *args, **kwargs)
        except Exception:  # explain itself may not cope with what broke compilation
            report = None
        details = str(report) if report is not None and report.breaks else _first_line(exc)
        self.fallback_reason = details
        message = (f"to_static could not compile {self._name()} into one static graph:\n{details}\n"
                   "Fix the lines above (see sampan.jit.explain) to get the compiled speed-up.")
        if self.full_graph:
            raise StaticGraphError(message + " full_graph=True, so this is an error.", report=report) from exc
        self.status = "eager"
        warnings.warn(message + " Running eagerly (dynamic graph) instead.", RuntimeWarning, stacklevel=4)
        return out

    def _name(self) -> str:
        if self.layer is not None:
            return f"{type(self.layer).__name__}.forward"
        return getattr(self.original, "__qualname__", "function")


@dataclasses.dataclass(frozen=True)
class PathChoice:
    """Which path :class:`StaticFunction` runs for one input shape, and the medians that decided it."""

    path: Literal["compiled", "eager"]
    compiled_seconds: float
    eager_seconds: float
    layout: str | None = None  # training of a CNN on the CPU: "contiguous" (NCHW) or "channels_last"
    winograd: bool = False  # inference: the compiled path kept convolves by Winograd (winograd=True or "auto")
    winograd_seconds: float | None = None  # with winograd=True, that variant's median (timed beside the plain one)
    onednn_off: bool = False  # inference: the eager path kept runs with oneDNN off (PyTorch's own convolutions)
    onednn_off_seconds: float | None = None  # that candidate's median, when it was one

    @property
    def kept(self) -> str:
        """What runs, in words: ``"compiled"``, ``"eager, channels-last layout"``,
        ``"compiled, Winograd convolutions"``, ``"eager, oneDNN off"``."""
        layout = f", {self.layout.replace('_', '-')} layout" if self.layout else ""
        if self.onednn_off:
            return "eager, oneDNN off" + layout
        return ("compiled, Winograd convolutions" if self.winograd else self.path) + layout

    def __str__(self) -> str:
        fastest = self.winograd_seconds if self.winograd and self.winograd_seconds else self.compiled_seconds
        if self.onednn_off and self.onednn_off_seconds:
            fastest = self.onednn_off_seconds
        winograd = "" if self.winograd_seconds is None else f", Winograd {self.winograd_seconds * 1e3:.3g} ms"
        off = ("" if self.onednn_off_seconds is None
               else f", eager with oneDNN off {self.onednn_off_seconds * 1e3:.3g} ms")
        return (f"{self.kept} (compiled {self.compiled_seconds * 1e3:.3g} ms{winograd}, eager "
                f"{self.eager_seconds * 1e3:.3g} ms{off}, speed-up {self.eager_seconds / fastest:.2f}x)")


_FORMATS = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}
_ONEDNN_OFF = "eager, oneDNN off"


def _without_onednn(fn: Callable, args: tuple, kwargs: dict) -> Any:
    """``fn(*args, **kwargs)`` with oneDNN (mkldnn) off: convolutions on the CPU then run PyTorch's own kernels
    (im2col + GEMM, or direct). For small convolutions at small batches they were much faster: LeNet at batch 1
    ran 110 us against 192 us with oneDNN (its 6 -> 16 5x5 convolution 23 us against 55 us; AMD EPYC Zen 4, one
    thread). The switch is process-wide, so another thread's convolutions during the call run without oneDNN too:
    the same results within float rounding, at their speed."""
    enabled = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(False)
    try:
        return fn(*args, **kwargs)
    finally:
        torch._C._set_mkldnn_enabled(enabled)


def _layout_of(module: nn.Module) -> str | None:
    weights = [m.weight for m in module.modules() if isinstance(m, nn.Conv2d)]
    if not weights:
        return None
    # a weight with one input channel, or a 1x1 kernel, is both at once: look for one that tells them apart
    return "channels_last" if any(not w.is_contiguous() and w.is_contiguous(memory_format=torch.channels_last)
                                  for w in weights) else "contiguous"


def _set_layout(module: nn.Module, layout: str | None) -> bool:
    """Puts the layer's 4-d weights (and so its activations) in ``layout``, in place: the parameters stay the
    same objects. Returns whether anything changed.

    NCHW means NCHW strides, also for a weight that is both layouts at once (one input channel, as the first
    convolution of a digits CNN): ``.to(memory_format=torch.contiguous_format)`` leaves such a weight's
    channels-last strides as they are, and oneDNN reads strides, not values (see :func:`_settle_ambiguous`)."""
    if layout is None:
        return False
    changed = _layout_of(module) != layout
    if changed:
        module.to(memory_format=_FORMATS[layout])
    if layout == "contiguous":
        changed = _settle_ambiguous(module) or changed
    return changed


def _settle_ambiguous(module: nn.Module) -> bool:
    """Gives NCHW strides to every 4-d parameter and buffer that is contiguous in both layouts (one input channel,
    or a 1 x 1 kernel) but has channels-last strides; the values and their order in memory
    stay. Returns whether any changed.

    Such a weight made a frozen graph fail at its next input size (torch 2.14, inductor's oneDNN convolution):
    compiled, its output was taken to be channels-last from the weight's strides, while the kernel, reading the
    NCHW input, wrote NCHW (``AssertionError: expected ... stride 1==64``; pytorch/pytorch#121400 mended this
    for a one-channel input, not for a one-channel weight). It comes from
    ``net.to(memory_format=torch.channels_last)`` on a network whose first convolution reads one channel (LeNet),
    and from ``prepare(to_static=True)``'s probe of that layout.
    """
    changed = False
    for tensor in (*module.parameters(), *module.buffers()):
        if (tensor.dim() == 4 and tensor.is_contiguous() and tensor.is_contiguous(memory_format=torch.channels_last)
                and tensor.stride() != torch.empty_like(tensor, device="meta",
                                                        memory_format=torch.contiguous_format).stride()):
            tensor.data = tensor.data.clone(memory_format=torch.contiguous_format)  # keeps the object and _version
            changed = True
    return changed


def _address(tensor: torch.Tensor) -> int | None:
    """``tensor.data_ptr()``, or None for a tensor subclass that has no memory of its own."""
    try:
        return tensor.data_ptr()
    except RuntimeError:
        return None


def _storage(tensor: torch.Tensor) -> Any:
    """``tensor.untyped_storage()``, or None for a tensor subclass that has none."""
    try:
        return tensor.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None


def _tensors(out: Any) -> list[torch.Tensor]:
    leaves, _ = torch.utils._pytree.tree_flatten(out)
    return [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]


def _backward(out: Any) -> None:
    """Backward from every output that needs gradients, with gradients of ones (the cost of a backward
    pass does not depend on the values flowing through it)."""
    outs = _tensors(out)
    if outs:
        torch.autograd.backward(outs, [torch.ones_like(t) for t in outs])


def _snapshot(module: nn.Module, inputs: list[torch.Tensor]) -> Callable[[], None]:
    """Returns a function that puts back ``module``'s buffers, the gradients of its parameters and of the
    ``inputs`` that collect one (adversarial training asks for the input's), and the random generators' states
    as they are now."""
    buffers = [(b, b.detach().clone()) for b in module.buffers()]
    leaves = [*module.parameters(), *(t for t in inputs if t.requires_grad and t.is_leaf)]
    grads = [(p, None if p.grad is None else p.grad.detach().clone()) for p in leaves]
    cpu_rng = torch.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None

    def restore() -> None:
        with torch.no_grad():
            for buffer, saved in buffers:
                buffer.copy_(saved)
        for param, grad in grads:
            param.grad = None if grad is None else grad.clone()
        torch.set_rng_state(cpu_rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)

    return restore


class FrozenBackend:
    """``backend`` under a new identity: Dynamo keeps compiled graphs per backend object, so each frozen
    generation (and the unfrozen graph) gets a cache of its own. Freezing itself is switched on around
    the call, in ``StaticFunction._run_compiled``."""

    def __init__(self, backend: str, rewrite: Callable[[torch.fx.GraphModule], int] | None = None,
                 probe: Callable[[torch.fx.GraphModule], float] | None = None):
        self.backend = torch._dynamo.lookup_backend(backend)
        self.rewrite, self.rewritten = rewrite, 0  # a graph pass run before the backend; what it changed last
        self.probe, self.probed = probe, 0.0  # a measure of the graph taken before the backend; its last value

    def __call__(self, graph_module, example_inputs):
        if self.probe is not None:
            self.probed = self.probe(graph_module)
        if self.rewrite is not None:
            self.rewritten = self.rewrite(graph_module)
        return self.backend(graph_module, example_inputs)


def _analysis_mode_on() -> bool:
    """A dispatch mode such as ``FlopCounterMode`` (FLOP counts, summaries) is active: Dynamo skips every
    frame under it, so that call runs eagerly; compiling is tried again at the next ordinary call."""
    return torch.utils._python_dispatch.is_in_torch_dispatch_mode(include_infra_modes=False)


def _is_recompile_limit(exc: BaseException) -> bool:
    limit_hit = getattr(getattr(torch._dynamo, "exc", None), "FailOnRecompileLimitHit", None)
    return limit_hit is not None and isinstance(exc, limit_hit)


_RECOMPILE_WARNED: list[bool] = []


def _warn_recompile_limit_once(reason: str) -> None:
    """One warning per process, however many models fall back (a sweep builds dozens)."""
    if _RECOMPILE_WARNED:
        return
    _RECOMPILE_WARNED.append(True)
    warnings.warn(f"to_static: {reason}, so models built from now on may run eagerly (dynamic graph): "
                  f"results are the same, only slower. HINT: build fewer models of one class per process "
                  f"(restart the kernel between sweeps), or raise torch._dynamo.config.recompile_limit.",
                  RuntimeWarning, stacklevel=5)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def to_static(layer_or_function: Callable | None = None, input_spec=None, *, backend: str = "inductor",
              full_graph: bool = False, verify: bool = True, freezing: bool | None = None,
              rtol: float = 1e-3, atol: float = 1e-4, pick_faster: bool = True, winograd: bool | str = "auto"):
    """Compiles a layer's ``forward`` or a function with ``torch.compile`` (``paddle.jit.to_static``).

    ``None`` dimensions of ``input_spec`` become dynamic (``torch._dynamo.mark_dynamic``), so
    other sizes reuse the graph; torch still specializes size 1, and convolutions choose
    another algorithm from batch 16, so a CNN compiles at most three graphs. In inference (``eval()`` and
    ``torch.no_grad()``) inductor compiles with ``freezing=True`` (weights folded as constants); after the
    weights change (an optimizer step, ``load_state_dict``, an in-place op under ``torch.no_grad()``,
    ``w.data = ...``, ``torch.nn.utils.vector_to_parameters``) it uses the unfrozen graph, so results do not go
    stale (``layer.forward.refreeze()`` folds the new weights in). The one change torch does not record is an
    in-place write through ``.data`` (``w.data.mul_(2)``, ``w.data.copy_(v)``, as old EMA code does): call
    ``layer.forward.refreeze()`` after one, or write ``with torch.no_grad(): w.mul_(2)`` instead. A
    ``copy.deepcopy`` of the layer compiles again at its first call, with its own weights. When the function
    cannot be one graph, it runs eagerly with one warning listing the graph breaks and their
    source lines (or raises :class:`StaticGraphError` with ``full_graph=True``).

    Args:
        layer_or_function: an ``nn.Module`` (converted in place and returned), a function, or
            nothing to use ``@to_static(input_spec=...)`` as a decorator (also on ``forward``). A layer whose
            class's ``forward`` carries ``@to_static`` has a static forward of its own with the decorator's
            options, as every instance of such a class does (this call's ``input_spec`` where the decorator gave
            none and nothing ran yet): its graphs, choices, training path, layout and optimizer settings belong to
            that layer, not to every instance.
        input_spec: ``sampan.InputSpec`` list, one per tensor the function takes; ``None`` dims are dynamic. Calls
            are checked against it, as Paddle checks them: the first call whose tensors contradict it (another
            count, rank or dtype, or a size where the spec has a number) raises a ``ValueError`` naming the spec
            and the fix, before anything compiles for it (once per new shape; a call shaped like the last costs a
            comparison per tensor). Calls under ``FlopCounterMode`` and similar analysis modes are not checked.
        backend: a ``torch.compile`` backend: ``"inductor"``, ``"aot_eager"``, ``"eager"``...
        full_graph: raise instead of falling back when there are graph breaks.
        verify: compare the first compiled (eval-mode) output with eager within ``rtol`` / ``atol``
            and warn when they differ.
        freezing: inductor ``freezing`` for inference calls; default on for ``"inductor"``.
        pick_faster: at the first inference call of each input shape (after compiling), time the
            compiled and the eager forward side by side and keep the faster one for that shape,
            so compiling never makes a call slower; the choices are in ``forward.choices`` and in
            :func:`sampan.jit.explain`. A model with convolutions on the CPU also times eager with oneDNN
            off (PyTorch's own convolution kernels), which ran LeNet at batch 1 in 0.6x eager's time; its
            outputs must match eager's within ``rtol`` / ``atol`` to be a candidate. Training calls are
            measured once, at the first one (a whole training step on each path, leaving no trace), and take
            the faster path from then on (``forward.train_choice``); in a distributed job they always run
            compiled.
        winograd: ``True``: also try, per inference input shape, the frozen graph with its 3 x 3 stride-1
            convolutions computed by Winograd (:mod:`sampan.jit.winograd`: F(4 x 4, 3 x 3), 4x fewer
            multiplications, in a C++ kernel built on first use where a map is large enough and a compiler
            is present; else F(2 x 2, 3 x 3), 2.25x fewer), checked against eager and kept only when it is
            the fastest. Worth it where the direct convolution is already at the FMA units' limit, such as
            AVX2-only CPUs (resnet18 at batch 1 on an AMD EPYC: 1.77x eager against 1.32x for the plain frozen
            graph); costs a second compile of the network (about 25 s for resnet18 on one core, plus the
            kernel's build, 10-30 s, once per machine). Needs ``backend="inductor"``, freezing and
            ``pick_faster`` (a ValueError says so otherwise). ``"auto"`` (the default): on a CPU whose widest
            vectors are AVX2, the one frozen graph computes its heavy 3 x 3 convolutions by F(4 x 4, 3 x 3)
            (:func:`sampan.jit.winograd.auto_rewrite`: at least 0.2 GFLOP of them per call, as in resnet18; no
            second compile), timed against eager like any compiled graph; on a CPU with AVX-512, where
            oneDNN's direct convolution is faster but not always enough, a frozen graph with those F(4 x 4)
            convolutions is compiled as well (only when they reach the same 0.2 GFLOP) and timed beside the
            plain one (resnet18 at batch 1 on an AMD EPYC Zen 4: 26 ms against 33 ms, eager 45 ms); with
            another backend, nothing changes. ``False``: never. On a CPU with AMX-BF16 (Intel Xeon, Sapphire
            Rapids on) that timed variant also computes the convolutions Winograd leaves (stride 2, 1 x 1, small
            maps; at batch 1 all) by three bf16 products on AMX (:mod:`sampan.jit.amx`, float32 results to about 5e-6).

    Example:
        >>> import sampan, torch
        >>> from sampan.vision.models import LeNet
        >>> net = sampan.jit.to_static(LeNet(), input_spec=[sampan.InputSpec([None, 1, 28, 28])])  # doctest: +SKIP
        >>> _ = net.eval(); logits = net(torch.randn(5, 1, 28, 28))                                   # doctest: +SKIP
    """
    if not isinstance(backend, str) and not callable(backend):
        raise TypeError(bad_argument("backend", backend, "a torch.compile backend name such as 'inductor'"))
    if isinstance(backend, str):
        _check_backend(backend)
    if isinstance(layer_or_function, type) and issubclass(layer_or_function, nn.Module):
        raise TypeError(bad_argument("layer_or_function", layer_or_function, "an nn.Module instance or a function",
                                     f"create the network first: to_static({layer_or_function.__name__}(...)), "
                                     "not the class"))
    if winograd not in (True, False, "auto"):
        raise ValueError(bad_argument("winograd", winograd, "True, False or 'auto'"))
    if winograd is True and (backend != "inductor" or freezing is False or not pick_faster):
        raise ValueError(bad_argument(
            "winograd", winograd, "False with this backend, freezing and pick_faster",
            f"winograd=True is a timed candidate of inductor's frozen graph: it needs backend='inductor' (got "
            f"{backend!r}), freezing left on (got {freezing!r}) and pick_faster=True (got {pick_faster!r})"))
    options = dict(input_spec=input_spec, backend=backend, full_graph=full_graph, verify=verify,
                   freezing=freezing, rtol=rtol, atol=atol, pick_faster=pick_faster, winograd=winograd)
    if layer_or_function is None:
        return lambda target: to_static(target, **options)
    if isinstance(layer_or_function, StaticFunction):
        return layer_or_function
    if isinstance(layer_or_function, nn.Module):
        layer = layer_or_function
        # the layer's own, or with @to_static on its class's forward the layer's own made now (the decorator's
        # options, this layer's state; this call's input_spec where the decorator gave none)
        current = static_forward(layer)
        if current is None:
            layer.forward = StaticFunction(layer.forward, layer=layer, **options)
        elif current.input_spec is None and input_spec is not None and current.status == "pending":
            current.input_spec = normalize_specs(input_spec)
        return layer
    if callable(layer_or_function):
        return StaticFunction(layer_or_function, layer=None, **options)
    raise TypeError(bad_argument("layer_or_function", layer_or_function, "an nn.Module or a function"))


def _check_backend(backend: str) -> None:
    """Refuses a ``torch.compile`` backend name torch does not know (a typo would otherwise surface at the first
    call as a compile failure, and the layer run eagerly with a warning about graph breaks)."""
    from torch._dynamo.backends.registry import lookup_backend

    try:
        lookup_backend(backend)
    except Exception:  # noqa: BLE001 - torch's InvalidBackend (its module has moved between releases)
        import difflib

        known = torch._dynamo.list_backends(exclude_tags=())
        close = difflib.get_close_matches(backend, known, n=1)
        fix = (f"did you mean backend={close[0]!r}? " if close else "") + "torch._dynamo.list_backends() lists them"
        raise ValueError(bad_argument("backend", backend, "a torch.compile backend name such as 'inductor'",
                                      fix)) from None


def static_forward(layer: nn.Module) -> StaticFunction | None:
    """The :class:`StaticFunction` that runs ``layer``'s ``forward``: set on the layer by ``to_static(layer)``, or,
    with ``@to_static`` on its class's ``forward``, the layer's own (made now if the layer was never called); None
    for a plain layer.

    Example:
        >>> import torch
        >>> from sampan.jit import to_static
        >>> from sampan.jit.to_static import static_forward
        >>> static_forward(to_static(torch.nn.Linear(2, 2))).status
        'pending'
    """
    static = layer.__dict__.get("forward")
    if isinstance(static, StaticFunction):
        return static
    declared = inspect.getattr_static(type(layer), "forward", None)
    return declared.__get__(layer) if isinstance(declared, StaticFunction) and "forward" not in layer.__dict__ else None


def not_to_static(layer: nn.Module) -> nn.Module:
    """Undoes :func:`to_static` on a layer (its ``forward`` runs eagerly again)."""
    if isinstance(layer.__dict__.get("forward"), StaticFunction):
        del layer.forward
    return layer
