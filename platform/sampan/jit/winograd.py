"""Winograd convolution for ``to_static``'s frozen inference graphs: fewer multiplications per 3 x 3 conv.

A 3 x 3 convolution with stride 1 computes each 2 x 2 block of outputs from a 4 x 4 block of inputs.
Winograd's minimal filtering algorithm F(2 x 2, 3 x 3) (Lavin & Gray, "Fast Algorithms for Convolutional
Neural Networks", 2016) does it with 16 multiplications per input channel instead of 36, 2.25x fewer:

* the weights are transformed once, ``U = G g G^T`` (4 x 4 per filter; constant-folded by inductor's
  freezing),
* each 4 x 4 input tile is transformed, ``V = B^T d B`` (additions only),
* the 16 positions become 16 matrix products ``M[i] = U[i] @ V[i]`` (one batched GEMM, most of the work),
* each output tile is ``A^T M A`` (additions only).

On a CPU whose direct convolution already runs near the FMA units' peak (oneDNN's AVX2 kernels reach 80-90 %
of it), fewer multiplications is the one way left to be faster; the extra additions and memory traffic of the
transforms make it a trade, so ``to_static`` measures it against the direct convolution and keeps the faster.
Results differ from the direct convolution by float rounding only (the transforms' constants are 0, 1/2, 1).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

MIN_CHANNELS = 16  # below this, the transforms cost more than the multiplications they save
# Fewer output tiles per image than this (resnet18's 7 x 7 maps: 16 tiles): the GEMMs get too thin to use the
# FMA units, and the transformed weights (16 x c x k, 1.8x the 3 x 3 ones) are read from memory for little work
MIN_TILES = 32


def conv3x3(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, padding: int) -> torch.Tensor:
    """``F.conv2d(x, weight, bias, stride=1, padding=padding)`` for a 3 x 3 ``weight``, by Winograd F(2 x 2, 3 x 3).

    Example:
        >>> x, w, b = torch.randn(2, 16, 9, 7), torch.randn(32, 16, 3, 3), torch.randn(32)
        >>> torch.allclose(conv3x3(x, w, b, 1), F.conv2d(x, w, b, padding=1), atol=1e-4)
        True
    """
    n, c, h, w = x.shape
    k = weight.shape[0]
    ho, wo, th, tw = _grid(h, w, padding)
    # pad so that th x tw tiles of 4 x 4 (overlapping by 2) cover the input
    xp = F.pad(x, (padding, 2 * tw + 2 - w - padding, padding, 2 * th + 2 - h - padding))
    # channels last in every step (the transforms then run along contiguous channels):
    # tiles [16, n*th*tw, c] @ weights [16, c, k] -> [16, n*th*tw, k]
    u = _weights(weight).permute(0, 1, 3, 2).reshape(16, c, k)
    v = _tiles(xp, th, tw).permute(0, 1, 3, 4, 2).reshape(16, n * th * tw, c)
    m = torch.bmm(v, u).reshape(4, 4, n, th, tw, k)
    y = _outputs(m)                                                   # [2, 2, n, th, tw, k]
    y = y.permute(2, 5, 3, 0, 4, 1).reshape(n, k, 2 * th, 2 * tw)[:, :, :ho, :wo]
    return y if bias is None else y + bias.reshape(1, k, 1, 1)


def _grid(h, w, padding: int) -> tuple:
    """The output size of a 3 x 3 stride-1 convolution and its tiles of 2 x 2 outputs: ``(ho, wo, th, tw)``."""
    ho, wo = h + 2 * padding - 2, w + 2 * padding - 2
    return ho, wo, -(-ho // 2), -(-wo // 2)


def _weights(g: torch.Tensor) -> torch.Tensor:
    """``G g G^T`` for every filter: [k, c, 3, 3] -> [4, 4, k, c]."""
    def rows(t0, t1, t2):  # G = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]]
        return t0, (t0 + t1 + t2) * 0.5, (t0 - t1 + t2) * 0.5, t2

    by_row = rows(*(g[:, :, i, :] for i in range(3)))              # 4 x [k, c, 3]
    return torch.stack([torch.stack(rows(*(r[:, :, j] for j in range(3)))) for r in by_row])


def _tiles(xp: torch.Tensor, th: int, tw: int) -> torch.Tensor:
    """``B^T d B`` for every 4 x 4 tile of the padded input: [n, c, 2th+2, 2tw+2] -> [16, n, c, th, tw]."""
    def rows(d0, d1, d2, d3):  # B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
        return d0 - d2, d1 + d2, d2 - d1, d1 - d3

    by_row = rows(*(xp[:, :, i:i + 2 * th:2, :] for i in range(4)))
    return torch.stack([t for r in by_row for t in rows(*(r[:, :, :, j:j + 2 * tw:2] for j in range(4)))])


def _outputs(m: torch.Tensor) -> torch.Tensor:
    """``A^T M A`` for every tile: [4, 4, ...] -> [2, 2, ...]."""
    def rows(m0, m1, m2, m3):  # A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]
        return m0 + m1 + m2, m1 - m2 - m3

    by_row = rows(*(m[i] for i in range(4)))
    return torch.stack([torch.stack(rows(*(r[j] for j in range(4)))) for r in by_row])


def _eligible(node: torch.fx.Node) -> int | None:
    """The padding of a ``torch.conv2d`` node that Winograd F(2 x 2, 3 x 3) can take, else None."""
    if node.op != "call_function" or node.target not in (torch.conv2d, F.conv2d) or node.kwargs:
        return None
    args = list(node.args) + [None] * (7 - len(node.args))
    x, weight, _bias, stride, padding, dilation, groups = args
    meta = [getattr(a, "meta", {}).get("example_value") for a in (x, weight)]
    if any(not isinstance(t, torch.Tensor) for t in meta):
        return None
    xv, wv = meta
    pad = _pair(padding, 0)
    if (xv.dim() != 4 or xv.dtype != torch.float32 or tuple(wv.shape[2:]) != (3, 3)
            or _pair(stride, 1) != (1, 1) or _pair(dilation, 1) != (1, 1) or (groups or 1) != 1
            or pad is None or pad[0] != pad[1] or pad[0] > 2
            or min(wv.shape[0], wv.shape[1]) < MIN_CHANNELS):
        return None
    h, w = (_hint(size) for size in xv.shape[2:])
    if h is None or w is None:
        return None
    _, _, th, tw = _grid(h, w, pad[0])
    if th * tw < MIN_TILES:
        return None
    return pad[0]


def _hint(size) -> int | None:
    """A size as an int; for a dynamic (symbolic) size, the value it had when traced, without adding a guard."""
    if isinstance(size, int):
        return size
    return getattr(getattr(size, "node", None), "hint", None)


def _pair(value, default) -> tuple | None:
    if value is None:
        return (default, default)
    if isinstance(value, int):
        return (value, value)
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return tuple(value)
    return None  # "same" / "valid" strings, symbolic sizes: left to the direct convolution


def rewrite(gm: torch.fx.GraphModule) -> int:
    """Replaces every eligible 3 x 3 stride-1 ``torch.conv2d`` in a Dynamo graph by :func:`conv3x3`.

    Returns how many were replaced (0 leaves the graph as it was).
    """
    count = 0
    for node in list(gm.graph.nodes):
        padding = _eligible(node)
        if padding is None:
            continue
        x, weight = node.args[0], node.args[1]
        bias = node.args[2] if len(node.args) > 2 else None
        with gm.graph.inserting_before(node):
            new = gm.graph.call_function(conv3x3, (x, weight, bias, padding))
        new.meta.update(node.meta)
        node.replace_all_uses_with(new)
        gm.graph.erase_node(node)
        count += 1
    if count:
        gm.graph.lint()
        gm.recompile()
    return count


__all__ = ["conv3x3", "rewrite", "MIN_CHANNELS"]
