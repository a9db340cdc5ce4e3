"""Widgets without a browser: every widget's comm is swapped for one that records the messages it sends."""
import threading

import comm
import pytest


class RecordingComm(comm.base_comm.BaseComm):
    """Stands in for the kernel's comm; keeps every message with the thread that sent it."""

    def __init__(self, *args, **kwargs):
        self.log = kwargs.pop("log")
        kwargs.setdefault("comm_id", None)
        super().__init__(*args, **kwargs)

    def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
        self.log.append({"comm_id": self.comm_id, "msg_type": msg_type, "data": data or {},
                         "thread": threading.current_thread().name})


class Recorder:
    def __init__(self):
        self.messages = []
        self.comms = []

    def updates(self, comm_id=None):
        return [m["data"]["state"] for m in self.messages
                if m["msg_type"] == "comm_msg" and m["data"].get("method") == "update"
                and (comm_id is None or m["comm_id"] == comm_id)]

    def opened(self):
        return [m for m in self.messages if m["msg_type"] == "comm_open"]


@pytest.fixture
def recorder(monkeypatch):
    rec = Recorder()

    def create_comm(*args, **kwargs):
        c = RecordingComm(*args, log=rec.messages, **kwargs)
        rec.comms.append(c)
        return c

    monkeypatch.setattr(comm, "create_comm", create_comm)
    return rec


def _model_and_data(n=256, features=16, classes=3, seed=0):
    import torch
    from torch.utils.data import TensorDataset

    import sampan

    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(features, 32), torch.nn.ReLU(), torch.nn.Linear(32, classes))
    model = sampan.Model(net)
    # on the CPU even where a GPU is: the planted leaks are host memory (process RSS, the CPU model's figure)
    model.prepare(torch.optim.SGD(net.parameters(), lr=0.1), torch.nn.CrossEntropyLoss(),
                  metrics=sampan.metric.Accuracy(), device="cpu")
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 1).long()
    return model, TensorDataset(x, y)


@pytest.fixture
def model_and_data():
    """``model_and_data(n=256) -> (prepared sampan.Model, TensorDataset)``: a small 3-class problem."""
    return _model_and_data


@pytest.fixture
def run_dashboard(monkeypatch):
    """``run_dashboard(name) -> namespace``: the code cells of ``notebooks/dashboards/<name>.ipynb`` run here, as
    Voilà's kernel runs them but without one; what they display is kept in ``namespace["_shown"]``."""
    import json
    from pathlib import Path

    import IPython.display

    folder = Path(__file__).resolve().parents[2] / "notebooks" / "dashboards"

    def run(name):
        nb = json.loads((folder / f"{name}.ipynb").read_text(encoding="utf-8"))
        code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
        ns = {"__name__": f"dashboard_{name}", "_shown": []}
        monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: ns["_shown"].extend(objs))
        exec(compile(code, f"{name}.ipynb", "exec"), ns)
        return ns

    return run
