"""Which layers share output channels, and which layers consume them (traced with ``torch.fx``).

A *group* is a set of producer layers (Conv2d / Linear) whose output channels must be pruned
together: one layer alone, or several joined by a residual addition. Each group lists its
*consumers*: BatchNorm layers, and the convolutions or linear layers that read those channels
(through a flatten, each channel is ``factor`` consecutive features). A group whose channels reach
the model's output or an operation the pruner cannot shrink (``log_softmax``, ``cat``, ``* 2`` ...)
is *blocked*, with the reason: it keeps its size and the other groups are still pruned.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
import torch
from torch import nn
from torch.fx.passes.shape_prop import ShapeProp

from sampan.errors import bad_argument, first_line
from sampan.pruning._checks import is_skipped
from sampan.utils.modes import eval_mode

_PASS_MODULES = (
    nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.GELU, nn.SiLU, nn.Sigmoid, nn.Tanh, nn.Hardswish, nn.Hardsigmoid,
    nn.ELU, nn.Mish, nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Identity,
)
_PASS_FUNCTIONS = {
    torch.relu, torch.sigmoid, torch.tanh, torch.nn.functional.relu, torch.nn.functional.relu6,
    torch.nn.functional.gelu, torch.nn.functional.silu, torch.nn.functional.dropout,
    torch.nn.functional.leaky_relu, torch.nn.functional.hardswish,
}
# pools keep the channels when they pool other axes: how many trailing axes each pools
_POOL_MODULES = {
    nn.MaxPool1d: 1, nn.AvgPool1d: 1, nn.AdaptiveAvgPool1d: 1, nn.AdaptiveMaxPool1d: 1,
    nn.MaxPool2d: 2, nn.AvgPool2d: 2, nn.AdaptiveAvgPool2d: 2, nn.AdaptiveMaxPool2d: 2,
}
_POOL_FUNCTIONS = {
    torch.nn.functional.max_pool2d: 2, torch.nn.functional.avg_pool2d: 2,
    torch.nn.functional.adaptive_avg_pool2d: 2, torch.nn.functional.adaptive_max_pool2d: 2,
}
_PASS_METHODS = {"relu", "relu_", "sigmoid", "tanh", "contiguous", "clone", "detach"}
_ADD = {operator.add, operator.iadd, torch.add}
_SHAPE_ONLY = {"size", "dim"}


class StructureError(ValueError):
    """The model holds something structured pruning cannot rebuild; the message names it."""


@dataclass
class Group:
    producers: list[str]
    channels: int
    consumers: list[tuple[str, str, int]] = field(default_factory=list)  # (layer, kind, factor)
    blocked: list[str] = field(default_factory=list)                      # why it cannot be pruned

    @property
    def name(self) -> str:
        return self.producers[0]


@dataclass
class _Chan:
    group: int
    dim: int
    factor: int = 1


class _Analysis:
    def __init__(self, model: nn.Module, inputs: tuple, skip_names: set, skip_types: tuple):
        self.modules = dict(model.named_modules())
        self.skip = (skip_names, skip_types)
        self.parent: list[int] = []
        self.groups: list[Group] = []
        self.calls: dict[str, int] = {}
        try:
            self.gm = torch.fx.symbolic_trace(model)
        except Exception as exc:  # noqa: BLE001 - any trace failure means "cannot analyse"
            raise StructureError(
                f"Cannot structurally prune {type(model).__name__}: torch.fx could not trace it "
                f"({type(exc).__name__}: {first_line(exc)[:200]}). HINT: use structured=False "
                "(magnitude pruning) or make forward traceable (no data-dependent control flow).") from exc
        with eval_mode(model), torch.no_grad():
            try:
                ShapeProp(self.gm).propagate(*inputs)
            except Exception as exc:  # noqa: BLE001 - the model does not run on these inputs: say which
                cause = exc.__cause__ or exc
                shapes = [tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__ for t in inputs]
                raise ValueError(bad_argument(
                    "example_inputs", f"<shapes {shapes}>",
                    f"inputs the model runs on (it raised {type(cause).__name__}: {first_line(cause)[:200]})",
                    "pass example_inputs shaped like one real batch, e.g. torch.randn(1, 1, 28, 28) for MNIST "
                    "images")) from exc

    # union-find over group ids
    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def new_group(self, producer: str, channels: int) -> int:
        self.parent.append(len(self.groups))
        self.groups.append(Group([producer], channels))
        return len(self.groups) - 1

    def union(self, a: int, b: int) -> int:
        ra, rb = sorted((self.find(a), self.find(b)))  # the earliest layer names the group
        if ra != rb:
            self.parent[rb] = ra
            ga, gb = self.groups[ra], self.groups[rb]
            ga.producers += gb.producers
            ga.consumers += gb.consumers
            ga.blocked += gb.blocked
        return ra

    def block(self, chan: _Chan, reason: str) -> None:
        self.groups[self.find(chan.group)].blocked.append(reason)

    def consume(self, chan: _Chan, layer: str, kind: str) -> None:
        self.groups[self.find(chan.group)].consumers.append((layer, kind, chan.factor))

    def unsupported(self, node: torch.fx.Node, chans: list[_Chan], what: str) -> None:
        """Blocks the groups whose channels ``node`` reads (they keep their size); returns None, as the
        channels cannot be followed past it."""
        for chan in chans:
            self.block(chan, f"{what} (fx node `{node.name}`) reads its output channels and structured "
                             "pruning does not know how to shrink that")
        return None

    def run(self) -> list[Group]:
        env: dict[torch.fx.Node, _Chan | None] = {}
        for node in self.gm.graph.nodes:
            env[node] = self.visit(node, env)
        roots = {self.find(i) for i in range(len(self.groups))}
        return [self.groups[r] for r in sorted(roots)]

    def visit(self, node: torch.fx.Node, env: dict) -> _Chan | None:
        ins = [env.get(a) for a in node.all_input_nodes]
        chans = [c for c in ins if c is not None]
        if node.op in ("placeholder", "get_attr"):
            return None
        if node.op == "output":
            for c in chans:
                self.block(c, "it is (part of) the model's output")
            return None
        if node.op == "call_module":
            return self.visit_module(node, self.modules[node.target], chans)
        if (node.op == "call_method" and node.target in _SHAPE_ONLY) or (
                node.op == "call_function" and node.target is getattr):  # x.size(0), x.shape
            return None
        if not chans:
            return None
        first = chans[0]
        if (node.op == "call_function" and node.target in _PASS_FUNCTIONS) or (
                node.op == "call_method" and node.target in _PASS_METHODS):
            return first
        if node.op == "call_function" and node.target in _ADD:
            tensors = [a for a in node.args if isinstance(a, torch.fx.Node) and _is_tensor(a)]
            if len(tensors) == 2 and len(chans) == 2:
                a, b = chans
                if (a.dim, a.factor) != (b.dim, b.factor):
                    return self.unsupported(node, chans, "an addition of differently laid-out channels")
                return _Chan(self.union(a.group, b.group), a.dim, a.factor)
            if len(tensors) == 1:  # adding a python scalar keeps channels
                return first
            return self.unsupported(node, chans, "an addition with a tensor that is not a pruned layer's output")
        if node.op == "call_function" and node.target in _POOL_FUNCTIONS:
            return self.pool(node, first, _POOL_FUNCTIONS[node.target], f"`{node.target.__name__}`")
        if _is_flatten(node):
            return self.flatten(node, first)
        return self.unsupported(node, chans, f"`{getattr(node.target, '__name__', node.target)}`")

    def pool(self, node: torch.fx.Node, chan: _Chan, axes: int, what: str) -> _Chan | None:
        """A pool over the last ``axes`` axes keeps the channels only when they lie on another axis
        (a 1-D pool of a Linear's ``[N, C]`` output pools the channels themselves)."""
        ndim = len(node.all_input_nodes[0].meta["tensor_meta"].shape)
        if chan.dim < ndim - axes:
            return chan
        return self.unsupported(node, [chan], f"{what} pooling the channel axis")

    def flatten(self, node: torch.fx.Node, chan: _Chan) -> _Chan | None:
        shape = node.all_input_nodes[0].meta["tensor_meta"].shape
        if chan.dim != 1:
            return self.unsupported(node, [chan], "a flatten of a non-channel dimension")
        spatial = 1
        for d in shape[2:]:
            spatial *= int(d)
        return _Chan(chan.group, 1, chan.factor * spatial)

    def visit_module(self, node: torch.fx.Node, module: nn.Module, chans: list[_Chan]) -> _Chan | None:
        name = node.target
        self.calls[name] = self.calls.get(name, 0) + 1
        if self.calls[name] > 1 and isinstance(module, (nn.Conv2d, nn.Linear, nn.BatchNorm1d, nn.BatchNorm2d)):
            raise StructureError(f"Cannot structurally prune: layer `{name}` is called more than once "
                                 "(shared weights). HINT: use structured=False.")
        chan = chans[0] if chans else None
        if isinstance(module, nn.Conv2d):
            if module.groups != 1:
                raise StructureError(f"Cannot structurally prune: `{name}` is a grouped or depthwise convolution "
                                     f"(groups={module.groups}), which this pruner does not rebuild. "
                                     "HINT: use structured=False.")
            if chan is not None:
                if chan.dim != 1 or chan.factor != 1:
                    self.unsupported(node, [chan], f"convolution `{name}` reading flattened channels")
                else:
                    self.consume(chan, name, "conv")
            return self.produce(name, module, module.out_channels, dim=1)
        if isinstance(module, nn.Linear):
            ndim = len(node.meta["tensor_meta"].shape)
            if chan is not None:
                if chan.dim not in (ndim - 1, -1):
                    self.unsupported(node, [chan], f"linear layer `{name}` reading a non-feature dimension")
                else:
                    self.consume(chan, name, "linear")
            return self.produce(name, module, module.out_features, dim=ndim - 1)
        if chan is None:
            return None
        if isinstance(module, (nn.BatchNorm1d, nn.BatchNorm2d)):
            if chan.dim != 1 or chan.factor != 1:
                return self.unsupported(node, [chan], f"batch norm `{name}` on flattened channels")
            self.consume(chan, name, "bn")
            return chan
        if isinstance(module, _PASS_MODULES):
            return chan
        if type(module) in _POOL_MODULES:
            return self.pool(node, chan, _POOL_MODULES[type(module)], f"layer `{name}` ({type(module).__name__})")
        if isinstance(module, nn.Flatten):
            if module.start_dim != 1 or module.end_dim != -1:
                return self.unsupported(node, [chan], f"`{name}` (Flatten with start_dim={module.start_dim})")
            return self.flatten(node, chan)
        return self.unsupported(node, chans, f"layer `{name}` ({type(module).__name__})")

    def produce(self, name: str, module: nn.Module, channels: int, *, dim: int) -> _Chan:
        gid = self.new_group(name, channels)
        if is_skipped(name, module, *self.skip):
            self.groups[gid].blocked.append("it is in the skip list")
        return _Chan(gid, dim)


def _is_tensor(node: torch.fx.Node) -> bool:
    return "tensor_meta" in node.meta


def _start_dim(node: torch.fx.Node) -> object:
    """``start_dim`` of a ``torch.flatten(x, ...)`` / ``x.flatten(...)`` call, given by position or keyword."""
    return node.args[1] if len(node.args) > 1 else node.kwargs.get("start_dim", 0)


def _is_flatten(node: torch.fx.Node) -> bool:
    """A flatten of every axis after the batch: ``[N, C, ...] -> [N, C * ...]``."""
    function = node.op == "call_function" and node.target is torch.flatten
    if not function and not (node.op == "call_method" and node.target in ("flatten", "view", "reshape")):
        return False
    if (function or node.target == "flatten") and _start_dim(node) != 1:
        return False
    src = node.all_input_nodes[0].meta.get("tensor_meta")
    out = node.meta.get("tensor_meta")
    return src is not None and out is not None and len(out.shape) == 2 and out.shape[0] == src.shape[0]


def analyse(model: nn.Module, inputs: tuple, skip_names: set, skip_types: tuple) -> list[Group]:
    """Groups of producer layers with their consumers; a group that cannot shrink is ``blocked`` with the reason.

    Raises ``StructureError`` only for what stops the analysis itself: a model ``torch.fx`` cannot trace,
    a layer called twice (shared weights), a grouped convolution."""
    return _Analysis(model, inputs, skip_names, skip_types).run()
