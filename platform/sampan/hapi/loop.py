"""The one training loop and its input, :class:`LoopState`.

``Model.prepare`` builds the state (networks, optimizer, loss, precision, strategy, accumulation,
device, specs, profiling clock); ``train_epoch`` / ``evaluate_loop`` / ``predict_loop`` and
``Model.train_batch`` / ``eval_batch`` / ``predict_batch`` read only that, plus the public
``model.global_step`` and ``model.stop_training`` through which callbacks steer. Optional features
(AMP, accumulation, distribution, profiling) are objects whose hooks do nothing by default, so this
file never branches on feature flags.
"""
from __future__ import annotations

import copy
import dataclasses
import weakref
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import torch

from sampan.amp.precision import PrecisionPlugin
from sampan.distributed.base import Strategy
from sampan.errors import bad_argument
from sampan.hapi.batches import (check_labels_for_loss, check_specs, explain_failure, required_inputs, split_batch,
                                 to_device)
from sampan.hapi.metrics import MetricSet
from sampan.profiler.phases import NO_CLOCK, PhaseClock
from sampan.spec import InputSpec

if TYPE_CHECKING:
    from sampan.callbacks.base import CallbackList
    from sampan.hapi.model import Model

NO_LIMIT = 2**62
"""``max_steps`` meaning "no limit": an int, so it compares with step counts and goes through ``min``."""

FAST_DEV_RUN_ENV = "SAMPAN_FAST_DEV_RUN"
_FAST_DEV_RUN_SAID: set[int] = set()


def fast_dev_run(stacklevel: int = 1) -> int:
    """The batches per epoch that ``Model.fit`` and ``Model.evaluate`` stop at: ``$SAMPAN_FAST_DEV_RUN``
    (a smoke run, as Lightning's ``fast_dev_run``: every line of a notebook or script runs, each training
    and evaluation on a few batches, so a mistake shows in seconds; the numbers it learns mean nothing),
    else :data:`NO_LIMIT`. ``predict`` is never cut: its outputs keep one row per sample. Says so once
    per process; the warning names the line ``stacklevel`` frames above the caller (1: the caller's caller).

    Example (a shell; the test suite runs every lesson's starter code this way)::

        SAMPAN_FAST_DEV_RUN=2 papermill lesson.ipynb out.ipynb
    """
    import os
    import warnings

    value = os.environ.get(FAST_DEV_RUN_ENV, "").strip()
    if value in ("", "0"):
        return NO_LIMIT
    try:
        batches = int(value)
    except ValueError:
        batches = -1
    if batches < 1:
        raise ValueError(bad_argument(f"${FAST_DEV_RUN_ENV}", value, "a positive number of batches per epoch",
                                      f"unset it for a real run, or set {FAST_DEV_RUN_ENV}=2 for a smoke run"))
    if batches not in _FAST_DEV_RUN_SAID:
        _FAST_DEV_RUN_SAID.add(batches)
        warnings.warn(f"{FAST_DEV_RUN_ENV}={batches}: fit and evaluate stop after {batches} batches per epoch "
                      f"(a smoke run: everything runs, nothing is learned). Unset it for a real run.",
                      UserWarning, stacklevel=stacklevel + 2)
    return batches


