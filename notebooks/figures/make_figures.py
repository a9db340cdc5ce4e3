"""The course's concept pictures, drawn by code: one PNG per idea, every number computed, never typed in.

Run it after changing a picture (it rewrites the PNGs beside it)::

    .venv/bin/python notebooks/figures/make_figures.py            # into notebooks/figures/
    .venv/bin/python notebooks/figures/make_figures.py --out figures-preview  # somewhere else

Each picture is labelled in English with the Chinese term in brackets; the Chinese glyphs need a CJK font
(``sampan.utils.fonts``; Debian/Ubuntu: ``apt-get install fonts-noto-cjk``). The numbers in the pictures come
from the operations they show: the gradients from ``torch.autograd``, the convolution from
``torch.nn.functional.conv2d``, the averaged gradients from a ring all-reduce simulated step by step, the
pipeline timings from a small scheduler, the int8 round trip from ``torch.fake_quantize_per_tensor_affine``. The output
is deterministic: no randomness without a seed, no date or software version in the files.

Example:
    >>> from make_figures import make_figures  # doctest: +SKIP
    >>> [p.name for p in make_figures("figures-preview")]  # doctest: +SKIP
    ['autograd_graph.png', 'convolution.png', ...]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle  # noqa: E402

HERE = Path(__file__).resolve().parent
DPI = 120
FORWARD, BACKWARD, MUTED, ACCENT = "#1f4e79", "#c0392b", "#8c8c8c", "#e67e22"
FILL = {"data": "#dbe9f6", "op": "#fdf2d0", "loss": "#f9d9d6", "param": "#e2f0d9", "off": "#eeeeee"}


def _box(ax, x, y, text, *, kind="data", w=1.6, h=0.6, size=10, **kw):
    """A rounded box centred on (x, y) with ``text``; returns the patch."""
    patch = FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.04,rounding_size=0.12",
                           fc=FILL[kind], ec=kw.pop("ec", "#333333"), lw=kw.pop("lw", 1.2), **kw)
    ax.add_patch(patch)
    ax.text(x, y, text, ha="center", va="center", fontsize=size, color=kw.get("color", "#111111"))
    return patch


def _arrow(ax, start, end, *, color=FORWARD, style="-|>", ls="-", rad=0.0, lw=1.6, shrink=4):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=14, color=color, lw=lw, ls=ls,
                                 connectionstyle=f"arc3,rad={rad}", shrinkA=shrink, shrinkB=shrink))


def _canvas(width, height, xlim, ylim):
    fig, ax = plt.subplots(figsize=(width, height))
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


# --- 1. computation graph and autograd -------------------------------------------------------------------

def autograd_graph(path: Path) -> None:
    """y = (w·x + b)², its graph of ``grad_fn`` nodes, the forward values and the backward gradients."""
    import torch

    x, w, b = (torch.tensor(v, requires_grad=True) for v in (2.0, 3.0, 1.0))
    u = w * x
    z = u + b
    y = z ** 2
    y.backward()
    fig, ax = _canvas(11, 5.2, (-0.6, 11.6), (-0.9, 4.6))
    leaves = {"x": (0.6, 3.4, x), "w": (0.6, 2.0, w), "b": (0.6, 0.3, b)}
    for name, (lx, ly, t) in leaves.items():
        _box(ax, lx, ly, f"{name} = {t.item():g}\nrequires_grad", kind="param", w=1.9, h=0.8, size=9)
    ops = {"mul": (3.8, 3.0, u, "u = w · x", u.grad_fn), "add": (6.3, 1.7, z, "z = u + b", z.grad_fn),
           "pow": (8.7, 1.7, y, "z ** 2", y.grad_fn)}
    for name, (ox, oy, t, label, fn) in ops.items():
        _box(ax, ox, oy, f"{label} = {t.item():g}\n{type(fn).__name__}", kind="op", w=2.1, h=0.8, size=9)
    _box(ax, 10.8, 1.7, f"y = {y.item():g}", kind="loss", w=1.4, h=0.6)
    forward = [((1.55, 3.4), (2.8, 3.15)), ((1.55, 2.0), (2.8, 2.85)), ((4.3, 2.6), (5.3, 1.85)),
               ((1.55, 0.3), (5.3, 1.5)), ((7.3, 1.7), (7.7, 1.7)), ((9.7, 1.7), (10.1, 1.7))]
    for start, end in forward:
        _arrow(ax, start, end)
    # backward: the chain rule, node by node, with the gradient each edge carries (as autograd computed it)
    dz = 2 * z.item()
    back = [((10.1, 1.45), (9.7, 1.45), "dy/dy = 1"), ((7.7, 1.45), (7.3, 1.45), f"dy/dz = 2z = {dz:g}"),
            ((5.3, 1.2), (1.55, 0.0), f"b.grad = dy/dz · 1 = {b.grad.item():g}"),
            ((6.0, 2.1), (4.8, 3.1), f"dy/du = {dz:g}"),
            ((2.8, 3.45), (1.55, 3.7), f"x.grad = dy/du · w = {x.grad.item():g}"),
            ((2.8, 2.6), (1.55, 1.7), f"w.grad = dy/du · x = {w.grad.item():g}")]
    spots = [(9.9, 1.05), (7.5, 0.75), (3.3, 0.15), (6.2, 2.95), (2.2, 4.15), (2.2, 1.45)]
    for (start, end, label), (tx, ty) in zip(back, spots):
        _arrow(ax, start, end, color=BACKWARD, ls="--", rad=0.15)
        ax.text(tx, ty, label, color=BACKWARD, fontsize=8.5, ha="center", va="center",
                bbox=dict(fc="white", ec="none", alpha=0.85, pad=1))
    ax.set_title("Computation graph (计算图) of y = (w·x + b)² and autograd (自动微分)", fontsize=13)
    ax.plot([], [], color=FORWARD, lw=1.6, label="forward pass (前向): values flow right, the graph is recorded")
    ax.plot([], [], color=BACKWARD, lw=1.6, ls="--",
            label="y.backward() (反向传播): chain rule from y back to every leaf, into .grad")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, -0.14), ncol=1, frameon=False, fontsize=9)
    _save(fig, path)


# --- 2. convolution --------------------------------------------------------------------------------------

def convolution(path: Path) -> None:
    """A 3×3 kernel over a 5×5 input (stride 1, no padding): one window, its products and its output cell."""
    import torch
    import torch.nn.functional as F

    image = torch.tensor([[1, 0, 2, 1, 0], [0, 1, 3, 1, 1], [2, 1, 0, 0, 2], [1, 3, 1, 2, 0], [0, 2, 1, 1, 3]],
                         dtype=torch.float32)
    kernel = torch.tensor([[1, 0, -1], [1, 0, -1], [1, 0, -1]], dtype=torch.float32)
    out = F.conv2d(image[None, None], kernel[None, None])[0, 0]   # cross-correlation, as in every DL framework
    row, col = 1, 2
    fig, ax = _canvas(12, 5.4, (-0.5, 17.2), (-2.0, 5.8))
    _grid(ax, image, 0, 0, "input (输入) 5×5")
    ax.add_patch(Rectangle((col, 5 - row - 3), 3, 3, fill=True, fc=ACCENT, alpha=0.25, ec=ACCENT, lw=3))
    _grid(ax, kernel, 6.5, 1, "kernel (卷积核) 3×3", fmt="{:+.0f}")
    ax.text(6.0, 2.5, "⊙", fontsize=22, ha="center", va="center")
    _grid(ax, out, 12.5, 1, "output (输出特征图) 3×3")
    ax.add_patch(Rectangle((12.5 + col, 1 + 3 - row - 1), 1, 1, fill=True, fc=ACCENT, alpha=0.45, ec=ACCENT, lw=3))
    ax.text(11.0, 2.5, "=", fontsize=22, ha="center", va="center")
    window = image[row:row + 3, col:col + 3]
    terms = " + ".join(f"{a:g}·{k:g}" if k > 0 else f"{a:g}·({k:g})"
                       for a, k in zip(window.flatten().tolist(), kernel.flatten().tolist()) if k != 0)
    ax.text(8.4, -1.55, f"output[{row}, {col}] = Σ window ⊙ kernel = {terms} = {out[row, col].item():g}",
            ha="center", va="center", fontsize=10, color="#7a3e00")
    _arrow(ax, (col + 1.5, 5 - row - 3), (12.5 + col + 0.5, 1 + 3 - row - 1), color=ACCENT, rad=0.2)
    ax.set_title("Convolution (卷积): the kernel slides over the input, stride 1 (步长), no padding (填充);\n"
                 "each position gives one output cell (zero-weight terms left out of the sum)", fontsize=12)
    _save(fig, path)


def _grid(ax, values, x0, y0, title, fmt="{:g}"):
    rows, cols = values.shape
    for r in range(rows):
        for c in range(cols):
            ax.add_patch(Rectangle((x0 + c, y0 + rows - r - 1), 1, 1, fill=False, ec="#333333", lw=1))
            ax.text(x0 + c + 0.5, y0 + rows - r - 0.5, fmt.format(values[r, c].item()), ha="center", va="center",
                    fontsize=12)
    ax.text(x0 + cols / 2, y0 + rows + 0.35, title, ha="center", va="bottom", fontsize=11)


# --- 3. the train / eval loop ----------------------------------------------------------------------------

def train_eval_loop(path: Path) -> None:
    """One training step (with autograd and the optimizer) beside one evaluation step (no grad, no update)."""
    fig, ax = _canvas(12, 5.6, (0, 20), (-0.6, 9))
    steps = [("batch of data\n(数据 x, y)", "data"), ("forward (前向)\nlogits = model(x)", "op"),
             ("loss (损失)\nloss_fn(logits, y)", "loss"), ("backward (反向传播)\nloss.backward()", "op"),
             ("step (参数更新)\noptimizer.step()\noptimizer.zero_grad()", "param")]
    spots = [(2.0, 6.2), (5.8, 6.2), (9.6, 6.2), (9.6, 3.4), (5.8, 3.4)]
    for (text, kind), (x, y) in zip(steps, spots):
        _box(ax, x, y, text, kind=kind, w=3.2, h=1.45, size=9.5)
    for (x0, y0), (x1, y1) in zip(spots, spots[1:]):
        horizontal = y0 == y1
        _arrow(ax, (x0 + (1.6 if x1 > x0 else -1.6) * horizontal, y0 - 0.75 * (not horizontal)),
               (x1 - (1.6 if x1 > x0 else -1.6) * horizontal, y1 + 0.75 * (not horizontal)))
    _arrow(ax, (4.2, 3.4), (2.0, 5.45), rad=-0.3)
    ax.text(2.2, 3.7, "next batch\n(下一批)", fontsize=9, color=FORWARD, ha="center")
    ax.text(6.0, 8.3, "Training (训练): model.train()", fontsize=12, ha="center", weight="bold")
    ax.text(6.0, 1.7, "gradients flow back through the recorded graph;\nthe optimizer changes the weights",
            fontsize=9, ha="center", color="#444444")
    ax.plot([12.7, 12.7], [0.2, 8.6], color="#bbbbbb", lw=1, ls=":")
    _box(ax, 14.4, 6.2, "validation data\n(验证数据)", kind="data", w=2.8, h=1.3, size=9.5)
    _box(ax, 18.0, 6.2, "forward (前向)\nno graph kept", kind="op", w=2.9, h=1.3, size=9.5)
    _box(ax, 18.0, 3.6, "metrics (评估指标)\nloss, accuracy", kind="loss", w=2.9, h=1.3, size=9.5)
    _box(ax, 14.4, 3.6, "no backward,\nno step (不更新)", kind="off", w=2.8, h=1.3, size=9.5, ec=MUTED,
         color=MUTED, ls="--")
    _arrow(ax, (15.8, 6.2), (16.55, 6.2))
    _arrow(ax, (18.0, 5.55), (18.0, 4.25))
    ax.text(16.2, 8.3, "Evaluation (评估): model.eval()\nwith torch.no_grad():", fontsize=12, ha="center",
            weight="bold")
    ax.text(16.2, 1.7, "eval() switches dropout off and BatchNorm to its\nrunning statistics; no_grad() "
            "saves memory and time", fontsize=9, ha="center", color="#444444")
    ax.text(10.0, -0.35, "one epoch (轮) = every training batch once, then an evaluation; "
            "sampan.Model.fit runs this loop", fontsize=10, ha="center", color="#333333")
    _save(fig, path)


# --- 4. DDP and the ring all-reduce ----------------------------------------------------------------------

def ring_allreduce(grads: list[list[float]]) -> tuple[list[list[float]], int]:
    """Sum-then-average of equal-length gradients by a ring all-reduce, simulated chunk by chunk.

    Each of the N ranks owns chunk ``(rank - step) mod N``; N−1 reduce-scatter steps pass partial sums round
    the ring, N−1 all-gather steps pass the finished chunks. Returns every rank's result and the step count.

    Example:
        >>> ring_allreduce([[1.0, 2.0], [3.0, 4.0]])
        ([[2.0, 3.0], [2.0, 3.0]], 2)
    """
    n = len(grads)
    size = len(grads[0])
    chunks = [[i * size // n, (i + 1) * size // n] for i in range(n)]
    data = [list(g) for g in grads]
    steps = 0
    for phase in ("reduce-scatter", "all-gather"):
        for step in range(n - 1):
            sends = []
            for rank in range(n):
                chunk = (rank - step + (1 if phase == "all-gather" else 0)) % n
                lo, hi = chunks[chunk]
                sends.append(((rank + 1) % n, lo, hi, data[rank][lo:hi]))
            for dest, lo, hi, values in sends:
                if phase == "reduce-scatter":
                    data[dest][lo:hi] = [a + v for a, v in zip(data[dest][lo:hi], values)]
                else:
                    data[dest][lo:hi] = values
            steps += 1
    return [[v / n for v in row] for row in data], steps


def ddp_allreduce(path: Path) -> None:
    """Four ranks' different gradients, the ring that averages them, and the identical result on every rank."""
    import numpy as np

    rng = np.random.default_rng(0)
    n, size = 4, 4
    local = np.round(rng.normal(0.0, 1.0, size=(n, size)), 2)
    averaged, steps = ring_allreduce(local.tolist())
    averaged = np.array(averaged)
    assert np.allclose(averaged, local.mean(0)), "the simulated ring must give the mean"  # our own invariant
    fig = plt.figure(figsize=(13, 5.4))
    grid = fig.add_gridspec(n, 3, width_ratios=[1.0, 1.25, 1.0], wspace=0.25, hspace=0.35)
    limit = float(np.abs(local).max()) * 1.15
    colors = ["#4c72b0", "#55a868", "#c44e52", "#8172b2"]
    for rank in range(n):
        for col, values, title in ((0, local[rank], "local gradients (本地梯度)"),
                                   (2, averaged[rank], "after all-reduce (平均梯度)")):
            ax = fig.add_subplot(grid[rank, col])
            ax.bar(range(size), values, color=colors[rank] if col == 0 else "#555555")
            ax.set_ylim(-limit, limit)
            ax.axhline(0, color="#999999", lw=0.8)
            ax.set_xticks(range(size), [f"g{i}" for i in range(size)] if rank == n - 1 else [])
            ax.set_yticks([])
            ax.set_ylabel(f"rank {rank}", rotation=0, ha="right", va="center", fontsize=10)
            if rank == 0:
                ax.set_title(title, fontsize=11)
    ring = fig.add_subplot(grid[:, 1])
    ring.set_xlim(-1.6, 1.6)
    ring.set_ylim(-1.75, 1.6)
    ring.set_aspect("equal")
    ring.axis("off")
    angles = [np.pi / 2 - k * 2 * np.pi / n for k in range(n)]
    spots = [(np.cos(a), np.sin(a)) for a in angles]
    for rank, (x, y) in enumerate(spots):
        ring.add_patch(plt.Circle((x, y), 0.28, fc=colors[rank], ec="#333333"))
        ring.text(x, y, f"rank\n{rank}", color="white", ha="center", va="center", fontsize=9, weight="bold")
    for rank in range(n):
        start, end = spots[rank], spots[(rank + 1) % n]
        ring.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=16, lw=2, color="#333333",
                                       connectionstyle="arc3,rad=-0.25", shrinkA=22, shrinkB=22))
    ring.set_title("ring all-reduce (环形全规约)", fontsize=11)
    ring.text(0, -1.5, f"{n - 1} reduce-scatter + {n - 1} all-gather = {steps} steps;\n"
              f"each step a rank sends 1/{n} of its gradient to its neighbour", ha="center", fontsize=9)
    fig.suptitle("DDP (分布式数据并行): every rank computes gradients on its own batch, all-reduce averages them, "
                 "every rank applies the same update", fontsize=12)
    _save(fig, path)


