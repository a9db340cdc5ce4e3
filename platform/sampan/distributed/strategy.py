"""Distribution strategies for the training loop: DDP and FSDP2 (``Model.prepare(strategy=...)``).

Under torchrun (``WORLD_SIZE > 1``) ``Model.prepare`` picks :class:`DDPStrategy`
by itself. Each hook is the torch idiom: ``DistributedDataParallel`` around the
network, a ``DistributedSampler`` per loader with ``set_epoch``, ``no_sync`` on
accumulation steps, ``all_reduce`` for the loss sums (``sampan.metric``'s metrics reduce
their counts themselves), ``all_gather`` of an evaluation's rows for the metrics that do
not (:meth:`DDPStrategy.gather_rows`), and ``monitored_barrier`` around checkpoints, which
names the ranks that did not arrive.

Evaluation and prediction count each sample once, as Paddle's ``Model`` does. The sampler pads every
rank's share to one length (so all ranks run the same batches and collectives) by repeating samples at the
end of the shares; the loop cuts those rows (:meth:`DDPStrategy.real_rows`) before the loss and the
metrics, and ``predict`` gathers every rank's outputs into the data's order on every rank
(:meth:`DDPStrategy.gather_predictions`).
"""
from __future__ import annotations

import contextlib
import datetime
import functools
import io
import pickle
import re
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

from sampan.distributed.env import DistributedError, init_parallel_env, local_device, timeout_seconds
from sampan.errors import SampanError, bad_argument, first_line
from sampan.distributed.base import Strategy


