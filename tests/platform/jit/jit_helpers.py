"""Networks for the jit tests."""
from __future__ import annotations

import torch
from torch import nn

from sampan import InputSpec


def lenet() -> nn.Module:
    from sampan.vision.models import LeNet

    torch.manual_seed(0)
    return LeNet(num_classes=10).eval()


class DataDependent(nn.Module):
    """Branches on a tensor's value: torch.compile cannot make one graph of it."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        y = self.linear(x)
        if y.sum() > 0:  # data-dependent control flow
            return y * 2
        return y - 1


class ExportsDifferently(nn.Module):
    """Takes another path while being exported: the export checks must catch it."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x):
        y = self.linear(x)
        if torch.compiler.is_exporting():
            return y + 1.0
        return y


IMAGE = InputSpec([None, 1, 28, 28], "float32", "image")


def rewritten_nodes(net: nn.Module, x: torch.Tensor, exported: bool = False, *, tolerance: float = 1e-4,
                    **options) -> list:
    """Compiles ``net`` (its ``torch.export`` program with ``exported``: aten ops, as in the predictor's graphs) with
    ``sampan.jit.winograd.rewrite(gm, **options)``, checks the result against ``net`` in eager (within ``tolerance``
    of the outputs' scale), and returns the rewritten graph's call nodes."""
    from sampan.jit.winograd import rewrite

    graphs = []

    def backend(gm, example_inputs):
        rewrite(gm, **options)
        graphs.append([n for n in gm.graph.nodes if n.op in ("call_function", "call_method")])
        return gm.forward

    traced = torch.export.export(net, (x,)).module() if exported else net
    with torch.no_grad():
        out = torch.compile(traced, backend=backend, fullgraph=True, dynamic=False)(x)
        ref = net(x)
    torch.testing.assert_close(out, ref, rtol=0, atol=tolerance * float(ref.abs().max()))
    (nodes,) = graphs
    return nodes
