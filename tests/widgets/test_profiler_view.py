import json

from sampan_widgets import ProfilerView


def _rows(html):
    return [cells.split("</td>")[0] for cells in html.split("<tr><td>")[1:]]


def test_profile_fit_shows_sortable_ops_breakdown_memory_and_exports(recorder, tmp_path, model_and_data):
    model, data = model_and_data(n=128)
    view = ProfilerView(steps=3, warmup=1, row_limit=50)
    report = view.profile_fit(model, data, batch_size=16)
    assert report.breakdown()["steps"] == 3
    by_cpu = _rows(view.ops.value)
    assert "aten::addmm" in by_cpu and "sampan::forward" in by_cpu
    view.sort.value = "count"  # the dropdown re-sorts the table
    counts = [int(c.split("</td><td>")[1]) for c in view.ops.value.split("<tr><td>")[1:]]
    assert counts == sorted(counts, reverse=True) and _rows(view.ops.value) != by_cpu
    assert "forward" in view.breakdown.value and "loop overhead" in view.breakdown.value
    assert view.breakdown_image.value[:4] == b"\x89PNG" and view.memory_image.value[:4] == b"\x89PNG"
    out = view.export(str(tmp_path / "trace.json"))
    assert json.loads(out.read_text())["traceEvents"] and "written to" in view.export_status.value


def test_profile_a_code_block(recorder):
    import torch

    view = ProfilerView(steps=2, warmup=0)
    assert view.export() is None and "profile something first" in view.export_status.value
    view.profile(lambda: torch.randn(16, 16) @ torch.randn(16, 16))
    assert "aten::mm" in _rows(view.ops.value)
    assert "no fit breakdown" in view.breakdown.value