class DDPStrategy(Strategy):
    """Data parallel: one replica per process, gradients averaged by ``DistributedDataParallel``.

    Args:
        backend: process-group backend (default gloo on CPU, ``cpu:gloo,cuda:nccl`` with CUDA).
        timeout: seconds a collective or barrier may wait (default ``$SAMPAN_DIST_TIMEOUT`` or 5 min).
        **ddp_kwargs: passed to ``DistributedDataParallel`` (``find_unused_parameters``, ``static_graph``...).

    Example:
        >>> model.prepare(opt, loss, strategy=DDPStrategy(timeout=120))  # doctest: +SKIP
    """

    def __init__(self, *, backend: str | None = None, timeout: float | None = None, **ddp_kwargs: Any):
        self.backend, self.timeout, self.ddp_kwargs = backend, timeout_seconds(timeout), ddp_kwargs
        self._barrier_group = None
        self._seed: int | None = None

    @property
    def rank(self) -> int:  # type: ignore[override]
        return dist.get_rank() if dist.is_initialized() else 0

    @property
    def world_size(self) -> int:  # type: ignore[override]
        return dist.get_world_size() if dist.is_initialized() else 1

    def _init(self, device: torch.device) -> torch.device:
        init_parallel_env(self.backend, self.timeout)
        backend = str(dist.get_backend())
        self._barrier_group = None if backend == "gloo" else dist.new_group(backend="gloo")
        return local_device(device)

    def setup(self, network: torch.nn.Module, device: torch.device) -> torch.nn.Module:
        device = self._init(device)
        network = network.to(device)
        ids = [device.index] if device.type == "cuda" else None
        return DistributedDataParallel(network, device_ids=ids, **self.ddp_kwargs)

    def unwrap(self, network: torch.nn.Module) -> torch.nn.Module:
        return network.module if isinstance(network, DistributedDataParallel) else network

    def _shared_seed(self) -> int:
        """Every rank must shuffle with the same seed: rank 0's ``torch.initial_seed()``."""
        if self._seed is None:
            seed = torch.tensor([torch.initial_seed() % 2**31], dtype=torch.int64)
            if dist.is_initialized():
                dist.broadcast(seed, src=0, group=self._barrier_group)
            self._seed = int(seed)
        return self._seed

    def make_loader(self, dataset: Dataset, *, batch_size: int, shuffle: bool, drop_last: bool,
                    num_workers: int, collate_fn=None) -> DataLoader:
        sampler = DistributedSampler(dataset, num_replicas=self.world_size, rank=self.rank, shuffle=shuffle,
                                     drop_last=drop_last, seed=self._shared_seed())
        return DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=drop_last,
                          num_workers=num_workers, collate_fn=collate_fn, persistent_workers=num_workers > 0)

    def real_rows(self, loader: Any) -> int:
        """This rank's samples in a loader over a ``DistributedSampler``: its share is ``indices[rank::world]``
        of the padded index list, so the rows past the dataset's length come last."""
        sampler = _shard_sampler(loader, self.world_size)
        if sampler is None:
            return super().real_rows(loader)
        return len(range(sampler.rank, min(len(sampler.dataset), sampler.total_size), sampler.num_replicas))

    def gather_predictions(self, batches: list[list[torch.Tensor]], loader: Any) -> list[list[torch.Tensor]]:
        """Every rank's outputs, each step's batches interleaved row by row (rank r's row k is sample
        ``r + k * world``), the padding cut: the dataset's samples in order, on every rank."""
        sampler = _shard_sampler(loader, self.world_size)
        if sampler is None:
            return batches
        return _interleave(gather_values(batches, self._barrier_group), len(sampler.dataset))

    def gather_rows(self, values: list[Any]) -> list[list[Any]]:
        """Every rank's rows of ``values`` (one evaluation batch's outputs and labels, the padding cut), on every
        rank, as ``paddle.Model`` gathers them for its metrics. When the ranks' shapes agree beyond the first
        dimension: one batch, the ranks' rows in turn (the data's order under a ``DistributedSampler``: rank r's
        row k is sample ``r + k * world``); else each rank's batch in turn. Batches without rows are left out.
        Shapes may differ across ranks (variable-length outputs: torchmetrics' ``gather_all_tensors`` pads and
        trims); :func:`gather_values` for values that are not tensors."""
        if self.world_size == 1:
            return [list(values)]
        if not all(isinstance(v, torch.Tensor) for v in values):
            return [list(v) for v in gather_values(list(values), self._barrier_group)]
        from torchmetrics.utilities.distributed import gather_all_tensors

        on_gpu = bool(values) and all(v.is_cuda for v in values) and "nccl" in str(dist.get_backend())
        group = None if on_gpu else self._barrier_group  # CPU tensors through the gloo group
        per_value = [gather_all_tensors(v.detach() if on_gpu else v.detach().cpu(), group) for v in values]
        per_rank = [[gathered[rank].to(v.device) for gathered, v in zip(per_value, values)]
                    for rank in range(self.world_size)]
        if all(v.ndim for v in values) and all(len({p[i].shape[1:] for p in per_rank}) == 1
                                               for i in range(len(values))):
            merged = [_in_data_order([p[i] for p in per_rank]) for i in range(len(values))]
            return [merged] if len(merged[0]) else []
        return [p for p in per_rank if not p[0].ndim or len(p[0])]

    def no_sync(self, network: torch.nn.Module, sync: bool) -> contextlib.AbstractContextManager:
        if sync or not isinstance(network, DistributedDataParallel):
            return contextlib.nullcontext()
        return network.no_sync()

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.world_size == 1:
            return tensor
        out = tensor.clone()
        self.barrier()  # once per epoch / evaluation: a rank that is stuck is named here, not hidden in a hang
        dist.all_reduce(out, op=dist.ReduceOp.SUM, group=self._barrier_group)
        return out

    def barrier(self) -> None:
        if self.world_size > 1:
            monitored_barrier(self.timeout, group=self._barrier_group)


