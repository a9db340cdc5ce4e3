"""LiveCurves and ResourceMonitor in a real browser: a Voilà page during a short fit, and JupyterLab."""
import os
import re
import shutil
import time
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.browser
REPO = Path(__file__).resolve().parents[2]

VOILA_CELLS = [
    """
import time
import ipywidgets as W
import torch
from torch.utils.data import TensorDataset
import sampan
from sampan_widgets import LiveCurves, ResourceMonitor

live = LiveCurves(max_fps=4, budget=0.05)  # redraw often: this page is about values moving
monitor = ResourceMonitor(interval=0.25).start()

class Slow(sampan.callbacks.Callback):
    def on_train_batch_end(self, step, logs=None):
        time.sleep(0.12)

def train(_):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    model = sampan.Model(net)
    model.prepare(torch.optim.SGD(net.parameters(), lr=0.2), torch.nn.CrossEntropyLoss(),
                  metrics=sampan.metric.Accuracy())
    x = torch.randn(192, 8)
    data = TensorDataset(x, (x[:, 0] > 0).long())
    model.fit(data, data, batch_size=16, epochs=3, verbose=0, log_freq=2, callbacks=[live, monitor, Slow()])

button = W.Button(description="train")
button.on_click(train)
W.VBox([button, live.widget, monitor.widget])
""",
]

LAB_CELLS = [
    "from sampan_widgets import LiveCurves, ResourceMonitor\n"
    "monitor = ResourceMonitor(interval=0.25).start()\nmonitor",
    "live = LiveCurves()\nfor s in range(20):\n    live.on_train_batch_end(s, {'loss': 1 / (s + 1), 'step': s + 1})\n"
    "live.redraw()\nlive",
]


def _notebook(path: Path, cells: list[str]) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c.strip()) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def _texts(page, selector):
    return [t.strip() for t in page.locator(selector).all_inner_texts()]


def test_voila_page_shows_values_that_change_during_a_fit(start_voila, page, tmp_path):
    url = start_voila(_notebook(tmp_path / "live.ipynb", VOILA_CELLS))
    page.goto(url, timeout=120_000)
    page.locator(".sampan-res-time").first.wait_for(timeout=120_000)
    page.get_by_role("button", name="train").click()
    live_seen, monitor_seen = set(), set()
    deadline = time.time() + 90
    while time.time() < deadline:
        live_seen.update(_texts(page, ".sampan-live-status"))
        monitor_seen.update(_texts(page, ".sampan-res-time"))
        if any("epoch 3/3" in t and "step 36" in t and "eval_loss" in t for t in live_seen):
            break
        page.wait_for_timeout(150)
    assert any("epoch 3/3" in t and "step 36" in t for t in live_seen), sorted(live_seen)
    steps = {t.split("step ")[1].split()[0] for t in live_seen if "step " in t}
    assert len(steps) >= 4, live_seen  # the curves' values moved while training ran
    assert len(monitor_seen) >= 4, monitor_seen  # the monitor's time stamp and figures moved too
    assert page.locator(".sampan-live-curves svg polyline").count() >= 2
    assert "process RSS" in page.locator(".sampan-resource-monitor").inner_text()
    page.wait_for_timeout(600)
    # the figures after the fit's end, which samples beside the sampler's thread: a CPU percent a process can
    # reach (it read "process 984%" on 2 cores), and the memory chart's whole history (a late sample cleared it)
    shown = page.locator(".sampan-resource-monitor").inner_text()
    process_cpu = re.search(r"process (\d+)%", shown)
    assert process_cpu and int(process_cpu.group(1)) <= 100 * os.cpu_count(), shown
    memory = page.locator(".sampan-resource-monitor svg polyline").first.get_attribute("points")
    assert len(memory.split()) >= 8, memory  # x y pairs: 4 points at least (a sample each 0.25 s, a 4 s fit)
    shot = tmp_path / "voila.png"
    page.screenshot(path=str(shot), full_page=True)
    (REPO / "docs" / "images").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, REPO / "docs" / "images" / "widgets-voila.png")


def test_jupyterlab_renders_the_widgets(start_lab, page, tmp_path):
    root = tmp_path / "lab"
    root.mkdir()
    _notebook(root / "widgets.ipynb", LAB_CELLS)
    lab = start_lab(root)
    page.goto(lab.url("lab/tree/widgets.ipynb"), timeout=120_000)
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=120_000)
    page.get_by_text("Python 3 (ipykernel) | Idle").first.wait_for(timeout=120_000)  # kernel started
    polyline = page.locator(".sampan-live-curves svg polyline").first
    for _ in range(3):  # the menu can open before the notebook panel takes focus on a slow machine
        page.locator(".jp-Notebook .jp-Cell").first.click()
        page.get_by_role("menuitem", name="Run").first.click()
        page.get_by_text("Run All Cells", exact=True).click()
        try:
            polyline.wait_for(timeout=40_000)
            break
        except Exception:
            page.keyboard.press("Escape")
    polyline.wait_for(timeout=5_000)
    first = page.locator(".sampan-res-time").first.inner_text()
    page.wait_for_timeout(1200)
    assert page.locator(".sampan-res-time").first.inner_text() != first
    assert "step 20" in page.locator(".sampan-live-status").first.inner_text()
    page.screenshot(path=str(tmp_path / "lab.png"))