@dataclasses.dataclass(eq=False)
class LoopState:
    """Everything the loop reads, built by ``Model.prepare`` (``Model``'s private attributes are views of it).

    Example:
        >>> import torch
        >>> from sampan.hapi.loop import LoopState
        >>> net = torch.nn.Linear(4, 2)
        >>> state = LoopState(train_net=net, eval_net=net, loss=torch.nn.CrossEntropyLoss())
        >>> state.accumulate_steps, state.n_inputs
        (1, None)
    """

    train_net: torch.nn.Module
    eval_net: torch.nn.Module
    device: torch.device = dataclasses.field(default_factory=lambda: torch.device("cpu"))
    optimizer: torch.optim.Optimizer | None = None
    loss: Callable | None = None
    precision: PrecisionPlugin = dataclasses.field(default_factory=PrecisionPlugin)
    strategy: Strategy = dataclasses.field(default_factory=Strategy)
    accumulate_steps: int = 1
    grad_clip: float | None = None
    inputs: list[InputSpec] | None = None
    labels: list[InputSpec] | None = None
    clock: PhaseClock = NO_CLOCK
    batch_calls: int = 0  # calls of Model.train_batch / eval_batch / predict_batch; the first one is checked

    @property
    def n_inputs(self) -> int | None:
        return len(self.inputs) if self.inputs else None

    @property
    def n_labels(self) -> int | None:
        return len(self.labels) if self.labels else None

    def params(self) -> list[torch.Tensor]:
        return [p for g in self.optimizer.param_groups for p in g["params"]]

    def split(self, batch: Any, with_labels: bool = True, least_inputs: int = 1) -> tuple[list, list]:
        """The batch's inputs and labels, on the device."""
        inputs, labels = split_batch(batch, self.n_inputs, self.n_labels, with_labels=with_labels,
                                     least_inputs=least_inputs)
        return to_device(inputs, self.device), to_device(labels, self.device) if with_labels else labels

    def compute_loss(self, outputs: Any, labels: list) -> torch.Tensor:
        outs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
        return self.loss(*outs, *labels)