def gather_values(value: Any, group: Any = None) -> list[Any]:
    """Every rank's ``value`` (tensors, NumPy arrays, numbers, strings, and lists, tuples and dicts of them), in
    rank order, on every rank: ``all_gather_object`` without its pickle.

    ``all_gather_object`` unpickles what the other ranks send, and pickle runs whatever code the bytes name. gloo's
    connections between the ranks are plain TCP on the loopback interface, which any user of the machine can reach
    (a class's shared server): bytes that are not a rank's could run code in every rank. Here each rank's value
    travels as ``torch.save`` bytes and is read with ``torch.load(weights_only=True)``, which builds tensors and
    plain containers (and NumPy arrays) and refuses anything that would call code. Values of other types (an
    object of your own) raise :class:`DistributedError` on every rank alike (no rank is left waiting).

    Example:
        >>> import torch
        >>> from sampan.distributed.strategy import gather_values
        >>> gather_values(["a", torch.tensor([1, 2])])  # one process: this rank's alone
        [['a', tensor([1, 2])]]
    """
    world = dist.get_world_size(group) if dist.is_initialized() else 1
    buffer = io.BytesIO()
    try:
        torch.save(value, buffer)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise DistributedError(_unsendable(value, exc)) from exc
    mine = torch.frombuffer(bytearray(buffer.getbuffer()), dtype=torch.uint8)
    if world == 1:
        payloads = [mine]
    else:
        sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
        dist.all_gather(sizes, torch.tensor([mine.numel()], dtype=torch.int64), group=group)
        longest = max(int(size) for size in sizes)
        padded = torch.zeros(longest, dtype=torch.uint8)
        padded[:mine.numel()] = mine
        everyone = [torch.empty(longest, dtype=torch.uint8) for _ in range(world)]
        dist.all_gather(everyone, padded, group=group)
        payloads = [data[:int(size)] for data, size in zip(everyone, sizes)]
    on = _local_cuda(value) or "cpu"
    values = []
    for rank, payload in enumerate(payloads):
        try:
            with torch.serialization.safe_globals(_numpy_arrays()):  # NumPy arrays too: data, as torch's docs allow
                values.append(torch.load(io.BytesIO(payload.numpy().tobytes()), map_location=on, weights_only=True))
        except Exception as exc:  # weights_only refuses the type: every rank reads every payload and fails here
            raise DistributedError(_unsendable(value, exc, rank)) from exc
    return values


@functools.cache
def _numpy_arrays() -> list:
    """What ``torch.load(weights_only=True)`` needs to build NumPy arrays: NumPy's ``_reconstruct`` (wherever this
    NumPy keeps it), ``ndarray``, ``dtype`` and its per-type classes."""
    return [np.empty(0).__reduce__()[0], np.ndarray, np.dtype,
            *(t for t in vars(getattr(np, "dtypes", np)).values() if isinstance(t, type) and issubclass(t, np.dtype))]


def _unsendable(value: Any, exc: BaseException, rank: int | None = None) -> str:
    found = re.search(r"(?i)unsupported global:?\s+(?:GLOBAL\s+)?([\w.]+)", str(exc))
    said = f"it would call {found.group(1)}" if found else f"torch said: {first_line(exc)}"
    who = "this rank's values" if rank is None else f"rank {rank}'s values"
    return (f"Cannot pass {who} between the ranks safely ({said}): only tensors, NumPy arrays, numbers, strings "
            f"and lists, tuples and dicts of them travel, read with torch.load(weights_only=True) so that bytes from "
            f"the network never run code. HINT: turn objects of your own into tensors (in the network's outputs, or "
            f"in the collate_fn for the labels).")


