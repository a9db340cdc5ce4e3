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


def _profiled_view():
    import torch

    view = ProfilerView(steps=1, warmup=0)
    view.profile(lambda: torch.ones(8, 8) @ torch.ones(8, 8))
    return view


def test_the_export_button_writes_new_names_as_often_as_pressed_and_never_replaces_one(recorder, tmp_path,
                                                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)
    view = _profiled_view()
    view.export_button.click()  # the default name, sampan_trace.json
    assert "written to" in view.export_status.value and json.loads((tmp_path / "sampan_trace.json").read_text())
    first = (tmp_path / "sampan_trace.json").read_bytes()
    view.export_button.click()  # again: the author's trace_path is written again (torch alone: "already saved")
    assert "written to" in view.export_status.value and (tmp_path / "sampan_trace.json").read_bytes() == first
    view.path.value = "second.json"
    view.export_button.click()  # a typed name: written once ...
    assert "written to" in view.export_status.value and (tmp_path / "second.json").read_bytes() == first
    (tmp_path / "second.json").write_text("kept")
    view.export_button.click()  # ... and never replaced: said beside the button, the file kept
    status = view.export_status.value
    assert "sampan-export-error" in status and "already exists" in status and "type a new file name" in status
    assert (tmp_path / "second.json").read_text() == "kept"


def test_a_failed_export_is_said_in_the_status(recorder, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    view = _profiled_view()

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(view.report.profiler, "export", full_disk)
    view.path.value = "t.json"
    view.export_button.click()  # a click's exception reaches no one in Voilà: the status must say it
    assert "The trace was not written: OSError" in view.export_status.value
    assert "No space left on device" in view.export_status.value and not (tmp_path / "t.json").exists()
