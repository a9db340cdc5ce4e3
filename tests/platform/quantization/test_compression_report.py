import torch

from sampan.quantization import compression_report, quantize_dynamic
from sampan.pruning import prune


def test_report_compares_size_params_flops_latency_and_metric(mlp):
    x = torch.randn(8, 64)
    labels = mlp(x).argmax(1)

    def accuracy(model):
        with torch.no_grad():
            return float((model(x).argmax(1) == labels).float().mean())
    small = prune(mlp, 0.5, structured=True, example_inputs=x)
    report = compression_report({"fp32": mlp, "int8": quantize_dynamic(mlp), "pruned": small}, x, accuracy,
                                repeat=3, warmup=1)
    fp32, int8, pruned = report["fp32"], report["int8"], report["pruned"]
    assert fp32["size_x"] == 1.0 and fp32["metric"] == 1.0
    assert int8["size_x"] <= 0.3
    assert int8["params"] == fp32["params"] and int8["flops"] == fp32["flops"]
    assert pruned["params"] < 0.35 * fp32["params"] and pruned["flops_x"] < 0.35
    assert all(r["latency_ms"] > 0 for r in report.rows)
    md = report.to_markdown()
    assert md.splitlines()[0].startswith("| model | size_mb | size_x | params | flops |") and "| int8 |" in md
    assert len(report.plot().axes) == 3
    assert list(report.to_dataframe().index) == ["fp32", "int8", "pruned"]
