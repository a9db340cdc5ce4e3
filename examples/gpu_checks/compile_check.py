"""GPU check for issue 14's compiled paths on CUDA: ``to_static`` inference, compiled training, the predictor.

Run on a machine with an NVIDIA GPU::

    python examples/gpu_checks/compile_check.py [--quick]

1. ``to_static`` inference on CUDA (LeNet 28 x 28 and resnet18 224 x 224, batch 1 and 32): after warm-up, eager and
   ``to_static`` are timed side by side (median of interleaved repeats, ``torch.cuda.synchronize`` around each
   call). Checks: outputs within 1e-3 of eager (TF32 off), and ``to_static`` never slower than eager beyond
   noise (≥ 0.95×): the measured per-shape choice in ``forward.choices`` must keep the faster path on a GPU too.
2. Compiled training on CUDA (the digits CNN, batch 32): ``prepare(to_static=True)`` follows eager's loss curve
   for 20 steps within rtol 1e-3, and the steps-per-second ratio with what ``to_static`` kept.
3. The predictor on CUDA: ``sampan.jit.save`` of resnet18 as ``pt2``, then (in a child process) as an AOTInductor
   package for CUDA; each ``Config.enable_use_gpu()`` with ``backend="auto"``:
   its report, and its output against eager on the GPU.

Prints Markdown tables and one line per check; the exit code is 1 when a check fails. Needs no network.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time

import torch

FAILED: list[str] = []


def check(ok: bool, what: str) -> None:
    print(f"{'PASS' if ok else 'FAIL'}: {what}", flush=True)
    if not ok:
        FAILED.append(what)


def _ms(fn, x, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn(x)
        torch.cuda.synchronize()
        out.append((time.perf_counter() - start) * 1e3)
    return out


def _side_by_side(fns: dict, x, rounds: int, per_round: int = 10) -> dict[str, float]:
    """Median ms per call of each function, measured in alternating rounds (drift hits all alike)."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name] += _ms(fn, x, per_round)
    return {k: statistics.median(v) for k, v in times.items()}


def inference(quick: bool) -> None:
    import sampan
    from sampan.vision.models import LeNet, resnet18

    cases = [("LeNet", lambda: LeNet(num_classes=10), (1, 28, 28)),
             ("resnet18", lambda: resnet18(num_classes=1000), (3, 224, 224))]
    print("\n| network | batch | eager ms | to_static ms | speed-up | kept |\n|---|---|---|---|---|---|")
    rows = []
    for name, make, shape in cases:
        torch.manual_seed(0)
        eager = make().cuda().eval()
        static = make().cuda().eval()
        static.load_state_dict(eager.state_dict())
        sampan.jit.to_static(static, input_spec=[sampan.InputSpec([None, *shape], name="x")])
        for batch in (1, 32):
            x = torch.randn(batch, *shape, device="cuda")
            with torch.no_grad():
                want, got = eager(x), static(x)  # compiles, verifies, measures and picks for this shape
                for _ in range(3):
                    static(x)
                    eager(x)
                times = _side_by_side({"eager": eager, "static": static}, x, rounds=3 if quick else 7)
            choice = static.forward.choices.get(((tuple(x.shape), x.dtype),))
            kept = choice.path if choice is not None else "?"
            ratio = times["eager"] / times["static"]
            rows.append((name, batch, ratio))
            print(f"| {name} | {batch} | {times['eager']:.3f} | {times['static']:.3f} | {ratio:.2f}× | {kept} |",
                  flush=True)
            check(torch.allclose(got, want, rtol=1e-3, atol=1e-3),
                  f"to_static {name} b{batch} on CUDA matches eager (max diff {(got - want).abs().max().item():.2e})")
            check(ratio >= 0.95, f"to_static {name} b{batch} on CUDA not slower than eager ({ratio:.2f}×)")


def _cnn():
    from torch import nn

    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.2), nn.Linear(32 * 16, 64), nn.ReLU(),
                         nn.Linear(64, 10))


