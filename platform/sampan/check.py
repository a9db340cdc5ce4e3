"""``sampan.run_check()``: an executable self-check that proves each capability by running it.

Paddle's ``run_check`` runs one tiny program. This one runs, and times, a
forward and backward pass on each device, a bf16 autocast step, a
``torch.compile`` smoke test, Sampan's C++ CPU kernels and a two-process gloo all-reduce, checks that
torch's CUDA build, the NVIDIA driver and cuDNN fit together, and reports
versions (and whether it runs in a container) and what works. ``sampan check`` exits 1 when something required fails.
"""
from __future__ import annotations

import platform
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Callable

import torch

from sampan._version import __version__
from sampan.errors import first_line
from sampan.utils.i18n import ljust, tr
from sampan.utils.imports import python_command
from sampan.utils.net import free_port


@dataclass
class CheckItem:
    """One capability: its name, whether it worked, whether it is required, and details.

    ``name`` is the key (``report["cpu: forward + backward"]``) and stays English; ``label`` is the name in the
    learner's language (:mod:`sampan.utils.i18n`), and ``detail`` is written in it."""

    name: str
    ok: bool
    required: bool
    detail: str = ""
    seconds: float = 0.0
    label: str = ""

    def __post_init__(self):
        self.label = self.label or tr(self.name)


