"""``sampan bench compress``: fp32 against int8 (dynamic and static) and pruned models, side by side.

Three sections, each measured in one process with interleaved timing (one thread for torch and
ONNX Runtime alike, batch 1 on the CPU):

* **dynamic int8**, a Linear-heavy MLP (64 -> 3 x 1024 -> 10) trained on the digits data:
  fp32 eager, int8 weights in torch (``quantize_dynamic``), fp32 and int8 in ONNX Runtime
  (``sampan.onnx.export`` / ``sampan.quantization.export_onnx``).
* **static int8**, LeNet on 28x28 digits: fp32 against ``PTQ`` (torch reference and ONNX Runtime).
* **structured pruning**, the same LeNet: sensitivity, ``prune_to_flops(0.5)``, a short fine-tune.

Goals (issue 5): int8 size <= 0.3x fp32, int8 CPU latency <= 0.7x fp32 on the Linear-heavy model,
accuracy drop <= 1 point; pruning of 50% FLOPs within 1 point after a short fine-tune.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from torch import nn

from sampan.bench._timing import print_table

COLUMNS = ["model", "size_mb", "size_x", "params", "flops_x", "latency_ms", "latency_x", "metric"]


def _data(size: int):
    from sampan.data import load_dataset
    train, test = load_dataset("digits", "train", size=size), load_dataset("digits", "test", size=size)
    return train.images, train.labels, test.images, test.labels


def _fit(net: nn.Module, x: torch.Tensor, y: torch.Tensor, epochs: int, lr: float = 1e-3) -> nn.Module:
    torch.manual_seed(0)
    opt = torch.optim.Adam(net.parameters(), lr)
    net.train()
    for _ in range(epochs):
        for idx in torch.randperm(len(x)).split(64):
            loss = nn.functional.cross_entropy(net(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return net.eval()


def _accuracy(x: torch.Tensor, y: torch.Tensor):
    def accuracy(model) -> float:
        with torch.inference_mode():
            return 100.0 * float((torch.cat([model(b) for b in x.split(128)]).argmax(1) == y).float().mean())
    return accuracy


def _report(title: str, models: dict, example: torch.Tensor, accuracy, repeat: int) -> dict:
    from sampan.pruning import compression_report
    report = compression_report(models, example, accuracy, repeat=repeat, warmup=3)
    print_table(title, report.rows, COLUMNS)
    return {row["model"]: {k: row.get(k) for k in COLUMNS[1:]} for row in report.rows}


def _dynamic(tmp: Path, quick: bool, repeat: int) -> dict:
    import sampan
    from sampan.quantization import OnnxModel, export_onnx, quantize_dynamic

    xtr, ytr, xte, yte = (t.flatten(1) if t.is_floating_point() else t for t in _data(8))
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(64, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                        nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    _fit(net, xtr, ytr, epochs=2 if quick else 6)
    qnet = quantize_dynamic(net)
    spec = [sampan.InputSpec([None, 64], name="x")]
    fp32_onnx = sampan.onnx.export(net, tmp / "mlp_fp32", spec)
    int8_onnx = export_onnx(qnet, tmp / "mlp_int8", spec)
    models = {"fp32 (torch)": net, "int8 dynamic (torch)": qnet,
              "fp32 (onnxruntime)": OnnxModel(fp32_onnx, threads=1),
              "int8 dynamic (onnxruntime)": OnnxModel(int8_onnx, threads=1)}
    return _report("dynamic int8: Linear-heavy MLP on digits, batch 1", models, xte[:1], _accuracy(xte, yte), repeat)


def _static(tmp: Path, quick: bool, repeat: int, lenet: nn.Module, data) -> dict:
    import sampan
    from sampan.quantization import PTQ, OnnxModel, export_onnx

    xtr, _, xte, yte = data
    ptq = PTQ()
    observed = ptq.quantize(lenet, xtr[:2])
    ptq.calibrate(observed, xtr.split(64), batches=8)
    qnet = ptq.convert(observed)
    spec = [sampan.InputSpec([None, 1, 28, 28], name="image")]
    fp32_onnx = sampan.onnx.export(lenet, tmp / "lenet_fp32", spec)
    int8_onnx = export_onnx(qnet, tmp / "lenet_int8", spec, examples=(xte[:16],))
    models = {"fp32 (torch)": lenet, "int8 static PTQ (torch)": qnet,
              "fp32 (onnxruntime)": OnnxModel(fp32_onnx, threads=1),
              "int8 static PTQ (onnxruntime)": OnnxModel(int8_onnx, threads=1)}
    return _report("static int8: LeNet on digits 28x28, batch 1", models, xte[:1], _accuracy(xte, yte), repeat)


def _pruned(quick: bool, repeat: int, lenet: nn.Module, data) -> dict:
    import copy

    from sampan.pruning import prune_to_flops, sensitivity

    xtr, ytr, xte, yte = data
    accuracy = _accuracy(xte, yte)
    example = xtr[:1]
    table = sensitivity(lenet, accuracy, ratios=(0.25, 0.5, 0.75), example_inputs=example)
    pruned = prune_to_flops(lenet, 0.5, table, example_inputs=example)
    tuned = _fit(copy.deepcopy(pruned), xtr, ytr, epochs=1 if quick else 3, lr=5e-4)
    models = {"fp32": lenet, "pruned 50% FLOPs": pruned, "pruned + fine-tune": tuned}
    return _report("structured pruning: LeNet on digits, batch 1", models, xte[:1], accuracy, repeat)


def run(quick: bool = False) -> dict:
    """Measures every section; returns ``{section: {model: figures}, "goals": {...}}``."""
    from sampan.vision.models import LeNet

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    repeat = 20 if quick else 200
    try:
        with tempfile.TemporaryDirectory() as tmp:
            dyn = _dynamic(Path(tmp), quick, repeat)
            data = _data(28)
            torch.manual_seed(0)
            lenet = _fit(LeNet(num_classes=10), data[0], data[1], epochs=2 if quick else 6)
            static = _static(Path(tmp), quick, repeat, lenet, data)
            pruned = _pruned(quick, repeat, lenet, data)
    finally:
        torch.set_num_threads(threads)
    fp32, int8 = dyn["fp32 (torch)"], dyn["int8 dynamic (onnxruntime)"]
    goals = {
        "int8 size <= 0.3x": int8["size_x"] <= 0.3,
        "int8 latency <= 0.7x (Linear-heavy, vs fp32 torch)": int8["latency_x"] <= 0.7,
        "int8 accuracy drop <= 1 point": fp32["metric"] - int8["metric"] <= 1.0,
        "static int8 accuracy drop <= 1 point":
            static["fp32 (torch)"]["metric"] - static["int8 static PTQ (onnxruntime)"]["metric"] <= 1.0,
        "pruning 50% FLOPs": pruned["pruned 50% FLOPs"]["flops_x"] <= 0.5 + 1e-9,
        "pruned accuracy drop <= 1 point after fine-tune":
            pruned["fp32"]["metric"] - pruned["pruned + fine-tune"]["metric"] <= 1.0,
    }
    print("\n### goals\n")
    for goal, ok in goals.items():
        print(f"- {'met' if ok else 'MISSED'}: {goal}")
    return {"dynamic": dyn, "static": static, "pruning": pruned, "goals": goals}


if __name__ == "__main__":  # pragma: no cover
    run()