# --- 5. pipeline schedules -------------------------------------------------------------------------------

def schedule(order: list[list[tuple[str, int]]]) -> list[dict[tuple[str, int], int]]:
    """Start times of each stage's ops (``("F", k)`` / ``("B", k)``, one time unit each), run in ``order``.

    F k on stage s waits for F k on stage s−1; B k waits for F k on its stage and B k on stage s+1.

    Example:
        >>> schedule([[("F", 1), ("B", 1)], [("F", 1), ("B", 1)]])
        [{('F', 1): 0, ('B', 1): 3}, {('F', 1): 1, ('B', 1): 2}]
    """
    stages = len(order)
    start: list[dict[tuple[str, int], int]] = [{} for _ in range(stages)]
    free = [0] * stages
    cursor = [0] * stages
    while any(cursor[s] < len(order[s]) for s in range(stages)):
        progressed = False
        for s in range(stages):
            if cursor[s] == len(order[s]):
                continue
            kind, k = order[s][cursor[s]]
            deps = [(s - 1, ("F", k))] if kind == "F" and s > 0 else []
            if kind == "B":
                deps = [(s, ("F", k))] + ([(s + 1, ("B", k))] if s + 1 < stages else [])
            if all(op in start[d] for d, op in deps):
                ready = max([free[s]] + [start[d][op] + 1 for d, op in deps])
                start[s][(kind, k)] = ready
                free[s] = ready + 1
                cursor[s] += 1
                progressed = True
        assert progressed, "the schedule deadlocks"  # our own invariant
    return start