@dataclass
class CheckReport:
    """The result of :func:`run_check`; ``ok`` is True when every required item passed."""

    versions: dict = field(default_factory=dict)
    items: list[CheckItem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(item.ok for item in self.items if item.required)

    def __getitem__(self, name: str) -> CheckItem:
        for item in self.items:
            if item.name == name:
                return item
        raise KeyError(name)

    def to_dict(self) -> dict:
        return {"ok": self.ok, "versions": self.versions, "items": [asdict(i) for i in self.items]}

    def __str__(self) -> str:
        lines = [tr("Sampan environment check"), ""]
        lines += [f"  {k:<12} {v}" for k, v in self.versions.items()]
        lines.append("")
        for i in self.items:
            mark = "ok  " if i.ok else ("FAIL" if i.required else "warn")
            lines.append(f"  [{mark}] {ljust(i.label, 34)} {i.seconds:6.2f}s  {i.detail}")
        lines.append("")
        lines.append(tr("Sampan is ready." if self.ok else "Something required failed: see the FAIL lines above."))
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:
        # text symbols, not emoji: a machine without a colour-emoji font shows emoji as empty boxes
        rows = "\n".join(f"| {'✔' if i.ok else ('✘' if i.required else '⚠')} | {i.label} | {i.seconds:.2f}\u00a0s | "
                         f"{i.detail} |" for i in self.items)
        versions = ", ".join(f"{k} {v}" for k, v in self.versions.items())
        verdict = f"**{tr('Sampan is ready.' if self.ok else 'Something required failed: see the FAIL lines above.')}**"
        head = " | ".join(tr(word) for word in ("check", "time", "detail"))
        return f"{versions}\n\n| | {head} |\n|---|---|---|---|\n{rows}\n\n{verdict}"


def _versions() -> dict:
    info = {"sampan": __version__, "python": platform.python_version(), "torch": torch.__version__,
            "platform": f"{platform.system()} {platform.machine()}", "cpu threads": torch.get_num_threads()}
    try:
        import torchvision

        info["torchvision"] = torchvision.__version__
    except ImportError:
        info["torchvision"] = "missing"
    if torch.cuda.is_available():
        info["cuda"] = f"{torch.version.cuda}, {torch.cuda.device_count()} device(s): " + ", ".join(
            torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
    else:
        info["cuda"] = tr("no GPU visible")
    info["container"] = in_container() or tr("none detected")
    return info


def in_container() -> str | None:
    """The container runtime this process runs in (``"docker"``, ``"kubernetes"``, ...), or None.

    Read from ``/.dockerenv``, the ``container`` variable (podman, systemd-nspawn) and ``/proc/1/cgroup``.
    """
    import os
    from pathlib import Path

    if Path("/.dockerenv").exists():
        return "docker"
    if os.environ.get("container"):
        return os.environ["container"]
    try:
        cgroup = Path("/proc/1/cgroup").read_text(errors="replace")
    except OSError:
        return None
    for marker, name in (("kubepods", "kubernetes"), ("docker", "docker"), ("containerd", "containerd"),
                         ("lxc", "lxc")):
        if marker in cgroup:
            return name
    return None


def _driver_cuda() -> str | None:
    """The newest CUDA version the NVIDIA driver supports (``"12.4"``), through nvidia-ml-py; None without one."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetCudaDriverVersion()  # e.g. 12040
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver, no library, no GPU: all mean "none"
        return None
    return f"{version // 1000}.{version % 1000 // 10}"


def cuda_stack_verdict(torch_cuda: str | None, driver_cuda: str | None, cudnn: int | None) -> str:
    """Says whether PyTorch's CUDA build, the NVIDIA driver and cuDNN fit together; raises when they do not.

    PyTorch wheels bundle their CUDA runtime and cuDNN, so the only outside piece is the driver: it must support
    at least the CUDA *major* version torch was built with (CUDA's minor-version compatibility covers the rest).

    Example:
        >>> from sampan.check import cuda_stack_verdict
        >>> cuda_stack_verdict("12.6", "12.4", 90100)
        'torch built for CUDA 12.6 with cuDNN 9.1.0; the driver supports CUDA 12.4: compatible'
        >>> cuda_stack_verdict(None, None, None)
        'CPU-only torch build: no CUDA driver or cuDNN needed'
    """
    if torch_cuda is None:
        return tr("CPU-only torch build: no CUDA driver or cuDNN needed")
    cudnn_text = tr("without cuDNN") if not cudnn else \
        tr("with cuDNN {version}", version=f"{cudnn // 10000}.{cudnn // 100 % 100}.{cudnn % 100}")
    built = tr("torch built for CUDA {cuda} {cudnn}", cuda=torch_cuda, cudnn=cudnn_text)
    if driver_cuda is None:
        return tr("{built}; no NVIDIA driver answers, so it runs on the CPU (with a GPU: install the driver, or start "
                  "the container with --gpus all and the NVIDIA Container Toolkit)", built=built)
    if int(driver_cuda.split(".")[0]) < int(torch_cuda.split(".")[0]):
        raise RuntimeError(f"{built}, but the driver supports only CUDA {driver_cuda}: update the NVIDIA driver "
                           f"or install a torch wheel built for CUDA {driver_cuda.split('.')[0]}.x")
    return tr("{built}; the driver supports CUDA {driver}: compatible", built=built, driver=driver_cuda)


def _cuda_stack() -> str:
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    verdict = cuda_stack_verdict(torch.version.cuda, _driver_cuda(), cudnn)
    if torch.version.cuda is not None:
        verdict += tr("; ") + tr("cudnn.benchmark (autotuning) is {state}",
                             state=tr("on" if torch.backends.cudnn.benchmark else "off"))
    return verdict


def _train_step(device: str, dtype: torch.dtype | None = None) -> str:
    # seeded, so the check is reproducible, on a fork of the CPU stream: the caller's random numbers go on as
    # if no check had run (torch.manual_seed would also reset every GPU's stream)
    with torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                  torch.nn.Linear(4 * 6 * 6, 10))
        x, y = torch.randn(8, 1, 8, 8), torch.randint(0, 10, (8,))
    net, x, y = net.to(device), x.to(device), y.to(device)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    losses = []
    for _ in range(3):
        with torch.autocast(device_type=torch.device(device).type, dtype=dtype, enabled=dtype is not None):
            loss = torch.nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    if not all(torch.isfinite(torch.tensor(losses))) or not losses[-1] < losses[0]:
        raise RuntimeError(f"the loss did not decrease over 3 steps: {losses}")
    return tr("loss {first} -> {last}", first=f"{losses[0]:.3f}", last=f"{losses[-1]:.3f}")


def _compile_smoke() -> str:
    def f(x):
        return torch.sin(x) * 2 + x.cos()

    compiled = torch.compile(f)
    x = torch.randn(64, generator=torch.Generator().manual_seed(0))
    if not torch.allclose(compiled(x), f(x), atol=1e-5):
        raise RuntimeError("compiled output differs from eager")
    return tr("inductor compiled and matched eager")


def _cpu_kernels() -> str:
    """Which int8 path this CPU takes, and whether Sampan's C++ kernels build here and match float."""
    from sampan.jit.winograd import f4_unavailable
    from sampan.quantization._pt2e import int8_vnni
    from sampan.quantization.gemv import gemv_unavailable, linear_w8

    vnni = int8_vnni()
    cpu = (f"{torch.backends.cpu.get_cpu_capability()}, VNNI {'yes' if vnni else 'no'} "
           f"(compile_int8: {'inductor' if vnni else 'fbgemm, 1-2 rows on the int8 GEMV'})")
    reason = gemv_unavailable()
    if reason is not None:
        raise RuntimeError(f"{cpu}; the int8 GEMV kernel: {reason}")
    g = torch.Generator().manual_seed(0)
    w, x = torch.randint(-127, 128, (12, 40), dtype=torch.int8, generator=g), torch.randn(1, 40, generator=g)
    scale = torch.rand(12, generator=g) / 100
    want = x @ (w.float() * scale[:, None]).T
    got = linear_w8(x, w, scale)
    if not torch.allclose(got, want, rtol=1e-3, atol=1e-4 * float(want.abs().max())):
        raise RuntimeError(f"{cpu}; the int8 GEMV kernel differs from float by {float((got - want).abs().max()):.3g}")
    f4 = f4_unavailable()
    return (f"{cpu}; int8 GEMV built, matches float; Winograd F(4x4) {'built' if f4 is None else f'unavailable: {f4}'}"
            f"; {_amx_kernel()}")


def _amx_kernel() -> str:
    """Whether the bf16x3 AMX convolution runs here and matches float64 (it is an Intel Xeon's, from Sapphire
    Rapids on: elsewhere the reason)."""
    from sampan.jit import amx

    reason = amx.unavailable()
    if reason is not None and amx.cpu_unavailable() is None:  # the CPU has AMX: a failed build is worth a warning
        raise RuntimeError(f"the AMX bf16x3 convolution: {reason}")
    if reason is not None:
        return f"AMX bf16x3 convolution unavailable: {reason}"
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(1, 32, 9, 9, generator=g), torch.randn(48, 32, 3, 3, generator=g)
    want = torch.nn.functional.conv2d(x.double(), w.double(), stride=2, padding=1)
    error = float((amx.conv2d_bf16x3(x, w, None, 2, 1).double() - want).abs().max() / want.abs().max())
    if error > 2e-5:
        raise RuntimeError(f"the AMX bf16x3 convolution differs from float64 by {error:.2g} of the outputs' scale")
    return f"AMX bf16x3 convolution built, within {error:.1g} of float64"


# One rank of the all-reduce check, run as `python -c` in a fresh interpreter: started this way the ranks never
# import the caller's __main__ (multiprocessing's spawn would, and run an unguarded script's run_check() again).
_ALLREDUCE_RANK = """
import datetime, sys
import torch, torch.distributed as dist
rank, world, port, timeout = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=timeout))
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
dist.destroy_process_group()
print(f"all-reduce: {float(t)}", flush=True)
"""


def _gloo_allreduce(timeout: float = 60.0) -> str:
    import os
    import subprocess
    import tempfile

    if not sys.executable:
        raise RuntimeError("sys.executable is empty: no Python interpreter to start the two ranks with")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    port, procs, logs = free_port(), [], []
    try:
        for rank in range(2):
            out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
            logs.append((out, err))
            procs.append(subprocess.Popen(python_command("-c", _ALLREDUCE_RANK, str(rank), "2", str(port), str(timeout)),
                                          stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env))
        failed = _wait_ranks(procs, time.monotonic() + timeout)
        texts = [(_read(out), _read(err)) for out, err in logs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for out, err in logs:
            out.close()
            err.close()
    if failed is not None:
        rank, code = failed
        how = f"was killed by {_signal_name(-code)}" if code < 0 else f"exited with code {code}"
        said = (texts[rank][1].strip().splitlines() or ["(nothing on stderr)"])[-1][:200]
        raise RuntimeError(f"rank {rank} {how} before reporting; its stderr ends: {said}")
    missing = [r for r, p in enumerate(procs) if p.returncode is None or p.returncode < 0]
    if missing:
        raise RuntimeError(f"rank(s) {missing} did not report within {timeout:.0f} s")
    values = [out.strip().rpartition("all-reduce: ")[2] for out, _ in texts]
    if values != ["3.0", "3.0"]:
        raise RuntimeError(f"all-reduce gave {values}, expected 3.0 on both ranks")
    return "2 processes, sum 1+2 = 3 on both ranks"


def _wait_ranks(procs: list, deadline: float) -> tuple[int, int] | None:
    """Waits until every rank exits or the deadline passes; the first rank that exits with an error ends the
    wait at once: ``(rank, exit code)``. None when none failed (or the time ran out; then some are still running)."""
    while time.monotonic() < deadline:
        codes = [p.poll() for p in procs]
        for rank, code in enumerate(codes):
            if code not in (None, 0):
                return rank, code
        if all(code == 0 for code in codes):
            return None
        time.sleep(0.05)
    return None


def _signal_name(number: int) -> str:
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _read(file) -> str:
    file.seek(0)
    return file.read()


def _run(name: str, fn: Callable[[], str], required: bool, label: str = "") -> CheckItem:
    start = time.perf_counter()
    try:
        detail, ok = fn(), True
    except Exception as exc:  # a failed check is a result, not a crash
        detail, ok = f"{type(exc).__name__}: {first_line(exc)}"[:300], False
        if required:
            detail += " | " + traceback.format_exc(limit=1).splitlines()[-1][:200]
    return CheckItem(name, ok, required, detail, time.perf_counter() - start, label)


def run_check(*, compile: bool = True, distributed: bool = True, verbose: bool = True) -> CheckReport:
    """Runs every check, prints the report (``verbose``) and returns it.

    Args:
        compile: include the ``torch.compile`` smoke test and Sampan's C++ CPU kernels (int8 GEMV, Winograd
            F(4x4)), which need a C++ compiler: ~10-30 s on 2 cores, 20 s more the first time the kernels build.
        distributed: include the two-process gloo all-reduce (two fresh interpreters, ``python -c``: a script
            may call ``run_check()`` at its top level, without an ``if __name__ == "__main__":`` guard).
        verbose: print the report.

    Returns:
        A :class:`CheckReport`; ``report.ok`` is False when a required check failed. The checks are seeded on a
        fork of torch's random state: the caller's random numbers go on as if none had run.

    Example:
        >>> import sampan
        >>> report = sampan.run_check(compile=False, distributed=False)  # the quick checks
        Sampan environment check
        ...
        Sampan is ready.
        >>> report.ok
        True
    """
    with torch.random.fork_rng(devices=[]):  # no check moves the caller's CPU random stream
        report = _checks(compile, distributed)
    if verbose:
        print(report, file=sys.stdout, flush=True)
    return report


def _checks(compile: bool, distributed: bool) -> CheckReport:
    report = CheckReport(versions=_versions())
    report.items.append(_run("cpu: forward + backward", lambda: _train_step("cpu"), required=True))
    report.items.append(_run("cpu: bf16 autocast step", lambda: _train_step("cpu", torch.bfloat16), required=False))
    report.items.append(_run("CUDA stack: torch build, driver, cuDNN", _cuda_stack, required=False))
    for i in range(torch.cuda.device_count() if torch.cuda.is_available() else 0):
        dev = f"cuda:{i}"
        for what, dtype, required in (("forward + backward", None, True), ("fp16 autocast step", torch.float16, False),
                                      ("bf16 autocast step", torch.bfloat16, False)):
            report.items.append(_run(f"{dev}: {what}", lambda d=dev, t=dtype: _train_step(d, t), required=required,
                                     label=tr("{device}: " + what, device=dev)))
    if compile:
        report.items.append(_run("torch.compile (inductor)", _compile_smoke, required=False))
        report.items.append(_run("cpu: Sampan's C++ kernels", _cpu_kernels, required=False))
    if distributed:
        report.items.append(_run("distributed: gloo all-reduce x2", _gloo_allreduce, required=True))
    return report
