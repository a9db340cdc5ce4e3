"""``sampan bench fit``: a hand-written loop vs ``Model.fit`` vs PyTorch Lightning, and import time.

The same network, data, optimizer, batch size and seed go through each
trainer in turn (interleaved, repeated, medians), so the ratios are measured
side by side in one run. Every trainer computes the loss and accuracy per
epoch; Sampan and Lightning show a progress bar, as users run them.
"""
from __future__ import annotations

import contextlib
import io
import os
import statistics
import subprocess
import sys
import time

import torch
from torch.utils.data import DataLoader

from sampan.bench._timing import print_table


def _cnn() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(32 * 16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))


def _mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                               torch.nn.ReLU(), torch.nn.Linear(256, 10))


def _hand_loop(make, data, epochs, batch_size) -> float:
    torch.manual_seed(0)
    net = make()
    opt = torch.optim.Adam(net.parameters(), 1e-3)
    loader = DataLoader(data, batch_size=batch_size, shuffle=True)
    loss_fn = torch.nn.CrossEntropyLoss()
    start = time.perf_counter()
    for _ in range(epochs):
        net.train()
        total, correct, seen = 0.0, 0, 0
        for x, y in loader:
            out = net(x)
            loss = loss_fn(out, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item() * len(y)
            correct += (out.argmax(1) == y).sum().item()
            seen += len(y)
    return (time.perf_counter() - start) / epochs


def _sampan_fit(make, data, epochs, batch_size) -> float:
    import sampan

    torch.manual_seed(0)
    net = make()
    model = sampan.Model(net)
    model.prepare(torch.optim.Adam(net.parameters(), 1e-3), torch.nn.CrossEntropyLoss(), sampan.metric.Accuracy())
    start = time.perf_counter()
    with contextlib.redirect_stderr(io.StringIO()):
        model.fit(data, epochs=epochs, batch_size=batch_size, verbose=1)
    return (time.perf_counter() - start) / epochs


def _lightning(make, data, epochs, batch_size) -> float:
    import lightning as L
    import logging

    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = make()

        def training_step(self, batch, _):
            x, y = batch
            out = self.net(x)
            loss = torch.nn.functional.cross_entropy(out, y)
            self.log("acc", (out.argmax(1) == y).float().mean(), prog_bar=True, on_epoch=True)
            self.log("loss", loss, prog_bar=True, on_epoch=True)
            return loss

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), 1e-3)

    torch.manual_seed(0)
    module = Module()
    trainer = L.Trainer(max_epochs=epochs, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_model_summary=False, enable_progress_bar=True)
    loader = DataLoader(data, batch_size=batch_size, shuffle=True)
    start = time.perf_counter()
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        trainer.fit(module, loader)
    return (time.perf_counter() - start) / epochs


def _resnet18() -> torch.nn.Module:
    from sampan.vision.models import resnet18

    return resnet18(num_classes=10, in_channels=1)


