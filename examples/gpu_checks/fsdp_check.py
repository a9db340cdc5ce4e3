"""GPU check for ``Model.prepare(strategy="fsdp")`` (FSDP2, ``fully_shard``) on CUDA with NCCL.

Run on a machine with one or more NVIDIA GPUs::

    python examples/gpu_checks/fsdp_check.py [--nproc N] [--width 4096] [--depth 8]

It relaunches itself with ``sampan launch --nproc_per_node N`` (default: every GPU) and, on each rank:

1. trains a deep MLP with ``strategy="ddp"`` and then ``strategy="fsdp"`` from the same initial weights and data
   (TF32 off): the per-epoch losses must agree within 1e-4 relative, the final weights within 1e-4;
2. checks that FSDP sharded the parameters: every parameter is a ``DTensor`` placed ``Shard(0)`` on the mesh, and
   this rank holds about 1/N of the elements;
3. with N > 1, compares peak CUDA memory of a training step: FSDP must use less than DDP (parameters, gradients
   and Adam state are sharded);
4. trains with ``FSDPStrategy(mixed_precision="bf16")`` and checks the loss falls;
5. checks that ``Model.save`` under FSDP refuses with the documented hint instead of hanging.

Rank 0 prints a Markdown table; the exit code is 1 when a check fails. Needs no network.
The same checks run on CPU with gloo in ``tests/distributed/test_strategy.py`` (without the memory check).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

import torch


def _net(width: int, depth: int) -> torch.nn.Module:
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))


def _fit(strategy, width: int, depth: int, data, epochs: int = 2):
    import sampan

    sampan.seed_everything(0)
    net = _net(width, depth)
    model = sampan.Model(net)
    model.prepare(torch.optim.Adam(net.parameters(), lr=1e-4), torch.nn.CrossEntropyLoss(), device="cuda",
                  strategy=strategy)
    torch.cuda.reset_peak_memory_stats()
    history = model.fit(data, batch_size=32, epochs=epochs, verbose=0, shuffle=False)
    peak = torch.cuda.max_memory_allocated()
    weights = [p.full_tensor() if hasattr(p, "full_tensor") else p.detach() for p in net.parameters()]
    return model, history.history["loss"], weights, peak


def worker(width: int, depth: int) -> int:
    import sampan
    from sampan.distributed import FSDPStrategy, get_rank, get_world_size

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    g = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(512, width, generator=g),
                                          torch.randint(0, 10, (512,), generator=g))
    rows: list[tuple[str, bool, str]] = []
    _, ddp_loss, ddp_w, ddp_peak = _fit("ddp", width, depth, data)
    model, fsdp_loss, fsdp_w, fsdp_peak = _fit("fsdp", width, depth, data)
    close = all(abs(a - b) <= 1e-4 * max(1.0, abs(a)) for a, b in zip(ddp_loss, fsdp_loss))
    rows.append(("losses equal DDP's", close, f"ddp {ddp_loss} fsdp {fsdp_loss}"))
    wdiff = max(float((a - b).abs().max()) for a, b in zip(ddp_w, fsdp_w))
    rows.append(("weights equal DDP's", wdiff < 1e-4, f"max abs diff {wdiff:.2e}"))

    from torch.distributed.tensor import DTensor, Shard

    params = list(model.network.parameters())
    sharded = all(isinstance(p, DTensor) and p.placements == (Shard(0),) for p in params)
    local = sum(p.to_local().numel() for p in params)
    total = sum(p.numel() for p in params)
    ws = get_world_size()
    rows.append(("parameters are Shard(0) DTensors", sharded, f"{len(params)} parameters"))
    rows.append(("this rank holds ~1/N of them", abs(local / total - 1 / ws) < 0.01, f"{local}/{total}"))
    if ws > 1:
        rows.append(("FSDP peak memory < DDP's", fsdp_peak < ddp_peak,
                     f"fsdp {fsdp_peak / 2**20:.0f} MiB vs ddp {ddp_peak / 2**20:.0f} MiB"))
    _, bf16_loss, _, _ = _fit(FSDPStrategy(mixed_precision="bf16"), width, depth, data, epochs=3)
    rows.append(("bf16 FSDP trains", bf16_loss[-1] < bf16_loss[0], f"losses {bf16_loss}"))
    try:
        model.save("fsdp-check-never-written")
        refused = False
    except sampan.SampanError as exc:
        refused = "torch.distributed.checkpoint" in str(exc)
    rows.append(("Model.save refuses with a hint", refused, ""))
    if get_rank() == 0:
        print(f"\n### FSDP2 check: {ws} rank(s), {torch.cuda.get_device_name()}, torch {torch.__version__}\n")
        print("| check | ok | detail |\n|---|---|---|")
        for name, ok, detail in rows:
            print(f"| {name} | {'yes' if ok else '**NO**'} | {detail} |")
    return 0 if all(ok for _, ok, _ in rows) else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nproc", type=int, default=None)
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--depth", type=int, default=8)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("fsdp_check: no CUDA GPU here. FSDP2 on CPU/gloo is covered by tests/distributed/test_strategy.py; "
              "run this script on a machine with an NVIDIA GPU.", file=sys.stderr)
        return 2
    if args.worker:
        return worker(args.width, args.depth)
    nproc = args.nproc or torch.cuda.device_count()
    cmd = [sys.executable, "-m", "sampan.distributed.launch", "--nproc_per_node", str(nproc), __file__, "--worker",
           "--width", str(args.width), "--depth", str(args.depth)]
    return subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": "4"}, timeout=1800).returncode


if __name__ == "__main__":
    sys.exit(main())
