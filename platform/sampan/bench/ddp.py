"""``sampan bench ddp``: training samples/s at 1 and 2 processes under torchrun, and the scaling efficiency.

Each run is ``sampan launch --nproc_per_node N -m sampan.bench.ddp --worker ...``:
every rank trains a small CNN with ``Model.fit`` (DDP on gloo, one thread per
process) at the same *global* batch, so 2 processes do the same work per step
as 1. Rank 0 times the steps between two barriers after a warm-up.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sampan.bench._timing import print_table


def _cnn():
    import torch

    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(32, 64, 3, padding=1),
        torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(64 * 14 * 14, 128),
        torch.nn.ReLU(), torch.nn.Linear(128, 10))


def _barrier() -> None:
    import torch.distributed as dist

    if dist.is_initialized():  # fit set up the process group (one process: none, nothing to wait for)
        dist.barrier()


def worker(out: str, global_batch: int, steps: int, warmup: int) -> None:
    import torch

    import sampan
    from sampan.distributed import get_rank, get_world_size

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    sampan.seed_everything(0)
    n = global_batch * (steps + warmup)
    data = torch.utils.data.TensorDataset(torch.randn(n, 1, 28, 28), torch.randint(0, 10, (n,)))
    net = _cnn()
    model = sampan.Model(net)
    model.prepare(torch.optim.SGD(net.parameters(), lr=0.01), torch.nn.CrossEntropyLoss(), device="cpu")
    per_rank = global_batch // get_world_size()
    model.fit(data, batch_size=per_rank, num_iters=warmup, verbose=0, shuffle=False)
    _barrier()
    start = time.perf_counter()
    model.fit(data, batch_size=per_rank, epochs=2, num_iters=steps, verbose=0, shuffle=False)
    _barrier()
    elapsed = time.perf_counter() - start
    if get_rank() == 0:
        Path(out).write_text(json.dumps({"samples_per_s": steps * global_batch / elapsed, "seconds": elapsed}))


def _measure(nproc: int, global_batch: int, steps: int, warmup: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "sampan.distributed.launch", "--nproc_per_node", str(nproc), "-m",
               "sampan.bench.ddp", "--worker", str(out), "--global-batch", str(global_batch), "--steps", str(steps),
               "--warmup", str(warmup)]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
        if proc.returncode != 0 or not out.is_file():
            raise RuntimeError(f"sampan bench ddp: the {nproc}-process run failed:\n{proc.stdout}\n{proc.stderr}")
        return json.loads(out.read_text())


def run(quick: bool = False) -> dict:
    """Runs 1 and 2 processes at global batch 64 and 256; prints and returns samples/s and efficiency."""
    steps, warmup = (6, 2) if quick else (20, 3)
    rows = []
    for global_batch in (64, 256):
        one = _measure(1, global_batch, steps, warmup)["samples_per_s"]
        two = _measure(2, global_batch, steps, warmup)["samples_per_s"]
        rows.append({"global batch": global_batch, "1 proc samples/s": one, "2 procs samples/s": two,
                     "speed-up": two / one, "scaling efficiency": two / one / 2})
    print_table("DDP (gloo, 1 thread per process): small CNN, Model.fit, samples/s", rows,
                ["global batch", "1 proc samples/s", "2 procs samples/s", "speed-up", "scaling efficiency"])
    return {"rows": rows, "speedup_at_256": rows[-1]["speed-up"]}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--worker", metavar="OUT")
    p.add_argument("--global-batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    if args.worker:
        worker(args.worker, args.global_batch, args.steps, args.warmup)
    else:
        run(quick=args.quick)


if __name__ == "__main__":
    main()