def training(quick: bool) -> None:
    import sampan
    from sampan.data import load_dataset

    digits = load_dataset("digits", "train")
    x = torch.stack([digits[i][0] for i in range(640)])
    y = torch.tensor([int(digits[i][1]) for i in range(640)])
    data = torch.utils.data.TensorDataset(x, y)

    class Losses(sampan.callbacks.Callback):
        def __init__(self):
            self.losses = []

        def on_train_batch_end(self, step, logs=None):
            self.losses.append(logs["loss"])

    models, curves = {}, {}
    for static in (False, True):
        sampan.seed_everything(0)
        net = _cnn()
        model = sampan.Model(net)
        model.prepare(torch.optim.Adam(net.parameters(), 1e-3), torch.nn.CrossEntropyLoss(), device="cuda",
                      to_static=static)
        losses = Losses()
        model.fit(torch.utils.data.Subset(data, range(640)), epochs=1, batch_size=32, verbose=0, shuffle=False,
                  callbacks=[losses])
        curves[static], models[static] = torch.tensor(losses.losses), model
    check(torch.allclose(curves[True], curves[False], rtol=1e-3, atol=1e-4),
          f"compiled training on CUDA follows eager's loss curve ({len(curves[True])} steps, max diff "
          f"{(curves[True] - curves[False]).abs().max().item():.2e})")
    fits = {k: (lambda m=m: m.fit(data, epochs=1, batch_size=32, verbose=0)) for k, m in models.items()}
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(3 if quick else 7):
        for k, fit in fits.items():
            torch.cuda.synchronize()
            start = time.perf_counter()
            fit()
            torch.cuda.synchronize()
            times[k].append(time.perf_counter() - start)
    steps = -(-len(data) // 32)
    eager, static = (statistics.median(times[k]) / steps * 1e3 for k in (False, True))
    forward = models[True].network.forward
    choice = getattr(forward, "train_choice", None)
    kept = "compiled" if choice is None else choice.kept
    print(f"\n| network | eager ms/step | to_static ms/step | speed-up | kept |\n|---|---|---|---|---|\n"
          f"| digits CNN (CUDA) | {eager:.3f} | {static:.3f} | {eager / static:.2f}× | "
          f"{', '.join([kept, *getattr(forward, 'training_passes', [])])} |", flush=True)
    print(f"train choice: {choice}")
    check(eager / static >= 0.95, f"compiled training on CUDA not slower than eager ({eager / static:.2f}×)")


def predictor() -> None:
    import subprocess

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as folder:
        prefix = f"{folder}/resnet18"
        _serve(prefix, "pt2")
        # AOTInductor for this GPU, in a child: a crash inside torch's package loader must not end the check
        child = subprocess.run([sys.executable, "-X", "faulthandler", __file__, "--serve", prefix],
                               capture_output=True, text=True, timeout=240)
        print(child.stdout[-3000:], child.stderr[-3000:] if child.returncode else "", flush=True)
        check(child.returncode == 0, f"AOTInductor package for CUDA saved, loaded and served (exit {child.returncode})")


def _serve(prefix: str, fmt: str) -> None:
    """Saves resnet18 as ``fmt`` under ``prefix``, then serves it with the predictor on the GPU (``backend="auto"``)."""
    import numpy as np

    import sampan
    from sampan.inference import Config, create_predictor
    from sampan.vision.models import resnet18

    torch.manual_seed(0)
    net = resnet18(num_classes=1000).eval().cuda()
    sampan.jit.save(net, prefix, input_spec=[sampan.InputSpec([None, 3, 224, 224], name="image")], format=fmt,
                    device="cuda" if fmt == "aoti" else None)
    check(all(p.device.type == "cuda" for p in net.parameters()), f"save({fmt}) left the model on the GPU")
    config = Config(prefix)
    config.enable_use_gpu()
    pred = create_predictor(config)
    print("\n" + pred.report(), flush=True)
    x = np.random.default_rng(0).standard_normal((4, 3, 224, 224)).astype("float32")
    got = pred.run([x])[0]
    with torch.no_grad():
        want = net(torch.from_numpy(x).cuda()).cpu().numpy()
    diff = float(np.abs(got - want).max())
    check(diff < 1e-2, f"predictor ({pred.backend}) on CUDA matches eager on CUDA (max diff {diff:.2e})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--only", choices=["inference", "training", "predictor"], action="append",
                        help="run only these parts (repeatable)")
    parser.add_argument("--serve", metavar="PREFIX", help=argparse.SUPPRESS)  # the AOTInductor child
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("compile_check needs a CUDA GPU; none is visible (torch.cuda.is_available() is False).", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}", flush=True)
    if args.serve:
        _serve(args.serve, "aoti")
        return 1 if FAILED else 0
    parts = args.only or ["inference", "training", "predictor"]
    for part in parts:
        start = time.perf_counter()
        try:
            {"inference": lambda: inference(args.quick), "training": lambda: training(args.quick),
             "predictor": predictor}[part]()
        except Exception as exc:  # one part's crash must not hide the others' figures
            import traceback

            traceback.print_exc()
            check(False, f"{part} raised {type(exc).__name__}: {exc}")
        print(f"({part}: {time.perf_counter() - start:.0f} s)", flush=True)
    print(f"\n{len(FAILED)} failed" + (": " + "; ".join(FAILED) if FAILED else ""))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
