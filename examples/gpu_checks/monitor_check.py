"""GPU check for ``sampan.monitor`` and ``sampan_widgets.ResourceMonitor`` (run on a machine with an NVIDIA GPU).

Allocates known amounts of CUDA memory in steps and, at each step, compares:

* the sampler's ``gpu{i}_allocated`` / ``gpu{i}_reserved`` / ``gpu{i}_peak`` with ``torch.cuda.memory_allocated``,
  ``memory_reserved`` and ``max_memory_allocated`` (must agree exactly: same counters, read by the sampler
  thread after the allocation settled);
* the sampler's ``gpu{i}_mem_used`` / ``mem_total`` (NVML) with ``nvidia-smi --query-gpu=memory.used,memory.total``
  (within ``--tolerance``, default 3%, plus 64 MiB for other processes' churn);
* NVML memory used against torch's reserved memory: the device view must grow by the same amount as this
  process's reserved memory, within the tolerance;
* utilisation: during a busy matmul loop NVML utilisation must be high (> 50%) and nvidia-smi must agree
  within 15 points (the two are sampled at different instants).

Also runs a short ``Model.fit`` on CUDA with ``ResourceMonitor(interval=0.5)`` and a callback that leaks
16 MiB of CUDA memory per step, and checks the leak warning fires.

Usage::

    python examples/gpu_checks/monitor_check.py [--device 0] [--tolerance 0.03]

Prints a Markdown table and exits 1 when any check fails. Needs no network.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
import warnings

import torch

MiB = 2**20


def nvidia_smi(index: int) -> dict:
    out = subprocess.run(["nvidia-smi", f"--id={index}", "--query-gpu=memory.used,memory.total,utilization.gpu",
                          "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30, check=True)
    used, total, util = (float(v) for v in out.stdout.strip().split(","))
    return {"mem_used": used * MiB, "mem_total": total * MiB, "util": util}


def close(a: float, b: float, rel: float, abs_: float = 0.0) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b)) + abs_


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--tolerance", type=float, default=0.03)
    args = parser.parse_args()
    if not torch.cuda.is_available() or shutil.which("nvidia-smi") is None:
        print("No CUDA device or no nvidia-smi: this check needs an NVIDIA GPU.", file=sys.stderr)
        return 2
    from sampan.monitor import ResourceSampler

    i, tol = args.device, args.tolerance
    dev = torch.device("cuda", i)
    torch.cuda.set_device(dev)
    torch.cuda.init()
    # load the fill kernel before the baseline: CUDA loads modules lazily, and the first kernel's module would
    # count as device growth that torch's allocator never sees
    torch.ones(1, device=dev).add_(1)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(dev)
    sampler = ResourceSampler(interval=0.1)
    rows, failures = [], []

    def check(name: str, ok: bool, ours: str, reference: str) -> None:
        rows.append((name, "ok" if ok else "FAIL", ours, reference))
        if not ok:
            failures.append(name)

    blocks, base_used, base_reserved = [], None, None
    for step, size in enumerate([0, 256, 1024, 4096]):
        if size:
            blocks.append(torch.ones(size * MiB // 4, device=dev))
        torch.cuda.synchronize()
        time.sleep(0.3)
        row = sampler.sample_now()
        smi = nvidia_smi(i)
        alloc, reserved, peak = (torch.cuda.memory_allocated(i), torch.cuda.memory_reserved(i),
                                 torch.cuda.max_memory_allocated(i))
        check(f"step {step} torch allocated", row[f"gpu{i}_allocated"] == alloc,
              f"{row[f'gpu{i}_allocated'] / MiB:.1f} MiB", f"{alloc / MiB:.1f} MiB")
        check(f"step {step} torch reserved", row[f"gpu{i}_reserved"] == reserved,
              f"{row[f'gpu{i}_reserved'] / MiB:.1f} MiB", f"{reserved / MiB:.1f} MiB")
        check(f"step {step} torch peak", row[f"gpu{i}_peak"] == peak,
              f"{row[f'gpu{i}_peak'] / MiB:.1f} MiB", f"{peak / MiB:.1f} MiB")
        check(f"step {step} NVML used vs nvidia-smi", close(row[f"gpu{i}_mem_used"], smi["mem_used"], tol, 64 * MiB),
              f"{row[f'gpu{i}_mem_used'] / MiB:.0f} MiB", f"{smi['mem_used'] / MiB:.0f} MiB")
        check(f"step {step} NVML total vs nvidia-smi", close(row[f"gpu{i}_mem_total"], smi["mem_total"], tol),
              f"{row[f'gpu{i}_mem_total'] / MiB:.0f} MiB", f"{smi['mem_total'] / MiB:.0f} MiB")
        if base_used is None:
            base_used, base_reserved = row[f"gpu{i}_mem_used"], reserved
        else:
            grew_dev, grew_torch = row[f"gpu{i}_mem_used"] - base_used, reserved - base_reserved
            check(f"step {step} device growth vs torch reserved growth", close(grew_dev, grew_torch, tol, 64 * MiB),
                  f"{grew_dev / MiB:.0f} MiB", f"{grew_torch / MiB:.0f} MiB")

    # utilisation under load
    a = torch.randn(8192, 8192, device=dev)
    sampler.start()
    end = time.time() + 3
    while time.time() < end:
        a = (a @ a).clamp_(-1, 1)
    smi = nvidia_smi(i)
    torch.cuda.synchronize()
    sampler.stop()
    busy = [s[f"gpu{i}_util"] for s in sampler.samples[-10:] if f"gpu{i}_util" in s]
    util = max(busy) if busy else 0.0
    check("utilisation under load > 50%", util > 50, f"{util:.0f}%", "busy matmul loop")
    check("utilisation vs nvidia-smi (15 points)", abs(util - smi["util"]) <= 15, f"{util:.0f}%", f"{smi['util']:.0f}%")
    del a, blocks
    torch.cuda.empty_cache()

    check_fit_leak(dev, check)
    print("| check | result | sampan | reference |\n|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print(f"\n{len(rows) - len(failures)} / {len(rows)} checks passed on {torch.cuda.get_device_name(i)}.")
    return 1 if failures else 0


def check_fit_leak(dev: torch.device, check) -> None:
    import sampan
    from sampan.callbacks import Callback
    from sampan.monitor import MemoryLeakWarning
    from sampan_widgets import ResourceMonitor

    kept = []

    class Leak(Callback):
        def on_train_batch_end(self, step, logs=None):
            kept.append(torch.ones(4 * MiB, device=dev))  # 16 MiB a step
            time.sleep(0.03)  # a real model's step: the leak check reads memory at most every 0.1 s by default

    net = torch.nn.Linear(64, 10)
    model = sampan.Model(net)
    model.prepare(torch.optim.SGD(net.parameters(), lr=0.1), torch.nn.CrossEntropyLoss(), device=dev)
    data = torch.utils.data.TensorDataset(torch.randn(2560, 64), torch.randint(0, 10, (2560,)))  # 160 steps
    monitor = ResourceMonitor(interval=0.5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(data, batch_size=16, epochs=1, verbose=0, callbacks=[Leak(), monitor])
    fired = [w for w in caught if issubclass(w.category, MemoryLeakWarning)]
    check("leak warning on a 16 MiB/step CUDA leak", bool(fired) and "torch.cuda allocated" in str(fired[0].message),
          "warned" if fired else "silent", "MemoryLeakWarning")
    samples = monitor.samples
    check("monitor sampled during fit", len(samples) >= 2 and any(f"gpu{dev.index}_allocated" in s for s in samples),
          f"{len(samples)} samples", ">= 2 with torch figures")
    monitor.close()
    kept.clear()


if __name__ == "__main__":
    sys.exit(main())