def _gpipe(stages: int, micro: int) -> list[list[tuple[str, int]]]:
    return [[("F", k) for k in range(1, micro + 1)] + [("B", k) for k in range(micro, 0, -1)]
            for _ in range(stages)]


def _one_f_one_b(stages: int, micro: int) -> list[list[tuple[str, int]]]:
    order = []
    for s in range(stages):
        warm = min(stages - s - 1, micro)
        ops = [("F", k) for k in range(1, warm + 1)]
        for k in range(warm + 1, micro + 1):
            ops += [("F", k), ("B", k - warm)]
        ops += [("B", k) for k in range(micro - warm + 1, micro + 1)]
        order.append(ops)
    return order


def _in_flight(start: dict[tuple[str, int], int]) -> int:
    """The most micro-batches whose activations a stage holds at once (forward done, backward not)."""
    events = sorted([(t, 1) for (kind, _), t in start.items() if kind == "F"]
                    + [(t + 1, -1) for (kind, _), t in start.items() if kind == "B"])
    held = peak = 0
    for _, delta in events:
        held += delta
        peak = max(peak, held)
    return peak


def pipeline_schedule(path: Path) -> None:
    """GPipe and 1F1B over 2 stages × 4 micro-batches: the timelines, the bubble, the activations held."""
    stages, micro = 2, 4
    fig, axes = plt.subplots(2, 1, figsize=(12, 5.4), sharex=True)
    for ax, (name, order) in zip(axes, (("GPipe: all forwards, then all backwards", _gpipe(stages, micro)),
                                        ("1F1B (one forward, one backward)", _one_f_one_b(stages, micro)))):
        start = schedule(order)
        total = max(t for s in start for t in s.values()) + 1
        for s, ops in enumerate(start):
            y = stages - 1 - s
            for slot in range(total):
                if slot not in ops.values():
                    ax.add_patch(Rectangle((slot, y + 0.08), 1, 0.84, fc="#dddddd", ec="#999999", hatch="///"))
            for (kind, k), t in ops.items():
                color = "#6fa8dc" if kind == "F" else "#f6b26b"
                ax.add_patch(Rectangle((t, y + 0.08), 1, 0.84, fc=color, ec="#333333"))
                ax.text(t + 0.5, y + 0.5, f"{kind}{k}", ha="center", va="center", fontsize=11)
        idle = sum(total - len(ops) for ops in start)
        held = [_in_flight(ops) for ops in start]
        ax.set_xlim(0, total)
        ax.set_ylim(0, stages)
        ax.set_yticks([stages - 1 - s + 0.5 for s in range(stages)], [f"stage {s}" for s in range(stages)])
        ax.set_xticks(range(total + 1))
        ax.set_title(f"{name}: bubble (气泡) {idle}/{stages * total} slots = {idle / (stages * total):.0%}; "
                     f"stage 0 holds up to {held[0]} micro-batches' activations", fontsize=11)
    axes[-1].set_xlabel("time (one slot = one micro-batch through one stage; backward drawn as long as forward)")
    handles = [Rectangle((0, 0), 1, 1, fc="#6fa8dc", ec="#333333"), Rectangle((0, 0), 1, 1, fc="#f6b26b", ec="#333333"),
               Rectangle((0, 0), 1, 1, fc="#dddddd", ec="#999999", hatch="///")]
    fig.legend(handles, ["F k: forward of micro-batch k (前向)", "B k: backward of micro-batch k (反向)",
                         "idle: the pipeline bubble (流水线气泡)"], loc="lower center", ncol=3, frameon=False)
    fig.suptitle(f"Pipeline parallelism (流水线并行), {stages} stages × {micro} micro-batches (微批次): "
                 f"same bubble (S−1)/(M+S−1), 1F1B frees activations sooner", fontsize=12)
    fig.subplots_adjust(bottom=0.2, hspace=0.45, top=0.86)
    _save(fig, path, tight=False)


