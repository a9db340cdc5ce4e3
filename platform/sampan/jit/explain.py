"""``sampan.jit.explain``: how many graphs ``torch.compile`` makes of a model, and why it breaks."""
from __future__ import annotations

import contextlib
import inspect
import linecache
import types
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from sampan.errors import bad_argument
from sampan.spec import dtype_name, example_inputs
from sampan.utils.i18n import tr

# (words to look for in dynamo's reason, lower case) -> plain-language hint
_HINTS: list[tuple[tuple[str, ...], str]] = [
    (("item()", ".item", "capture_scalar_outputs", "tolist"),
     "`.item()` / `.tolist()` turns a tensor into a Python number, which a graph cannot hold. Keep the value "
     "a tensor (e.g. `torch.where(x > 0, a, b)` instead of `a if x.item() > 0 else b`), or move it out of forward."),
    (("data-dependent", "data dependent", "generic_jump", "jump", "branch", "bool(", "__bool__"),
     "Python `if` / `while` on a tensor's *value* (data-dependent control flow): the graph cannot know which "
     "branch to take. Compute both and pick with `torch.where`, or use `torch.cond(pred, true_fn, false_fn, (x,))`."),
    (("print", "builtin", "logging", "logger", "warn"),
     "Printing or logging inside forward. Remove it, or guard it with `if not torch.compiler.is_compiling():`."),
    (("numpy", "ndarray", ".numpy"),
     "Converting to NumPy inside forward leaves the graph. Use the torch equivalent of the NumPy call."),
]
_UNSUPPORTED_HINT = ("Python that the compiler does not support (a C extension, an unsupported builtin or library "
                     "call, a generator...). Move it out of forward, or wrap that helper in "
                     "`@torch.compiler.disable` so the rest still compiles.")


def hint_for(reason: str) -> str:
    """A plain-language hint for one graph-break reason, in the learner's language (:mod:`sampan.utils.i18n`)."""
    low = reason.lower()
    for words, hint in _HINTS:
        if any(w in low for w in words):
            return tr(hint)
    return tr(_UNSUPPORTED_HINT)


@dataclass(frozen=True)
class GraphBreak:
    """One place where ``torch.compile`` had to leave the graph.

    Attributes:
        reason: dynamo's first line of explanation.
        filename, lineno: the user source line that caused it.
        source: that line's text.
        hint: what usually fixes it.
    """

    reason: str
    filename: str | None
    lineno: int | None
    source: str
    hint: str

    def __str__(self) -> str:
        where = f"{self.filename}:{self.lineno}" if self.filename else tr("<unknown location>")
        text = f"- {where}: {self.reason}"
        if self.source:
            text += f"\n      {self.source}"
        return text + f"\n    {tr('HINT: ')}{self.hint}"


@dataclass
class ExplainReport:
    """What ``torch._dynamo.explain`` found, in plain words.

    Attributes:
        graph_count: graphs the model was cut into (1 means one static graph).
        breaks: the graph breaks with reasons, source lines and hints.
        op_count: operators captured in all graphs.
        choices: for a ``to_static`` layer, the path kept per input shape (``"compiled"`` or
            ``"eager"``, whichever measured faster after warm-up), keyed by the shapes, and under
            ``"training"`` the path of training calls (measured on a whole training step).
        training_passes: what ``Model.prepare(to_static=True)`` changed for training besides compiling.
    """

    graph_count: int
    breaks: list[GraphBreak] = field(default_factory=list)
    op_count: int = 0
    choices: dict[str, Any] = field(default_factory=dict)
    training_passes: list[str] = field(default_factory=list)

    @property
    def graph_break_count(self) -> int:
        return len(self.breaks)

    @property
    def ok(self) -> bool:
        """True when the model is one graph without breaks (ready for ``torch.export``)."""
        return not self.breaks and self.graph_count <= 1

    def __str__(self) -> str:
        head = tr("{graphs} graph(s), {breaks} graph break(s), {ops} op(s) captured.", graphs=self.graph_count,
                  breaks=self.graph_break_count, ops=self.op_count)
        text = head + (tr(" The whole forward is one static graph.") if not self.breaks else
                       "\n" + "\n".join(str(b) for b in self.breaks))
        if self.choices:
            text += "\n" + tr("to_static runs, per input shape (the faster path, measured after warm-up):")
            text += "".join(f"\n- {shape}: {choice}" for shape, choice in self.choices.items())
        if self.training_passes:
            text += "\n" + tr("to_static training also uses: ") + ", ".join(self.training_passes)
        return text

    def _repr_pretty_(self, p, cycle):  # IPython shows the readable form
        p.text(str(self))