def _local_cuda(value: Any) -> torch.device | None:
    """The CUDA device of the first CUDA tensor in ``value``, else None (then values are read onto the CPU)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            if item.is_cuda:
                return item.device
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return None


def _shard_sampler(loader: Any, world_size: int) -> DistributedSampler | None:
    """The loader's ``DistributedSampler`` when it shares the data among this job's ranks, else None."""
    sampler = getattr(loader, "sampler", None)
    if world_size > 1 and isinstance(sampler, DistributedSampler) and sampler.num_replicas == world_size:
        return sampler
    return None


def _interleave(per_rank: list[list[list[torch.Tensor]]], limit: int) -> list[list[torch.Tensor]]:
    """``per_rank[r][step][output]`` -> ``[step][output]``: at each step the ranks' rows taken in turn (rank r's
    row k is sample ``r + k * world``), cut after ``limit`` rows in all (the rest repeat samples: padding).

    Example:
        >>> a, b = [[torch.tensor([0, 2])], [torch.tensor([4])]], [[torch.tensor([1, 3])], [torch.tensor([0])]]
        >>> [batch[0].tolist() for batch in _interleave([a, b], 5)]
        [[0, 1, 2, 3], [4]]
    """
    merged: list[list[torch.Tensor]] = []
    seen = 0
    for step, batches in enumerate(zip(*per_rank)):
        outputs = []
        for index, parts in enumerate(zip(*batches)):
            if len({tuple(p.shape) for p in parts}) > 1:
                raise SampanError(
                    f"predict gathers each batch's outputs from every rank row by row, but at batch {step} output "
                    f"{index} has the shapes {[list(p.shape) for p in parts]} on the ranks. HINT: give every batch "
                    f"one shape beyond the first dimension (pad in the network or the collate_fn), or run predict "
                    f"in one process.")
            outputs.append(torch.stack(parts, dim=1).flatten(0, 1)[:max(0, limit - seen)])
        if outputs and len(outputs[0]):
            merged.append(outputs)
            seen += len(outputs[0])
    return merged


def _in_data_order(parts: list[torch.Tensor]) -> torch.Tensor:
    """The ranks' rows taken in turn (rank r's row k is sample ``r + k * world``); the later ranks may hold one row
    fewer (the padding cut).

    Example:
        >>> _in_data_order([torch.tensor([0, 2, 4]), torch.tensor([1, 3])]).tolist()
        [0, 1, 2, 3, 4]
    """
    counts = [len(p) for p in parts]
    starts = [sum(counts[:r]) for r in range(len(parts))]
    order = [start + k for k in range(max(counts)) for start, n in zip(starts, counts) if k < n]
    return torch.cat(parts)[torch.tensor(order, dtype=torch.long, device=parts[0].device)]


def monitored_barrier(timeout: float | None = None, group: Any = None) -> None:
    """A barrier that, on timeout, raises :class:`DistributedError` naming the ranks that did not arrive.

    Uses ``torch.distributed.monitored_barrier(wait_all_ranks=True)`` (gloo); rank 0 collects the
    arrivals, so the missing ranks are named there.
    """
    seconds = timeout_seconds(timeout) or 1800.0
    try:
        dist.monitored_barrier(group=group, timeout=datetime.timedelta(seconds=seconds), wait_all_ranks=True)
    except RuntimeError as exc:
        text = str(exc)
        found = re.search(r"[Rr]anks? ([\d, ]+) failed to pass", text)
        ranks = [int(r) for r in re.findall(r"\d+", found.group(1))] if found else []
        who = f"rank(s) {ranks} did not arrive" if ranks else "rank 0 did not answer"
        raise DistributedError(
            f"Barrier timed out after {seconds:g} s on rank {dist.get_rank()}: {who}. torch said: "
            f"{first_line(exc)} HINT: a rank is stuck or much slower (look at its traceback or stack with "
            f"py-spy dump); every rank must reach the same collectives in the same order; raise the limit with "
            f"DDPStrategy(timeout=...) or ${'SAMPAN_DIST_TIMEOUT'}.", ranks=ranks) from exc


class FSDPStrategy(DDPStrategy):
    """Fully sharded data parallel with FSDP2 (``torch.distributed.fsdp.fully_shard``).

    Each submodule of a class in ``shard_modules`` (default: every direct child that holds parameters)
    becomes its own FSDP unit, then the root. Parameters, gradients and optimizer state are sharded
    across ranks; ``mixed_precision="bf16"`` computes in bf16 and reduces gradients in fp32.

    ``fully_shard`` replaces the parameters by sharded DTensors; :meth:`setup_optimizer` (called by
    ``Model.prepare``) points the optimizer's parameter groups at them, so build the optimizer as usual.
    ``Model.save`` under FSDP is not supported (rank 0 alone cannot gather the shards); use
    ``torch.distributed.checkpoint`` on every rank.
    """

    def __init__(self, *, shard_modules: tuple[type, ...] | None = None, mixed_precision: str | None = None,
                 reshard_after_forward: bool = True, backend: str | None = None, timeout: float | None = None):
        super().__init__(backend=backend, timeout=timeout)
        self.shard_modules, self.mixed_precision = shard_modules, mixed_precision
        self.reshard_after_forward = reshard_after_forward

    def setup(self, network: torch.nn.Module, device: torch.device) -> torch.nn.Module:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        device = self._init(device)
        network = network.to(device)
        old = {name: id(p) for name, p in network.named_parameters()}
        mesh = init_device_mesh(device.type, (self.world_size,))
        policy = MixedPrecisionPolicy()
        if self.mixed_precision is not None:
            from sampan.amp.autocast import as_dtype

            policy = MixedPrecisionPolicy(param_dtype=as_dtype(self.mixed_precision), reduce_dtype=torch.float32)
        units = [m for m in network.modules() if self.shard_modules and isinstance(m, self.shard_modules)] \
            if self.shard_modules else [m for m in network.children() if any(True for _ in m.parameters())]
        for unit in units:
            fully_shard(unit, mesh=mesh, mp_policy=policy, reshard_after_forward=self.reshard_after_forward)
        fully_shard(network, mesh=mesh, mp_policy=policy, reshard_after_forward=self.reshard_after_forward)
        network.register_state_dict_pre_hook(_fsdp_save_refused)
        self._replaced = {old[name]: p for name, p in network.named_parameters() if name in old}
        return network

    def setup_optimizer(self, optimizer: Any) -> Any:
        replaced = getattr(self, "_replaced", {})
        if optimizer is not None and replaced:
            for group in optimizer.param_groups:
                group["params"] = [replaced.get(id(p), p) for p in group["params"]]
        return optimizer

    def no_sync(self, network: torch.nn.Module, sync: bool) -> contextlib.AbstractContextManager:
        return _gradient_sync(network, sync)


def _fsdp_save_refused(module, prefix, keep_vars) -> None:
    if prefix == "" and not getattr(module, "_sampan_allow_state_dict", False):
        raise SampanError(
            "Model.save under strategy='fsdp' is not supported: the parameters are sharded across ranks and "
            "rank 0 alone cannot gather them. HINT: on every rank call torch.distributed.checkpoint.save("
            "{'model': get_model_state_dict(model.network)}, checkpoint_id=DIR) "
            "(torch.distributed.checkpoint.state_dict), or train with strategy='ddp'.")


@contextlib.contextmanager
def _gradient_sync(network: torch.nn.Module, sync: bool):
    if sync or not hasattr(network, "set_requires_gradient_sync"):
        yield
        return
    network.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        network.set_requires_gradient_sync(True)


def make_strategy(strategy: Any = None) -> Strategy:
    """``None`` or ``"ddp"`` -> :class:`DDPStrategy`; ``"fsdp"`` -> :class:`FSDPStrategy`; a Strategy as is."""
    if isinstance(strategy, Strategy):
        return strategy
    if strategy is None or strategy == "ddp":
        return DDPStrategy()
    if strategy == "fsdp":
        return FSDPStrategy()
    if isinstance(strategy, dict):
        kind = strategy.get("kind", "ddp")
        options = {k: v for k, v in strategy.items() if k != "kind"}
        if kind in ("ddp", "fsdp"):
            return (DDPStrategy if kind == "ddp" else FSDPStrategy)(**options)
    raise ValueError(bad_argument("strategy", strategy, "None, 'ddp', 'fsdp', a dict {'kind': 'ddp', ...} "
                                  "or a sampan.distributed.DDPStrategy / FSDPStrategy"))