# --- 6. quantization: scale and zero point ---------------------------------------------------------------

def quantization_scale_zero_point(path: Path) -> None:
    """An asymmetric float range mapped onto the int8 grid, and one value's round trip with its error."""
    import torch

    low, high, value = -1.2, 3.9, 1.234
    qmin, qmax = -128, 127
    scale = (high - low) / (qmax - qmin)
    zero_point = int(round(qmin - low / scale))
    points = torch.tensor([low, 0.0, value, high], dtype=torch.float64)
    q_low, q_zero, q_value, q_high = torch.clamp(torch.round(points / scale) + zero_point, qmin, qmax).int().tolist()
    back = torch.fake_quantize_per_tensor_affine(points.float(), scale, zero_point, qmin, qmax)[2].item()
    fig, (top, zoom) = plt.subplots(2, 1, figsize=(12, 6), gridspec_kw={"height_ratios": [1.25, 1]})
    for ax in (top, zoom):
        for side in ("left", "right", "top"):
            ax.spines[side].set_visible(False)
        ax.set_yticks([])
    # top: the float axis above, the int8 axis below, lines joining what maps to what
    top.set_xlim(qmin - 40, qmax + 12)
    top.set_ylim(-0.6, 1.6)
    top.hlines([1, 0], qmin, qmax, color="#333333", lw=2)
    for f, qv, label in ((low, q_low, "min"), (0.0, q_zero, "0.0"), (high, q_high, "max"),
                         (value, q_value, f"x = {value}")):
        pos = (f - low) / scale + qmin
        color = ACCENT if label.startswith("x") else FORWARD
        top.plot([pos, qv], [1, 0], color=color, lw=1.5, ls="-" if label.startswith("x") else "--")
        top.text(pos, 1.12, f"{label} ({f:g})" if label in ("min", "max") else label, ha="center", fontsize=10,
                 color=color)
        text = f"zero_point = {qv}" if label == "0.0" else f"q = {qv}"
        top.text(qv, -0.28, text, ha="center", va="top", fontsize=10, color=color)
    for k in range(qmin, qmax + 1, 16):
        top.plot([k, k], [-0.05, 0.05], color="#333333", lw=0.8)
    top.text(qmin - 22, 1, "float\n(浮点)", ha="right", va="center", fontsize=10)
    top.text(qmin - 22, 0, "int8\n(整数)", ha="right", va="center", fontsize=10)
    top.set_xticks([])
    top.set_title(f"Quantization (量化): q = clamp(round(x / scale) + zero_point, {qmin}, {qmax});  "
                  f"scale (缩放因子) = (max − min) / 255 = {scale:.5f},  zero_point (零点) = {zero_point}",
                  fontsize=11)
    # bottom: around x, the grid points are scale apart; x goes to the nearest, and comes back with an error
    levels = [q_value + d for d in range(-3, 4)]
    floats = [(lv - zero_point) * scale for lv in levels]
    zoom.set_xlim(floats[0] - scale * 0.4, floats[-1] + scale * 0.4)
    zoom.set_ylim(-0.9, 1.3)
    zoom.hlines(0, floats[0] - scale * 0.3, floats[-1] + scale * 0.3, color="#333333", lw=1.5)
    for lv, f in zip(levels, floats):
        zoom.plot([f, f], [-0.12, 0.12], color=FORWARD, lw=2)
        zoom.text(f, -0.25, f"q={lv}\n{f:.4f}", ha="center", va="top", fontsize=8.5, color=FORWARD)
    zoom.plot([value], [0.55], marker="v", color=ACCENT, ms=11)
    zoom.text(value, 0.75, f"x = {value}", ha="center", fontsize=10, color=ACCENT)
    zoom.annotate("", xy=(back, 0.15), xytext=(value, 0.48), arrowprops=dict(arrowstyle="-|>", color=ACCENT, lw=1.6))
    zoom.annotate("", xy=(value, 1.05), xytext=(back, 1.05), arrowprops=dict(arrowstyle="<->", color=BACKWARD))
    zoom.text((value + back) / 2, 1.13, f"error (误差) |x − x̂| = {abs(value - back):.5f} ≤ scale/2 = {scale / 2:.5f}",
              ha="center", fontsize=10, color=BACKWARD)
    zoom.set_xticks([])
    zoom.set_title(f"Round trip of one value (反量化): q = {q_value},  x̂ = (q − zero_point) · scale = {back:.5f}",
                   fontsize=11)
    _save(fig, path)