def _first_line(text: str) -> str:
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()
    return str(text).strip()


def _user_frame(stack: list) -> Any:
    """The innermost frame outside torch (falls back to the innermost frame)."""
    for frame in reversed(stack or []):
        name = getattr(frame, "filename", "") or ""
        if "/torch/" not in name.replace("\\", "/"):
            return frame
    return stack[-1] if stack else None


def _breaks_from(reasons: list) -> list[GraphBreak]:
    out, seen = [], set()
    for r in reasons:
        reason = _first_line(getattr(r, "reason", r))
        if reason.startswith("generic_jump"):  # dynamo's name for a branch on a tensor
            reason = f"data-dependent branching: `if` / `while` on a tensor's value ({reason})"
        frame = _user_frame(list(getattr(r, "user_stack", []) or []))
        filename = getattr(frame, "filename", None)
        lineno = getattr(frame, "lineno", None)
        key = (reason, filename, lineno)
        if key in seen:
            continue
        seen.add(key)
        source = (getattr(frame, "line", None) or (linecache.getline(filename, lineno) if filename else "")).strip()
        out.append(GraphBreak(reason, filename, lineno, source, hint_for(str(getattr(r, "reason", r)))))
    return out


def explain(layer: Callable, *example_inputs: Any, **example_kwargs: Any) -> ExplainReport:
    """Runs ``layer`` once under ``torch._dynamo.explain`` and reports graphs and graph breaks.

    Calls ``torch._dynamo.explain``; mirrors what Paddle's ``to_static`` reports when a
    dynamic-to-static conversion fails. Note that ``torch._dynamo.explain`` resets
    ``torch.compile``'s caches: models compiled earlier compile again on their next call.

    Args:
        layer: an ``nn.Module`` or a function.
        *example_inputs: inputs to run it on. Left out for a layer converted with an ``input_spec``
            (``to_static(net, input_spec=[...])``): random inputs of batch 2 built from that spec.

    Raises:
        TypeError: no inputs given, and the layer has no ``input_spec`` to build them from.

    Example:
        >>> import sampan
        >>> net = sampan.vision.models.LeNet()
        >>> report = sampan.jit.explain(net, torch.randn(2, 1, 28, 28))  # doctest: +SKIP
        >>> print(report)                                                 # doctest: +SKIP
        1 graph(s), 0 graph break(s), 10 op(s) captured. The whole forward is one static graph.
    """
    from sampan.jit.save_load import eager_forward
    from sampan.jit.to_static import StaticFunction, static_forward

    module = isinstance(layer, torch.nn.Module)
    bound = inspect.ismethod(layer)
    if module:
        original = static_forward(layer)
    else:  # to_static(fn), to_static(net).forward, or net.forward with @to_static on the class's forward
        function = layer.__func__ if bound else layer
        original = function if isinstance(function, StaticFunction) else None
    if not example_inputs and not example_kwargs:
        example_inputs = _inputs_from_spec(layer, original)
    # the Python forward, not the compiled wrapper: eager_forward takes to_static(layer) or @to_static off a module
    with eager_forward(layer) if module else contextlib.nullcontext():
        target = layer if module or original is None else original.original
        if bound and original is not None:  # the class's forward, unbound: given its instance again
            target = types.MethodType(target, layer.__self__)
        with torch.no_grad():
            result = torch._dynamo.explain(target)(*example_inputs, **example_kwargs)
    choices = {_shapes(key): choice for key, choice in getattr(original, "choices", {}).items()}
    if getattr(original, "train_choice", None) is not None:
        choices["training"] = original.train_choice
    return ExplainReport(graph_count=int(result.graph_count), breaks=_breaks_from(list(result.break_reasons)),
                         op_count=int(result.op_count), choices=choices,
                         training_passes=list(getattr(original, "training_passes", [])))


def _inputs_from_spec(layer: Callable, static: Any) -> tuple:
    """Random inputs (batch 2) from the ``input_spec`` that ``to_static`` was given, for ``explain(net)``."""
    specs = getattr(static, "input_spec", None)
    if not specs:
        name = getattr(layer, "__qualname__", None) or type(layer).__name__
        raise TypeError(bad_argument(
            "example_inputs", "nothing", f"the inputs to run {name} on (it has no input_spec to build them from)",
            "pass them after the layer, e.g. sampan.jit.explain(net, torch.randn(2, 1, 28, 28)), or convert it "
            "with sampan.jit.to_static(net, input_spec=[sampan.InputSpec([None, 1, 28, 28])]) first"))
    return example_inputs(list(specs), batch=2)


def _shapes(key: tuple) -> str:
    return ", ".join(f"{list(shape)} {dtype_name(dtype)}" for shape, dtype in key)
