import numpy as np
import pytest
import torch

from sampan.data import ImageDataset
from sampan_widgets import ConfusionMatrixView, DatasetBrowser, ExperimentPanel, SummaryView


def test_summary_view_table(recorder, model_and_data):
    model, _ = model_and_data()
    view = SummaryView(model, (1, 16))
    assert view.info["total_params"] == 16 * 32 + 32 + 32 * 3 + 3
    assert "Linear" in view.html.value and f"{view.info['total_params']:,}" in view.html.value


def _images(n=15):
    g = torch.Generator().manual_seed(0)
    return ImageDataset(torch.rand(n, 1, 8, 8, generator=g), torch.arange(n) % 3, ["cat", "dog", "fox"])


def test_dataset_browser_pages(recorder):
    browser = DatasetBrowser(_images(), per_page=6, columns=3)
    assert browser.pages == 3 and browser.prev_button.disabled
    first = browser.image.value
    assert first[:4] == b"\x89PNG" and "samples 0–5 of 15" in browser.label.value
    browser.next_button.click()
    browser.next_button.click()
    assert browser.page == 2 and browser.next_button.disabled and "samples 12–14" in browser.label.value
    assert browser.image.value != first
    browser.next_button.click()  # stays on the last page
    assert browser.page == 2
    with pytest.raises(ValueError, match="per_page"):
        DatasetBrowser(_images(), per_page=0)


def test_dataset_browser_text(recorder):
    ds = [("好吃", 1), ("太差了 <b>", 0)]
    browser = DatasetBrowser(ds, classes=["neg", "pos"], per_page=10)
    assert "好吃" in browser.text.value and "&lt;b&gt;" in browser.text.value and ">pos<" in browser.text.value


def test_confusion_matrix(recorder):
    view = ConfusionMatrixView([0, 1, 2, 2, 1], [0, 2, 2, 2, 1], classes=["a", "b", "c"])
    assert view.matrix.tolist() == [[1, 0, 0], [0, 1, 1], [0, 0, 2]]
    assert view.accuracy == pytest.approx(0.8)
    raw = view.image.value
    view.normalize.value = True
    assert view.image.value[:4] == b"\x89PNG" and view.image.value != raw
    with pytest.raises(ValueError, match="same length"):
        ConfusionMatrixView([0, 1], [0])


def test_confusion_matrix_from_model(recorder, model_and_data):
    model, data = model_and_data(n=64)
    view = ConfusionMatrixView.from_model(model, data, batch_size=32, num_classes=3)
    assert view.matrix.sum() == 64 and view.matrix.shape == (3, 3)


def test_experiment_panel_overlays_runs(recorder, model_and_data):
    def make_model(lr):
        model, _ = model_and_data(n=8)
        for group in model._optimizer.param_groups:
            group["lr"] = lr
        return model

    _, data = model_and_data(n=96)
    panel = ExperimentPanel(make_model, data, data, epochs=(1, 3, 2))
    panel.lr.value = 0.1
    panel.run_button.click()
    history = panel.run(lr=0.01, batch_size=32, epochs=1)
    assert [r["label"] for r in panel.runs] == ["lr=1.0e-01 bs=32 ep=2", "lr=1.0e-02 bs=32 ep=1"]
    assert len(panel.runs[0]["history"]["loss"]) == 2 and history["loss"]
    assert panel.image.value[:4] == b"\x89PNG" and "2 run(s)" in panel.status.value
    assert not panel.run_button.disabled
    panel.clear()
    assert panel.runs == [] and panel.image.value == b""
    assert np.isfinite(panel.lr.value)
