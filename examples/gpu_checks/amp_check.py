"""GPU check for ``sampan.amp`` on CUDA (run on a machine with an NVIDIA GPU).

    python examples/gpu_checks/amp_check.py [--device 0] [--quick]

Checks, printed as a Markdown table (exit code 1 when one fails):

1. speed: one training step of ResNet-18 (batch 256, 224x224, channels-last) and of a 6-layer transformer
   encoder (width 1024, 32x512 tokens), fp32 against ``amp="fp16"`` and ``amp="bf16"`` through the same
   ``Precision`` plugin ``Model.prepare`` uses (interleaved medians; torch's default TF32 settings) — the goal is
   at least 2x for fp16 and bf16 on one of them (issue 4's goal); ResNet-18 again with cuDNN's TF32 off (torch
   turns it on by default, so its "fp32" convolutions already run on the tensor cores), and the smaller sizes
   (ResNet-18 b64, width 512, bound by kernel launches on an H100/H200) are printed beside them;
2. accuracy: ``Model.fit`` on digits with ``amp="fp16"`` and ``amp="bf16"`` within 1 point of fp32, with
   ``loss_scale`` in the logs for fp16;
3. the loss scaler: a step whose gradients overflow is skipped and the scale halves;
4. the NaN doctor names the planted layer that overflows float16 on the GPU;
5. O2 (``AmpConfig(level="O2")``): fp16 parameters, fp32 master weights, training converges.

Needs no network (torchvision's ResNet-18 is built without weights).
"""
from __future__ import annotations

import argparse
import sys

import torch


def _speed(quick: bool) -> list[tuple[str, bool, str]]:
    """The 2x goal at sizes that fill a data-centre GPU; the small sizes are printed beside them: on an H100/H200
    they are bound by kernel launches and the host, not by arithmetic, so precision barely moves them."""
    import torchvision

    from sampan.bench.amp import _compare, _Encoder

    repeat = 3 if quick else 10
    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    cl = torch.channels_last
    resnet = lambda: torchvision.models.resnet18().to(memory_format=cl)  # noqa: E731
    big = torch.randn(256, 3, 224, 224, device=dev).contiguous(memory_format=cl)
    cases = [  # (name, build, x, (batch, classes), cudnn TF32)
        ("ResNet-18 b256 channels-last", resnet, big, (256, 1000), True),
        ("ResNet-18 b256 channels-last, TF32 off", resnet, big, (256, 1000), False),
        ("Transformer 6x1024, 32x512 tokens", lambda: _Encoder(1024), torch.randn(32, 512, 1024, device=dev),
         (32, 10), True),
        ("ResNet-18 b64", lambda: torchvision.models.resnet18(), torch.randn(64, 3, 224, 224, device=dev),
         (64, 1000), True),
        ("Transformer 6x512, 64x128 tokens", _Encoder, torch.randn(64, 128, 512, device=dev), (64, 10), True),
    ]
    rows, met, tf32_default = [], [], torch.backends.cudnn.allow_tf32
    for name, build, x, (n, classes), tf32 in cases:
        y = torch.randint(0, classes, (n,), device=dev)
        torch.backends.cudnn.allow_tf32 = tf32  # torch's default is True: "fp32" convolutions run as TF32
        row = _compare(name, build, x, y, ["fp16", "bf16"], repeat)
        torch.backends.cudnn.allow_tf32 = tf32_default
        ratios = {dt: row[f"{dt} speed-up"] for dt in ("fp16", "bf16")}
        if min(ratios.values()) >= 2.0:
            met.append(name)
        for dt, ratio in ratios.items():
            rows.append((f"{name}: {dt}", True, f"{ratio:.2f}x ({row['fp32 ms']:.1f} -> {row[f'{dt} ms']:.1f} ms)"))
        del x, y
        torch.cuda.empty_cache()
    rows.append(("fp16 and bf16 >= 2x fp32 for a convolutional or transformer model", bool(met),
                 "met by " + ", ".join(met) if met else "by none"))
    return rows