class StateField:
    """A ``Model`` attribute stored in its :class:`LoopState`: one copy, so what the loop reads is what
    ``Model`` saves. ``_optimizer = StateField()`` reads and writes ``model._loop.optimizer``."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.field = name.lstrip("_")

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        return self if obj is None else getattr(obj._loop, self.field)

    def __set__(self, obj: Any, value: Any) -> None:
        setattr(obj._loop, self.field, value)


def length(loader: Any) -> int | None:
    """``len(loader)``, or None when it has none (a DataLoader over an ``IterableDataset`` without ``__len__``
    has the method but raises ``TypeError``)."""
    try:
        return len(loader)
    except TypeError:
        return None


def clock_of(callbacks: Any) -> PhaseClock:
    """The first callback that is also a :class:`~sampan.profiler.phases.PhaseClock` (a ``StepTimer``), else
    the do-nothing clock."""
    return next((c for c in callbacks if isinstance(c, PhaseClock)), NO_CLOCK)


def _lr(optimizer: torch.optim.Optimizer) -> float:
    return float(optimizer.param_groups[0]["lr"])


def forward(state: LoopState, net: torch.nn.Module, inputs: list, labels: list, step: int,
            keep: int | None = None) -> tuple[Any, torch.Tensor | None]:
    """The forward pass and the loss (None without a loss or labels) of one batch.

    Batch 0 runs with the checks that turn torch's terse errors into ones that name the fix; on any
    batch a failing loss (labels out of range, wrong shape) is explained the same way. ``keep``: only the
    outputs' first ``keep`` rows count (``labels`` hold those alone): the rest are the padding that ends a
    rank's share of a distributed evaluation; the loss covers the rows kept (None when there are none).
    """
    if step == 0:
        check_specs(state.inputs, inputs, "inputs")
        check_specs(state.labels, labels, "labels")
        try:
            outputs = net(*inputs)
        except torch.cuda.OutOfMemoryError:
            raise  # not the batch's fault: torch's own message says what to do
        except (RuntimeError, TypeError, IndexError) as exc:
            raise explain_failure(exc, "forward pass", inputs, labels, step=0) from exc
        outputs = first_rows(outputs, keep)
        if state.loss is not None and labels:
            check_labels_for_loss(state.loss, outputs, labels)
    else:
        outputs = first_rows(net(*inputs), keep)
    if state.loss is None or not labels or keep == 0:
        return outputs, None
    try:
        return outputs, state.compute_loss(outputs, labels)
    except torch.cuda.OutOfMemoryError:
        raise
    except (RuntimeError, TypeError, IndexError, ValueError) as exc:
        raise explain_failure(exc, "loss", inputs, labels, step=step) from exc


def first_rows(value: Any, keep: int | None) -> Any:
    """The first ``keep`` rows of a tensor, or of each tensor in a list or tuple (``keep=None``: all of them).

    Example:
        >>> import torch
        >>> from sampan.hapi.loop import first_rows
        >>> [t.shape[0] for t in first_rows([torch.zeros(3, 2), torch.zeros(3)], 1)]
        [1, 1]
    """
    if keep is None:
        return value
    if isinstance(value, torch.Tensor):
        return value[:keep] if value.ndim and value.shape[0] > keep else value
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
        return type(value)(*(first_rows(v, keep) for v in value))
    if type(value) in (tuple, list):
        return type(value)(first_rows(v, keep) for v in value)
    if type(value) is dict:
        return {k: first_rows(v, keep) for k, v in value.items()}
    return value


def train_step(state: LoopState, inputs: list, labels: list, *, step: int, sync: bool,
               params: list | None = None) -> tuple[Any, torch.Tensor]:
    """One micro-batch: forward, loss, backward (loss divided by ``accumulate_steps``), and when ``sync``
    the optimizer step over ``params`` (default: the optimizer's). Returns the outputs and the undivided loss."""
    net, clock, precision = state.train_net, state.clock, state.precision
    clock.cut("forward")
    inputs = precision.convert_input(inputs)
    with state.strategy.no_sync(net, sync), precision.autocast():
        outputs, loss = forward(state, net, inputs, labels, step)
    if loss is None:
        raise ValueError("Training needs labels and a loss; this batch has no labels. HINT: make the Dataset "
                         "return (inputs..., labels...) or give Model(labels=[InputSpec(...)]).")
    clock.cut("backward")
    accum = state.accumulate_steps
    precision.backward(loss / accum if accum > 1 else loss)
    if sync:
        clock.cut("optimizer")
        precision.step(state.optimizer, state.params() if params is None else params, state.grad_clip)
        clock.cut("other")
        state.optimizer.zero_grad(set_to_none=True)
    else:
        clock.cut("other")
    return outputs, loss


def train_epoch(state: LoopState, model: "Model", loader, cbks: "CallbackList", metrics: MetricSet, *,
                max_steps: int, log_freq: int) -> dict:
    opt, precision, clock = state.optimizer, state.precision, state.clock
    steps = length(loader)
    accum, params = state.accumulate_steps, state.params()
    state.train_net.train()
    metrics.reset()
    total, seen, step = 0.0, 0, -1
    clock.step_end()
    for step, batch in enumerate(loader):
        if step >= max_steps or model.stop_training:
            break
        clock.cut("callbacks")
        cbks.call("on_train_batch_begin", step, {})
        clock.cut("h2d")
        inputs, labels = state.split(batch)
        sync = (step + 1) % accum == 0 or step + 1 == steps or step + 1 == max_steps
        outputs, loss = train_step(state, inputs, labels, step=step, sync=sync, params=params)
        if sync:
            model.global_step += 1
        value, n = loss.item(), _batch_size(inputs)
        total += value * n
        seen += n
        metrics.add(outputs, labels)
        logs = {"loss": value, "batch_size": n, "step": model.global_step}
        if (step + 1) % log_freq == 0:
            logs.update(metrics.results(), lr=_lr(opt), **precision.logs())
        clock.cut("callbacks")
        cbks.call("on_train_batch_end", step, logs)
        clock.step_end()
    clock.pause()
    if step < 0:
        raise ValueError("The training data produced no batch. HINT: check that the dataset is not empty and that "
                         "batch_size is not larger than the dataset with drop_last=True.")
    sums = state.strategy.all_reduce_sum(torch.tensor([total, float(seen)], dtype=torch.float64))
    return {"loss": float(sums[0] / max(sums[1], 1)), **metrics.results(), "lr": _lr(opt), **precision.logs()}


def _batch_size(inputs: list) -> int:
    first = inputs[0] if inputs else None
    return int(first.shape[0]) if isinstance(first, torch.Tensor) and first.ndim else len(first or ())


@torch.no_grad()
def eval_step(state: LoopState, inputs: list, labels: list, step: int, keep: int | None = None
              ) -> tuple[Any, torch.Tensor | None]:
    """The forward pass and loss of one evaluation batch, under the precision's autocast (``keep``: see
    :func:`forward`)."""
    with state.precision.autocast():
        return forward(state, state.eval_net, inputs, labels, step, keep)


@torch.no_grad()
def evaluate_loop(state: LoopState, loader, cbks: "CallbackList", metrics: MetricSet, *, max_steps: int) -> dict:
    """The loss and metrics over ``loader``. Under a distributed strategy every rank runs the same batches (its
    share, padded to one length), and the padding is cut before the loss and the metrics: over all ranks, each
    sample counts once; a metric that does not sync across ranks itself is fed every rank's rows
    (``MetricSet.reset``), as ``paddle.Model`` gathers them."""
    state.eval_net.eval()
    metrics.reset(state.strategy)
    total = torch.zeros(2, dtype=torch.float64)
    remaining = state.strategy.real_rows(loader)  # this rank's samples; the rows after them are padding
    cbks.call("on_eval_begin", {})
    for step, batch in enumerate(loader):
        if step >= max_steps:
            break
        cbks.call("on_eval_batch_begin", step, {})
        inputs, labels = state.split(batch)
        n = min(_batch_size(inputs), remaining)
        remaining -= n
        labels = first_rows(labels, n)
        outputs, loss = eval_step(state, inputs, labels, step, keep=n)
        if loss is not None:
            total += torch.tensor([loss.item() * n, n], dtype=torch.float64)
        metrics.add(outputs, labels)  # a batch of padding alone adds no rows, but every rank's metrics have fed
        cbks.call("on_eval_batch_end", step, {"loss": loss.item() if loss is not None else None, "batch_size": n})
    total = state.strategy.all_reduce_sum(total)
    logs = ({"loss": float(total[0] / total[1])} if total[1] > 0 else {})
    logs.update(metrics.results(scalars_only=False))
    cbks.call("on_eval_end", logs)
    return logs


@torch.no_grad()
def predict_step(state: LoopState, inputs: list, step: int) -> list[torch.Tensor]:
    """The network's outputs for one batch, detached, on the CPU, floating point as float32."""
    if step == 0:
        check_specs(state.inputs, inputs, "inputs")
    with state.precision.autocast():
        try:
            outputs = state.eval_net(*inputs)
        except torch.cuda.OutOfMemoryError:
            raise
        except (RuntimeError, TypeError, IndexError) as exc:
            if step:
                raise
            raise explain_failure(exc, "forward pass", inputs, [], step=0) from exc
    outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    return [o.detach().float().cpu() if o.is_floating_point() else o.detach().cpu() for o in outputs]


@torch.no_grad()
def predict_loop(state: LoopState, loader, cbks: "CallbackList") -> list[list[torch.Tensor]]:
    """Each batch's outputs. Under a distributed strategy every rank gets every sample's outputs, in the data's
    order (as ``paddle.Model.predict`` gathers them), without the padding of the ranks' shares."""
    state.eval_net.eval()
    collected: list[list[torch.Tensor]] = []
    least = required_inputs(state.eval_net)  # (x1, x2) for forward(x1, x2) is two inputs, not an input and a label
    cbks.call("on_predict_begin", {})
    for step, batch in enumerate(loader):
        cbks.call("on_predict_batch_begin", step, {})
        inputs, _ = state.split(batch, with_labels=False, least_inputs=least)
        collected.append(predict_step(state, inputs, step))
        cbks.call("on_predict_batch_end", step, {"batch_size": _batch_size(inputs)})
    cbks.call("on_predict_end", {})
    return state.strategy.gather_predictions(collected, loader)  # distributed: every rank's, in the data's order


# ---------------------------------------------------------------- one batch at a time (paddle.Model.*_batch)
def as_tensors(items: Any, argument: str, device: torch.device) -> list:
    """Paddle's ``*_batch`` arguments: a tensor, a NumPy array or a list/tuple of them -> tensors on ``device``."""
    if items is None:
        return []
    out = []
    for item in (list(items) if isinstance(items, (list, tuple)) else [items]):
        if isinstance(item, np.ndarray):
            item = torch.from_numpy(item)
        if not isinstance(item, torch.Tensor):
            raise TypeError(bad_argument(argument, item, "a torch.Tensor, a NumPy array, or a list of them",
                                         f"pass {argument}=torch.tensor(...) (one per network input)"))
        out.append(item)
    return to_device(out, device)


def _numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    return (t.float() if t.is_floating_point() else t).cpu().numpy()


_BATCH_TWINS: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()


def _batch_metrics(metrics: Sequence[Any], outputs: Any, labels: list) -> list:
    """Each metric's value on this batch alone (what Paddle's ``Metric.update`` returns); the batch is also added
    to the metric itself, as in Paddle, so ``metric.accumulate()`` after a loop of ``train_batch`` calls covers
    every batch since the last ``metric.reset()``. The batch value comes from a copy of the metric, reset."""
    values = []
    out, lab = (outputs[0] if isinstance(outputs, (tuple, list)) else outputs).detach(), labels[0].detach()
    for m in metrics:
        try:
            twin = _BATCH_TWINS.get(m) or _BATCH_TWINS.setdefault(m, copy.deepcopy(m))
        except TypeError:  # a metric that cannot be a dict key (it defines __eq__ alone): a new copy each time
            twin = copy.deepcopy(m)
        twin.reset()
        twin.feed(out, lab)
        m.feed(out, lab)
        result = list(twin.results().values())
        values.append(result[0] if len(result) == 1 else result)
    return values


def _losses_and_metrics(loss: torch.Tensor | None, metrics: Sequence[Any], outputs: Any, labels: list):
    losses = [] if loss is None else [_numpy(loss)]
    if metrics and labels:
        return losses, _batch_metrics(metrics, outputs, labels)
    return losses


def train_batch(state: LoopState, model: "Model", metrics: Sequence[Any], inputs: Any, labels: Any,
                update: bool) -> Any:
    """``Model.train_batch``: one micro-batch; ``update=False`` keeps the gradients for the next call."""
    if not isinstance(update, bool):
        raise TypeError(bad_argument("update", update, "True or False",
                                     "pass update=False to accumulate gradients, True to step the optimizer"))
    inputs, labels = as_tensors(inputs, "inputs", state.device), as_tensors(labels, "labels", state.device)
    step, state.batch_calls = state.batch_calls, state.batch_calls + 1
    state.train_net.train()
    outputs, loss = train_step(state, inputs, labels, step=step, sync=update)
    if update:
        model.global_step += 1
    return _losses_and_metrics(loss, metrics, outputs, labels)


def eval_batch(state: LoopState, metrics: Sequence[Any], inputs: Any, labels: Any) -> Any:
    """``Model.eval_batch``: the loss (and metrics) of one batch, without gradients."""
    inputs, labels = as_tensors(inputs, "inputs", state.device), as_tensors(labels, "labels", state.device)
    step, state.batch_calls = state.batch_calls, state.batch_calls + 1
    state.eval_net.eval()
    outputs, loss = eval_step(state, inputs, labels, step)
    return _losses_and_metrics(loss, metrics, outputs, labels)


def predict_batch(state: LoopState, inputs: Any) -> list[np.ndarray]:
    """``Model.predict_batch``: the network's outputs on one batch, one NumPy array per output."""
    inputs = as_tensors(inputs, "inputs", state.device)
    step, state.batch_calls = state.batch_calls, state.batch_calls + 1
    state.eval_net.eval()
    return [o.numpy() for o in predict_step(state, inputs, step)]
