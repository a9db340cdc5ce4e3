"""`sampan dashboard experiments` in headless Chromium: recorded runs compared; writes the README screenshot.

The runs are real fits recorded into a private store; the dashboard's kernel reads them through
SAMPAN_TRACKING_URI (no tracking-server port: everything goes through the Voilà kernel).
"""
from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from servers import stop
import torch

import sampan
import sampan.experiments as ex
from sampan.utils.net import free_port

REPO = Path(__file__).resolve().parents[2]
IMAGES = REPO / "docs" / "images"
WAIT = 240_000  # ms: the 2-core CI machine is shared; the dashboard's kernel imports torch and MLflow
pytestmark = pytest.mark.browser


def _record_runs(blobs, mlp) -> list[str]:
    ids = []
    for lr, width in ((0.3, 32), (0.05, 32), (0.01, 32), (0.05, 8)):
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(16, width), torch.nn.ReLU(), torch.nn.Linear(width, 2))
        model = sampan.Model(net)
        model.prepare(torch.optim.SGD(net.parameters(), lr), torch.nn.CrossEntropyLoss(), sampan.metric.Accuracy())
        rec = ex.Recorder(run_name=f"lr={lr} w={width}")
        model.fit(blobs[0], blobs[1], epochs=6, batch_size=32, verbose=0, callbacks=[rec])
        ids.append(rec.run_id)
    return ids


def test_experiments_dashboard_compares_recorded_runs(server_env, page, tmp_path, monkeypatch, blobs, mlp):
    uri = f"sqlite:///{(tmp_path / 'store' / 'mlflow.db').as_posix()}"
    monkeypatch.setenv("SAMPAN_TRACKING_URI", uri)
    _record_runs(blobs, mlp)
    port, token, log = free_port(), uuid.uuid4().hex, tmp_path / "dashboard.log"
    env = dict(server_env, SAMPAN_DATA=str(tmp_path / "data"), SAMPAN_TRACKING_URI=uri, SAMPAN_DASHBOARD_TOKEN=token)
    proc = subprocess.Popen([sys.executable, "-m", "sampan", "dashboard", "experiments", "--port", str(port)],
                            stdout=log.open("w"), stderr=subprocess.STDOUT, env=env, cwd=str(REPO))
    try:
        deadline = time.time() + 120
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.time() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"http://127.0.0.1:{port}/?token={token}", timeout=WAIT)
        table = page.locator(".sampan-compare-table")
        table.wait_for(timeout=WAIT)
        assert "RunCompare(" not in page.content()  # sources are stripped
        assert table.locator("tr.sampan-run-row").count() == 4
        assert "2 of " in page.locator(".sampan-run-compare").inner_text()  # optimizer.lr and model width differ
        highlighted = table.locator('th[style*="#fff3c4"]').all_inner_texts()
        assert "optimizer.lr" in highlighted and "epochs" not in highlighted
        assert page.locator(".sampan-run-compare svg polyline").count() >= 4 + 4  # curves + parallel coordinates
        # select two runs in the list: the table follows (the kernel redraws through the widget comm)
        runs = page.locator(".sampan-run-list select")
        labels = runs.locator("option").all_inner_texts()
        runs.select_option(label=[labels[0], labels[1]])
        page.wait_for_function("document.querySelectorAll('tr.sampan-run-row').length === 2", timeout=WAIT)
        highlighted = table.locator('th[style*="#fff3c4"]').all_inner_texts()
        assert set(highlighted) == {"optimizer.lr", "params_total"}  # the newest two differ in lr and width
        runs.select_option(label=labels[:3])
        page.wait_for_function("document.querySelectorAll('tr.sampan-run-row').length === 3", timeout=WAIT)
        IMAGES.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(IMAGES / "experiments.png"), full_page=True)
        assert not errors, errors
    finally:
        stop(proc)