def _in_memory(dataset, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``n`` images and labels of ``dataset`` (all of them if fewer), stacked."""
    n = min(n, len(dataset))
    return torch.stack([dataset[i][0] for i in range(n)]), torch.tensor([int(dataset[i][1]) for i in range(n)])


def _seeded_model(make, memory_format: torch.memory_format | None = None, **prepare):
    """``make()`` built from seed 0 (in ``memory_format``), in a ``Model`` prepared with Adam and cross-entropy."""
    import sampan

    torch.manual_seed(0)
    net = make() if memory_format is None else make().to(memory_format=memory_format)
    model = sampan.Model(net)
    model.prepare(torch.optim.Adam(net.parameters(), 1e-3), torch.nn.CrossEntropyLoss(), **prepare)
    return model


def compiled_training(quick: bool = False) -> dict:
    """``Model.fit`` after ``prepare()`` against ``prepare(to_static=True)``: seconds per step, interleaved.

    Both models are built from the same seed and warmed up by one fit (the static one compiles and
    measures its training path there); then each ``fit`` of one epoch is timed in turn, in a shuffled order.
    Networks: the digits CNN above on 8 x 8 digits and resnet18 (one input channel) on digits resized to
    32 x 32 (256 images), batch 32. Which path ``to_static`` kept, and what else it changed, is its
    ``explain`` (column "to_static runs").
    """
    from sampan.bench._timing import interleaved
    from sampan.data import load_dataset

    digits = load_dataset("digits", "train")
    images, labels = _in_memory(digits, 256)
    big = torch.utils.data.TensorDataset(
        torch.nn.functional.interpolate(images, size=32, mode="bilinear", align_corners=False), labels)
    cases = {"digits CNN": (_cnn, digits), "resnet18 32x32": (_resnet18, big)}
    repeat = 3 if quick else 7
    rows, results = [], {}
    for name, (make, data) in cases.items():
        models = {"eager": _seeded_model(make), "to_static": _seeded_model(make, to_static=True)}
        fits = {k: (lambda m=m: m.fit(data, epochs=1, batch_size=32, verbose=0)) for k, m in models.items()}
        with contextlib.redirect_stderr(io.StringIO()):  # the warm-up fit compiles; to_static measures its path
            times = interleaved(fits, repeat=repeat, warmup=1)
        steps = -(-len(data) // 32)
        med = {k: v / steps for k, v in times.items()}
        static = models["to_static"].network.forward
        choice = static.train_choice
        kept = "compiled" if choice is None else choice.kept
        runs = ", ".join([kept, *static.training_passes])
        rows.append({"network": name, "eager ms/step": med["eager"] * 1e3, "to_static ms/step": med["to_static"] * 1e3,
                     "speed-up": med["eager"] / med["to_static"], "to_static runs": runs})
        results[name] = {"eager_s": med["eager"], "static_s": med["to_static"], "speedup": med["eager"] / med["to_static"],
                         "path": kept, "passes": list(static.training_passes), "choice": str(choice)}
    print_table(f"fit: prepare() vs prepare(to_static=True), batch 32, median of {repeat} epochs, "
                f"{torch.get_num_threads()} threads", rows,
                ["network", "eager ms/step", "to_static ms/step", "speed-up", "to_static runs"])
    return results


def _small_cnn() -> torch.nn.Module:
    """The transfer-learning lesson's SmallCNN: three conv / batch-norm / ReLU / max-pool blocks, 10 classes."""
    def block(cin: int, cout: int) -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 3, padding=1, bias=False), torch.nn.BatchNorm2d(cout),
                                   torch.nn.ReLU(), torch.nn.MaxPool2d(2))

    return torch.nn.Sequential(block(3, 16), block(16, 32), block(32, 64), torch.nn.AdaptiveMaxPool2d(1),
                               torch.nn.Flatten(), torch.nn.Linear(64, 10))


def channels_last_training(quick: bool = False) -> dict:
    """``Model.fit`` of a CNN as built (NCHW) against the same CNN channels-last: seconds per step, interleaved.

    ``net.to(memory_format=torch.channels_last)`` before ``prepare`` is the transfer-learning lesson's one line
    (eager training, no compilation); ATen's CPU convolutions and max pooling are faster in that layout. Networks:
    the lesson's SmallCNN on 32 x 32 ``shapes`` at its batch of 64, and LeNet on 28 x 28 digits at the first
    lesson's batch of 16. Both layouts start from the same weights and see the same batches; the last column is
    the largest difference of their epoch losses. It is float rounding (about 1e-7 at the first step), which
    training amplifies step by step, as it would amplify any other change of summation order.
    """
    from sampan.bench._timing import interleaved
    from sampan.data import load_dataset
    from sampan.vision.models import LeNet

    shapes = torch.utils.data.TensorDataset(*_in_memory(load_dataset("shapes", "train"), 640 if quick else 1920))
    digits = torch.utils.data.TensorDataset(*_in_memory(load_dataset("digits", "train", size=28), 1257))
    cases = {"SmallCNN, shapes 3x32x32": (_small_cnn, shapes, 64), "LeNet, digits 1x28x28": (LeNet, digits, 16)}
    repeat = 3 if quick else 7
    rows, results = [], {}
    for name, (make, data, batch) in cases.items():
        models = {"NCHW": _seeded_model(make), "channels-last": _seeded_model(make, torch.channels_last)}
        losses: dict[str, list[float]] = {}

        def fit(layout: str) -> None:
            torch.manual_seed(len(losses.setdefault(layout, [])))  # the same shuffles for both layouts
            losses[layout] += models[layout].fit(data, epochs=1, batch_size=batch, verbose=0)["loss"]

        times = interleaved({k: (lambda k=k: fit(k)) for k in models}, repeat=repeat, warmup=1)
        steps = -(-len(data) // batch)
        med = {k: v / steps for k, v in times.items()}
        drift = max(abs(a - b) for a, b in zip(losses["NCHW"], losses["channels-last"]))
        rows.append({"network": name, "batch": batch, "NCHW ms/step": med["NCHW"] * 1e3,
                     "channels-last ms/step": med["channels-last"] * 1e3,
                     "speed-up": med["NCHW"] / med["channels-last"], "largest loss difference": f"{drift:.1e}"})
        results[name] = {"nchw_s": med["NCHW"], "channels_last_s": med["channels-last"],
                         "speedup": med["NCHW"] / med["channels-last"], "loss_difference": drift}
    print_table(f"fit: the network as built (NCHW) vs net.to(memory_format=torch.channels_last), eager, median of "
                f"{repeat} epochs, {torch.get_num_threads()} threads", rows,
                ["network", "batch", "NCHW ms/step", "channels-last ms/step", "speed-up", "largest loss difference"])
    return results


def _import_time(statement: str, repeat: int) -> list[float]:
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                                 check=True, timeout=120).stdout) for _ in range(repeat)]


