"""``sampan bench amp``: fp32 against bf16 (CPU) and fp32 against fp16 / bf16 (CUDA), side by side.

One training step (forward, backward, optimizer step) of a matmul-heavy model,
timed interleaved with :func:`sampan.utils.timing.interleaved`, with the
``PrecisionPlugin`` that ``Model.prepare(amp=...)`` uses, so the figure is what
``fit`` gets. On CPU: a 6x1024 MLP at batch 256. On CUDA: the same MLP at
batch 4096 and a transformer encoder, and on GPUs with 24 GiB or more a wider one at 32x512 tokens.
"""
from __future__ import annotations

from typing import Callable

import torch

from sampan.bench._timing import print_table
from sampan.utils.timing import interleaved
from sampan.amp.precision import PrecisionPlugin


def mlp(width: int = 1024, depth: int = 6) -> torch.nn.Module:
    layers: list[torch.nn.Module] = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))


class _Encoder(torch.nn.Module):
    def __init__(self, d: int = 512, layers: int = 6):
        super().__init__()
        block = torch.nn.TransformerEncoderLayer(d, 8, 4 * d, batch_first=True, dropout=0.0)
        self.encoder = torch.nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(d, 10)

    def forward(self, x):
        return self.head(self.encoder(x).mean(1))


def _step_fn(net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, precision: PrecisionPlugin) -> Callable[[], None]:
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    net, opt = precision.setup(net, opt)
    params = [p for g in opt.param_groups for p in g["params"]]
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        with precision.autocast():
            loss = loss_fn(net(x), y)
        precision.backward(loss)
        precision.step(opt, params, None)
        opt.zero_grad(set_to_none=True)
        if x.is_cuda:
            torch.cuda.synchronize()

    return step


def _compare(name: str, build: Callable[[], torch.nn.Module], x: torch.Tensor, y: torch.Tensor,
             dtypes: list[str], repeat: int) -> dict:
    from sampan.amp.plugin import make_precision

    device = x.device
    fns = {"fp32": _step_fn(build().to(device), x, y, PrecisionPlugin())}
    for dt in dtypes:
        fns[dt] = _step_fn(build().to(device), x, y, make_precision(dt, device))
    times = interleaved(fns, repeat=repeat, warmup=2)
    row = {"model": name, "device": device.type, **{f"{k} ms": v * 1e3 for k, v in times.items()}}
    row.update({f"{k} speed-up": times["fp32"] / times[k] for k in dtypes})
    return row


def run(quick: bool = False) -> dict:
    """Measures and prints the table; returns ``{"rows": [...], "speedups": {...}, "cpu_native_bf16": bool}``."""
    from sampan.amp.plugin import cpu_has_native_bf16

    repeat = 3 if quick else 7
    rows = []
    torch.manual_seed(0)
    native = cpu_has_native_bf16()
    batch = 256 if native else 64  # emulated bf16 is ~40x slower per matmul: keep the run short
    x, y = torch.randn(batch, 1024), torch.randint(0, 10, (batch,))
    rows.append(_compare(f"MLP 6x1024, batch {batch}", mlp, x, y, ["bf16"], repeat if native else 2))
    if torch.cuda.is_available():
        dev = torch.device("cuda")
        x, y = torch.randn(4096, 1024, device=dev), torch.randint(0, 10, (4096,), device=dev)
        rows.append(_compare("MLP 6x1024, batch 4096", mlp, x, y, ["fp16", "bf16"], repeat))
        x, y = torch.randn(64, 128, 512, device=dev), torch.randint(0, 10, (64,), device=dev)
        rows.append(_compare("Transformer 6x512, 64x128 tokens", _Encoder, x, y, ["fp16", "bf16"], repeat))
        if torch.cuda.get_device_properties(dev).total_memory >= 24 * 2**30:
            # a data-centre GPU runs the sizes above faster than the host launches their kernels: a size whose
            # arithmetic fills it shows what precision does (about 10 GB of fp32 activations)
            del x, y
            x, y = torch.randn(32, 512, 1024, device=dev), torch.randint(0, 10, (32,), device=dev)
            rows.append(_compare("Transformer 6x1024, 32x512 tokens", lambda: _Encoder(1024), x, y, ["fp16", "bf16"],
                                 repeat))
    columns = sorted({c for r in rows for c in r}, key=lambda c: (c not in ("model", "device"), c))
    print_table(f"AMP: one training step, fp32 vs low precision (torch {torch.__version__}, "
                f"{torch.get_num_threads()} threads)", rows, columns)
    if not native:
        print("\nNote: this CPU has no native bf16 (AVX-512 BF16 or AMX; torch reports CPU capability "
              f"{torch.backends.cpu.get_cpu_capability()}), so bf16 matmuls run in a slow emulated path and "
              "bf16 is slower than fp32 here. On a CPU with AVX-512 BF16 expect about 2x.")
    speedups = {f"{r['device']}:{r['model']}:{k.split()[0]}": v for r in rows for k, v in r.items()
                if k.endswith("speed-up")}
    return {"rows": rows, "speedups": speedups, "cpu_native_bf16": native}


if __name__ == "__main__":  # pragma: no cover
    run()
