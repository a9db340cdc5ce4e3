"""Checks that turn silent wrong results of ``Model`` into clear errors: an optimizer over another
network, evaluation data without labels, a checkpoint's optimizer of another kind."""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np
import torch
from torch.utils.data import DataLoader

from sampan.errors import CheckpointError, bad_argument
from sampan.hapi.batches import split_batch

_MASTERS = "_sampan_master_pairs"  # fp32 master copies that sampan.amp.decorate puts in the optimizer


def check_optimizer_owns(network: torch.nn.Module, optimizer: Any, loss: Any = None) -> None:
    """Raises when none of ``optimizer``'s parameters belong to ``network`` (nor to a loss module).

    Such an optimizer steps tensors the network never uses, so training changes nothing.
    Call it before precision or strategy setup wrap the network (they keep or map the parameters).

    Example:
        >>> net = torch.nn.Linear(2, 2)
        >>> check_optimizer_owns(net, torch.optim.SGD(net.parameters(), 0.1))
    """
    if optimizer is None:
        return
    params = [p for group in optimizer.param_groups for p in group["params"]]
    if not params:
        return
    owned = {id(p) for p in network.parameters()}
    if isinstance(loss, torch.nn.Module):
        owned |= {id(p) for p in loss.parameters()}
    owned |= {id(master) for _, master in getattr(optimizer, _MASTERS, None) or ()}
    if any(id(p) in owned for p in params):
        return
    raise ValueError(bad_argument(
        "optimizer", _Shown(f"{type(optimizer).__name__}(<{len(params)} tensors of another network>)"),
        f"an optimizer over the parameters of this network ({type(network).__name__}); none of its "
        f"{len(params)} parameter tensor(s) belong to it, so fit() would train nothing",
        "build the optimizer from the same network you give to Model: "
        "net = MyNet(); model = sampan.Model(net); model.prepare(torch.optim.Adam(net.parameters()), ...)"))


def check_not_array_pair(data: Any, argument: str) -> None:
    """Raises when ``data`` is ``[x, y]`` / ``(x, y)``: whole arrays of inputs and labels, as Keras takes them.

    A list is a dataset of samples to torch, so ``fit([x, y])`` saw two samples (``x`` and ``y``) and failed
    in the DataLoader's collate with "stack expects each tensor to be equal size". Arrays whose first
    dimensions agree but whose shapes differ cannot be samples of one dataset: they are columns.

    Example:
        >>> check_not_array_pair([(torch.zeros(3), 1), (torch.ones(3), 0)], "train_data")  # samples: fine
    """
    if not isinstance(data, (list, tuple)) or not 2 <= len(data) <= 8:
        return
    if not all(isinstance(a, (torch.Tensor, np.ndarray)) and a.ndim >= 1 for a in data):
        return
    shapes = [tuple(a.shape) for a in data]
    rows = {s[0] for s in shapes}
    if len(rows) != 1 or len(set(shapes)) == 1 or next(iter(rows)) <= len(data):
        return
    names = ", ".join(f"{type(a).__name__} of shape {list(s)}" for a, s in zip(data, shapes))
    raise TypeError(bad_argument(
        argument, _Shown(f"{type(data).__name__}[{names}]"), "a Dataset of samples, not (inputs, labels) arrays "
        "(a list is read as a list of samples, so these would be " + str(len(data)) + " samples)",
        "wrap the arrays: torch.utils.data.TensorDataset(torch.as_tensor(x), torch.as_tensor(y))"))


class _Shown(str):
    def __repr__(self) -> str:
        return str(self)


def first_sample(data: Any) -> Any:
    """The first item of a map-style dataset (or a DataLoader's, when it collates by default); else None."""
    dataset = data
    if isinstance(data, DataLoader):
        from torch.utils.data import default_collate

        if data.collate_fn is not default_collate:
            return None
        dataset = data.dataset
    if not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
        return None
    try:
        return dataset[0] if len(dataset) else None
    except Exception:  # noqa: BLE001 - an odd dataset is checked by the loop itself, batch by batch
        return None


