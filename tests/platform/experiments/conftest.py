"""Planted notebooks for sweeps and jobs, and a fresh store per test."""
from __future__ import annotations

import textwrap
import uuid
from pathlib import Path

import nbformat
import pytest


def write_notebook(path: Path, params: str, *cells: str) -> Path:
    """A notebook with a tagged `parameters` cell, then one code cell per string (kernel: python3)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells.append(nbformat.v4.new_code_cell(textwrap.dedent(params), metadata={"tags": ["parameters"]}))
    nb.cells.extend(nbformat.v4.new_code_cell(textwrap.dedent(src)) for src in cells)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


# a real (tiny) Model.fit, so its run, its metrics and its parent trial/job go through the real recorder
FIT = """\
import torch, sampan
from torch.utils.data import TensorDataset
torch.manual_seed(0)
x = torch.randn(128, 8); y = (x[:, 0] > 0).long()
net = torch.nn.Sequential(torch.nn.Linear(8, width), torch.nn.ReLU(), torch.nn.Linear(width, 2))
model = sampan.Model(net)
model.prepare(torch.optim.SGD(net.parameters(), lr=lr), torch.nn.CrossEntropyLoss(), sampan.metric.Accuracy())
model.fit(TensorDataset(x, y), TensorDataset(x[:64], y[:64]), epochs=3, batch_size=32, verbose=0)
"""


@pytest.fixture
def fresh_store(tracking_store, monkeypatch, request):
    """An experiment of its own in the session's store, so a test counts only its runs (a new SQLite store
    costs seconds of schema migrations)."""
    monkeypatch.setenv("SAMPAN_EXPERIMENT", f"test-{request.node.name}-{uuid.uuid4().hex[:6]}")
    return tracking_store


@pytest.fixture
def fit_notebook(tmp_path):
    return write_notebook(tmp_path / "nb" / "train.ipynb", "lr = 0.1\nwidth = 8\nfail = False\n",
                          "if fail:\n    raise ValueError('this trial was asked to fail')", FIT)


@pytest.fixture
def sleeper(tmp_path):
    """A notebook that prints, then sleeps `seconds`."""
    return write_notebook(tmp_path / "sleep.ipynb", "seconds = 60\n",
                          "import time\nprint('started', flush=True)\ntime.sleep(seconds)")