IMPORTS = {"torch": "import torch",
           # what a training script pays: the package imports torch and its Model on first use
           "sampan + Model": "import sampan; sampan.Model",
           # what the command line's servers pay (`sampan lab`, `sampan hub`, `sampan --version`): no torch
           "sampan alone": "import sampan"}


def import_times(repeat: int = 5) -> dict:
    """Median import times in fresh interpreters, interleaved: ``import torch``, ``import sampan`` with its
    ``Model`` (``ratio``: against torch) and ``import sampan`` alone (``alone_ratio``)."""
    times: dict[str, list[float]] = {name: [] for name in IMPORTS}
    for _ in range(repeat):
        for name, statement in IMPORTS.items():
            times[name] += _import_time(statement, 1)
    t, s, alone = (statistics.median(times[name]) for name in IMPORTS)
    return {"import_torch_s": t, "import_sampan_s": s, "ratio": s / t, "import_sampan_alone_s": alone,
            "alone_ratio": alone / t}


def run(quick: bool = False) -> dict:
    from sampan.data import load_dataset

    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", torch.get_num_threads()))))
    data = load_dataset("digits", "train")
    epochs, repeat = (1, 3) if quick else (3, 5)
    trainers = {"hand-written loop": _hand_loop, "sampan Model.fit": _sampan_fit}
    try:
        import lightning  # noqa: F401

        trainers["PyTorch Lightning"] = _lightning
    except ImportError:
        print("PyTorch Lightning is not installed (pip install 'sampan[bench]'): skipping that column.")
    rows, results = [], {}
    for name, make in (("small CNN", _cnn), ("MLP", _mlp)):
        times: dict[str, list[float]] = {k: [] for k in trainers}
        for fn in trainers.values():  # warm-up
            fn(make, data, 1, 32)
        for _ in range(repeat):
            for key, fn in trainers.items():
                times[key].append(fn(make, data, epochs, 32))
        med = {k: statistics.median(v) for k, v in times.items()}
        base = med["hand-written loop"]
        for key, value in med.items():
            rows.append({"model": name, "trainer": key, "s/epoch": value, "vs hand loop": value / base})
        results[name] = {k: {"s_per_epoch": v, "ratio": v / base} for k, v in med.items()}
    print_table(f"fit: digits train split (1,257 images), batch 32, {epochs} epochs, median of {repeat}, "
                f"{torch.get_num_threads()} threads", rows, ["model", "trainer", "s/epoch", "vs hand loop"])
    results["compiled training"] = compiled_training(quick)
    results["channels-last training"] = channels_last_training(quick)
    imports = import_times(3 if quick else 7)
    print_table("import time (fresh interpreter, median)", [
        {"import": "torch", "seconds": imports["import_torch_s"], "ratio": 1.0},
        {"import": "sampan + Model", "seconds": imports["import_sampan_s"], "ratio": imports["ratio"]},
        {"import": "sampan alone", "seconds": imports["import_sampan_alone_s"], "ratio": imports["alone_ratio"]}],
        ["import", "seconds", "ratio"])
    results["import"] = imports
    return results