def check_has_labels(data: Any, argument: str, *, n_inputs: int | None, n_labels: int | None, loss: Any,
                     metrics: list) -> None:
    """Raises when ``data`` holds no labels while a loss or metrics would need them.

    Without this, ``evaluate`` on inputs alone returned ``{'acc': 0.0}``: a number that looks like a result.

    Example:
        >>> data = torch.utils.data.TensorDataset(torch.randn(4, 2))
        >>> check_has_labels(data, "eval_data", n_inputs=None, n_labels=None, loss=None, metrics=[])
    """
    if loss is None and not metrics:
        return
    sample = first_sample(data)
    if sample is None:
        return
    try:
        _, labels = split_batch(sample, n_inputs, n_labels, with_labels=False)
    except (TypeError, ValueError):  # an odd item: the loop explains it at the first batch
        return
    if labels:
        return
    needs = ", ".join(n for n in (["loss"] if loss is not None else []) +
                      [type(m).__name__ for m in metrics])
    raise ValueError(bad_argument(
        argument, data, f"a dataset of (inputs..., labels...) items: {needs} need labels, and its first item "
        f"holds only the input(s)", "use model.predict(data) for outputs without labels, or return "
        "(inputs, label) from the dataset, e.g. TensorDataset(x, y)"))


def check_optimizer_state(optimizer: torch.optim.Optimizer, saved: dict, saved_class: str | None, *,
                          path: str) -> None:
    """Raises :class:`CheckpointError` when a saved optimizer state does not fit ``optimizer``.

    torch's ``load_state_dict`` silently takes another class's state: an SGD checkpoint loaded into
    Adam replaced Adam's lr and dropped its ``betas``. This compares the class (when the checkpoint
    names it), the hyperparameter names and the parameter-group layout first.
    """
    mine = type(optimizer).__name__
    groups = saved.get("param_groups") or []
    problems = []
    if saved_class and saved_class != mine:
        problems.append(f"the checkpoint's optimizer is {saved_class}, the prepared one is {mine}")
    own_keys = {k for k in optimizer.param_groups[0] if k != "params"} if optimizer.param_groups else set()
    saved_keys = {k for k in groups[0] if k != "params"} if groups else set()
    if groups and not saved_class and saved_keys - own_keys:  # an older checkpoint: judge by its settings
        # (only settings the prepared optimizer lacks count: an older torch may save fewer of its own)
        problems.append(f"its settings differ from the prepared {mine}'s (checkpoint only: "
                        f"{sorted(saved_keys - own_keys)}; {mine} only: {sorted(own_keys - saved_keys)})")
    layout = [len(g["params"]) for g in groups]
    own_layout = [len(g["params"]) for g in optimizer.param_groups]
    if layout != own_layout:
        problems.append(f"parameters per group: checkpoint {layout}, prepared optimizer {own_layout}")
    if problems:
        raise CheckpointError(
            f"The optimizer state in {path} does not fit the prepared optimizer: {'; '.join(problems)}. "
            f"HINT: prepare the same optimizer (class and parameter groups) to resume training, or load the "
            f"weights only with model.load(path, reset_optimizer=True).", path=path)


def heartbeat(world_size: int) -> list:
    """``[Heartbeat()]`` in a job of several processes (each rank posts where it is), else ``[]``."""
    if world_size <= 1:
        return []
    from sampan.distributed.watchdog import Heartbeat

    return [Heartbeat()]


def watch_collectives(method: Callable) -> Callable:
    """Decorates a ``Model`` method: a collective that times out inside it raises a
    ``DistributedError`` naming the ranks that did not arrive (:mod:`sampan.distributed.watchdog`)."""

    @functools.wraps(method)
    def watched(self, *args: Any, **kwargs: Any) -> Any:
        if self._strategy.world_size <= 1:
            return method(self, *args, **kwargs)
        from sampan.distributed.watchdog import watch

        with watch(self._strategy.world_size, timeout=getattr(self._strategy, "timeout", None)):
            return method(self, *args, **kwargs)

    return watched