FIGURES = {
    "autograd_graph.png": autograd_graph,
    "convolution.png": convolution,
    "train_eval_loop.png": train_eval_loop,
    "ddp_allreduce.png": ddp_allreduce,
    "pipeline_schedule.png": pipeline_schedule,
    "quantization_scale_zero_point.png": quantization_scale_zero_point,
}


def _save(fig, path: Path, tight: bool = True) -> None:
    """Writes the PNG atomically (a temporary file renamed into place), without a date or software tag."""
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, format="png", dpi=DPI, bbox_inches="tight" if tight else None, facecolor="white",
                metadata={"Software": None})
    plt.close(fig)
    tmp.replace(path)


def make_figures(out_dir: str | Path = HERE, names: list[str] | None = None) -> list[Path]:
    """Draws the pictures (all, or the named ones) into ``out_dir``; returns the files written.

    Example:
        >>> make_figures("figures-preview", ["convolution.png"])  # doctest: +SKIP
        [PosixPath('figures-preview/convolution.png')]
    """
    from sampan.utils.fonts import use_cjk_font

    unknown = sorted(set(names or []) - set(FIGURES))
    if unknown:
        raise ValueError(f"Expected `names` to be among {', '.join(FIGURES)}. Received: names={unknown}. "
                         "HINT: leave names out to draw every picture.")
    use_cjk_font()
    plt.rcParams.update({"font.size": 10, "svg.hashsalt": "sampan", "axes.titlepad": 10})
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names or list(FIGURES):
        FIGURES[name](out / name)
        written.append(out / name)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Draw the course's concept pictures (PNG).")
    parser.add_argument("--out", default=str(HERE), help="folder for the PNGs (default: this script's folder)")
    parser.add_argument("names", nargs="*", help=f"only these pictures ({', '.join(FIGURES)})")
    args = parser.parse_args(argv)
    try:
        written = make_figures(args.out, args.names or None)
    except ValueError as exc:
        parser.error(str(exc))  # exit status 2, with the usage line
    for file in written:
        print(file)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