def _digits_fit(amp, epochs: int = 5):
    from sklearn.datasets import load_digits

    import sampan

    d = load_digits()
    x, y = torch.tensor(d.data, dtype=torch.float32) / 16, torch.tensor(d.target)
    sampan.seed_everything(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    model = sampan.Model(net)
    model.prepare(torch.optim.Adam(net.parameters(), 3e-3), torch.nn.CrossEntropyLoss(), sampan.metric.Accuracy(),
                  amp=amp, device="cuda")
    history = model.fit(torch.utils.data.TensorDataset(x[:1400], y[:1400]), batch_size=64, epochs=epochs,
                        verbose=0)
    acc = model.evaluate(torch.utils.data.TensorDataset(x[1400:], y[1400:]), verbose=0)["acc"]
    return model, history.history, acc


def _accuracy() -> list[tuple[str, bool, str]]:
    from sampan.amp import AmpConfig

    _, _, fp32 = _digits_fit(None)
    rows = []
    for amp in ("fp16", "bf16", AmpConfig(dtype="float16", level="O2")):
        model, hist, acc = _digits_fit(amp)
        name = amp if isinstance(amp, str) else "fp16 O2"
        rows.append((f"digits {name} within 1 point of fp32", abs(acc - fp32) <= 0.01, f"{acc:.4f} vs {fp32:.4f}"))
        if name == "fp16":
            rows.append(("loss_scale in the logs", "loss_scale" in hist, f"{hist.get('loss_scale', ['-'])[-1]}"))
        if name == "fp16 O2":
            master = model._optimizer.param_groups[0]["params"][0]
            rows.append(("O2: fp16 parameters, fp32 masters",
                         model.network[0].weight.dtype == torch.float16 and master.dtype == torch.float32, ""))
    return rows


def _scaler_and_doctor() -> list[tuple[str, bool, str]]:
    import sampan
    from sampan.amp import AmpNonFiniteError, GradScaler

    net = torch.nn.Linear(4, 1).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    scaler = GradScaler(init_loss_scaling=1024)
    before = net.weight.detach().clone()
    scaler.scale(net(torch.ones(1, 4, device="cuda")).sum() * float("inf")).backward()
    scaler.minimize(opt)
    rows = [("overflowing step skipped, scale halved",
             torch.equal(before, net.weight) and scaler.get_loss_scaling() == 512.0, f"{scaler.get_loss_scaling()}")]

    class Planted(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inp, self.blow, self.head = torch.nn.Linear(8, 16), torch.nn.Linear(16, 16), torch.nn.Linear(16, 3)
            with torch.no_grad():
                self.blow.weight.fill_(3e4)

        def forward(self, x):
            return self.head(self.blow(torch.relu(self.inp(x))) / 1e6)

    sampan.seed_everything(0)
    planted = Planted()
    with torch.no_grad():  # every hidden unit positive: blow's outputs ~1e6, past float16's 65504 on any input
        planted.inp.weight.fill_(0.5)
        planted.inp.bias.zero_()
    model = sampan.Model(planted)
    model.prepare(torch.optim.SGD(planted.parameters(), 0.0), torch.nn.CrossEntropyLoss(), amp="fp16", device="cuda")
    data = torch.utils.data.TensorDataset(torch.rand(32, 8), torch.randint(0, 3, (32,)))
    try:
        model.fit(data, batch_size=16, verbose=0)
        named = None
    except AmpNonFiniteError as err:
        named = err.module
    rows.append(("NaN doctor names the planted module", named == "blow", f"named {named!r}"))
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("amp_check: no CUDA GPU here; run it on a machine with an NVIDIA GPU "
              "(the CPU side is covered by tests/platform/amp).", file=sys.stderr)
        return 2
    torch.cuda.set_device(args.device)
    rows = _speed(args.quick) + _accuracy() + _scaler_and_doctor()
    print(f"\n### sampan.amp on {torch.cuda.get_device_name()} (torch {torch.__version__})\n")
    print("| check | ok | detail |\n|---|---|---|")
    for name, ok, detail in rows:
        print(f"| {name} | {'yes' if ok else '**NO**'} | {detail} |")
    return 0 if all(ok for _, ok, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
