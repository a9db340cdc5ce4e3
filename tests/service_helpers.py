"""Fits in fresh processes with a recording service of their own (a private TMPDIR), for the service's tests."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

FIT = textwrap.dedent("""\
    import json, os, signal, sys
    import torch, sampan
    import sampan.experiments as ex
    from sampan.experiments import service

    class KillService(sampan.callbacks.Callback):
        # $KILL_SERVICE: after the first epoch's writes, kill the service and open its folder to all, so that
        # no new one may start: the rest of the run must be written by this process
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 0 and os.environ.get("KILL_SERVICE"):
                ex.flush()
                pid = service.call("ping", uri=os.environ["SAMPAN_TRACKING_URI"])["pid"]
                os.chmod(service.private_dir(), 0o777)
                os.kill(pid, signal.SIGKILL)

    if os.environ.get("KILL_SERVICE"):
        from sampan.experiments import recorder
        recorder.WRITE_EVERY = 0.0  # the run is created and epoch 1 written before the service dies

    torch.manual_seed(0)
    net = torch.nn.Linear(4, 2)
    model = sampan.Model(net)
    model.prepare(torch.optim.Adam(net.parameters(), 0.01), torch.nn.CrossEntropyLoss())
    data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    model.fit(data, epochs=3, batch_size=16, verbose=0, callbacks=[KillService()])
    print(json.dumps({"run_id": ex.last_run_id(), "mlflow": "mlflow" in sys.modules}))
    """)


class Sandbox:
    """A short private TMPDIR (Unix socket paths are limited to 107 bytes) and a SQLite store."""

    def __init__(self, store: Path):
        self.tmp = Path(tempfile.mkdtemp(prefix="sr", dir="/tmp"))
        self.uri = f"sqlite:///{store.as_posix()}"

    def env(self, **extra: str) -> dict:
        return {**os.environ, "TMPDIR": str(self.tmp), "SAMPAN_TRACKING_URI": self.uri,
                "SAMPAN_EXPERIMENT": "service", "SAMPAN_RECORDER_IDLE": "30", "OMP_NUM_THREADS": "1", **extra}

    def fit(self, **extra: str) -> dict:
        done = subprocess.run([sys.executable, "-c", FIT], capture_output=True, text=True, env=self.env(**extra),
                              timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    def folder(self) -> Path:
        return self.tmp / f"sampan-recorder-{os.getuid()}"

    def sockets(self) -> list[Path]:
        return sorted(self.folder().glob("*.sock")) if self.folder().is_dir() else []

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)  # its service sees its socket gone and exits


def run_of(uri: str, run_id: str):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    return client, client.get_run(run_id)
