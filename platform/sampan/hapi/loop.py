"""The one training loop. Optional features (AMP, accumulation, distribution) are plugin objects whose
hooks do nothing by default, so this file never branches on feature flags."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from sampan.hapi.batches import check_labels_for_loss, check_specs, explain_failure, split_batch, to_device
from sampan.hapi.metrics import MetricSet

if TYPE_CHECKING:
    from sampan.callbacks.base import CallbackList
    from sampan.hapi.model import Model


def _lr(optimizer: torch.optim.Optimizer) -> float:
    return float(optimizer.param_groups[0]["lr"])


def _first_batch(model: "Model", net, inputs: list, labels: list) -> tuple[Any, torch.Tensor | None]:
    """The first batch runs with checks that turn torch's terse errors into ones that name the fix."""
    check_specs(model.inputs, inputs, "inputs")
    check_specs(model.labels, labels, "labels")
    try:
        outputs = net(*inputs)
    except (RuntimeError, TypeError, IndexError) as exc:
        raise explain_failure(exc, "forward pass", inputs, labels) from exc
    if model._loss is None or not labels:
        return outputs, None
    check_labels_for_loss(model._loss, outputs, labels)
    try:
        return outputs, model._compute_loss(outputs, labels)
    except (RuntimeError, TypeError, IndexError, ValueError) as exc:
        raise explain_failure(exc, "loss", inputs, labels) from exc


def train_epoch(model: "Model", loader, cbks: "CallbackList", metrics: MetricSet, *, max_steps: int,
                log_freq: int) -> dict:
    net, opt, precision, strategy = model._train_net, model._optimizer, model._precision, model._strategy
    accum, n_in, n_lab = model._accumulate_steps, model._n_inputs, model._n_labels
    params = [p for g in opt.param_groups for p in g["params"]]
    steps = len(loader) if hasattr(loader, "__len__") else None
    net.train()
    metrics.reset()
    total, seen, step = 0.0, 0, -1
    for step, batch in enumerate(loader):
        if step >= max_steps or model.stop_training:
            break
        cbks.call("on_train_batch_begin", step, {})
        inputs, labels = split_batch(batch, n_in, n_lab, with_labels=True)
        inputs, labels = to_device(inputs, model.device), to_device(labels, model.device)
        sync = (step + 1) % accum == 0 or step + 1 == steps or step + 1 == max_steps
        with strategy.no_sync(net, sync), precision.autocast():
            if step == 0:
                outputs, loss = _first_batch(model, net, inputs, labels)
            else:
                outputs = net(*inputs)
                loss = model._compute_loss(outputs, labels)
        precision.backward(loss / accum if accum > 1 else loss)
        if sync:
            precision.step(opt, params, model._grad_clip)
            opt.zero_grad(set_to_none=True)
            model.global_step += 1
        value, n = loss.item(), _batch_size(inputs)
        total += value * n
        seen += n
        metrics.add(outputs, labels)
        logs = {"loss": value, "batch_size": n, "step": model.global_step}
        if (step + 1) % log_freq == 0:
            logs.update(metrics.results(), lr=_lr(opt), **precision.logs())
        cbks.call("on_train_batch_end", step, logs)
    if step < 0:
        raise ValueError("The training data produced no batch. HINT: check that the dataset is not empty and that "
                         "batch_size is not larger than the dataset with drop_last=True.")
    sums = strategy.all_reduce_sum(torch.tensor([total, float(seen)], dtype=torch.float64))
    return {"loss": float(sums[0] / max(sums[1], 1)), **metrics.results(), "lr": _lr(opt), **precision.logs()}


def _batch_size(inputs: list) -> int:
    first = inputs[0] if inputs else None
    return int(first.shape[0]) if isinstance(first, torch.Tensor) and first.ndim else len(first or ())


@torch.no_grad()
def evaluate_loop(model: "Model", loader, cbks: "CallbackList", metrics: MetricSet, *, max_steps: int) -> dict:
    net, precision, strategy = model._eval_net, model._precision, model._strategy
    net.eval()
    metrics.reset()
    total = torch.zeros(2, dtype=torch.float64)
    cbks.call("on_eval_begin", {})
    for step, batch in enumerate(loader):
        if step >= max_steps:
            break
        cbks.call("on_eval_batch_begin", step, {})
        inputs, labels = split_batch(batch, model._n_inputs, model._n_labels, with_labels=True)
        inputs, labels = to_device(inputs, model.device), to_device(labels, model.device)
        with precision.autocast():
            if step == 0:
                outputs, loss = _first_batch(model, net, inputs, labels)
            else:
                outputs = net(*inputs)
                loss = model._compute_loss(outputs, labels) if model._loss is not None and labels else None
        n = _batch_size(inputs)
        if loss is not None:
            total += torch.tensor([loss.item() * n, n], dtype=torch.float64)
        metrics.add(outputs, labels)
        cbks.call("on_eval_batch_end", step, {"loss": loss.item() if loss is not None else None, "batch_size": n})
    total = strategy.all_reduce_sum(total)
    logs = ({"loss": float(total[0] / total[1])} if total[1] > 0 else {})
    logs.update(metrics.results(scalars_only=False))
    cbks.call("on_eval_end", logs)
    return logs


@torch.no_grad()
def predict_loop(model: "Model", loader, cbks: "CallbackList") -> list[list[torch.Tensor]]:
    net, precision = model._eval_net, model._precision
    net.eval()
    collected: list[list[torch.Tensor]] = []
    cbks.call("on_predict_begin", {})
    for step, batch in enumerate(loader):
        cbks.call("on_predict_batch_begin", step, {})
        inputs, _ = split_batch(batch, model._n_inputs, model._n_labels, with_labels=False)
        inputs = to_device(inputs, model.device)
        if step == 0:
            check_specs(model.inputs, inputs, "inputs")
        with precision.autocast():
            outputs = net(*inputs)
        outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
        collected.append([o.detach().float().cpu() if o.is_floating_point() else o.detach().cpu() for o in outputs])
        cbks.call("on_predict_batch_end", step, {"batch_size": _batch_size(inputs)})
    cbks.call("on_predict_end", {})
    return collected
