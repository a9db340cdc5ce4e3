"""A kernel's outputs are unreadable to the machine's other processes.

A Jupyter kernel listens on five ZMQ ports of 127.0.0.1. Its iopub port publishes every output, and a ZMQ PUB
socket asks nothing of a subscriber: the connection file's key signs messages (so nobody can make the kernel run
code) but encrypts nothing. Without transport encryption, any local process (another learner on a shared class
machine, another user of a Slurm node) that finds the port reads everything the kernel prints: its data, tokens,
passwords typed into a cell. Sampan's kernels get CurveZMQ keys, written only into the connection file
(``sampan.utils.notebooks.KERNEL_ENCRYPTION``). Each test runs the eavesdropper (``_spy.py``: it knows only the
port, as a scan of 127.0.0.1 finds it) against a real kernel; the control shows that the same spy reads an
unencrypted kernel's outputs, so the attack is real.
"""
from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from sampan.utils.notebooks import execute_notebook

SPY = Path(__file__).with_name("_spy.py")
# printed by the cell, never written in it whole: iopub also publishes the cell's source
SECRET = b"kernel-output-7431"
CELL = """\
import subprocess, sys, time
from pathlib import Path
import ipykernel
info = ipykernel.get_connection_info(unpack=True)
print("encrypted:", sorted(key for key in info if key.startswith("curve")))
out = Path({out!r})
spy = subprocess.Popen([sys.executable, {spy!r}, str(info["iopub_port"]), str(out), "3"])
while not out.with_suffix(".ready").exists() and spy.poll() is None:
    time.sleep(0.05)
for _ in range(10):
    print("-".join(["kernel", "output", "7431"]))
    time.sleep(0.1)
spy.wait(timeout=60)
"""


def _spied_run(tmp_path, **kwargs) -> tuple[bytes, str]:
    """Runs a notebook whose cell starts the spy on its own kernel's iopub port and then prints ``SECRET``; returns
    what the spy heard and what the notebook printed."""
    out = tmp_path / "heard.bin"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CELL.format(out=str(out), spy=str(SPY)))])
    nb.metadata["kernelspec"] = {"name": "sampan", "display_name": "Sampan (Python 3)", "language": "python"}
    source, executed = tmp_path / "spied.ipynb", tmp_path / "spied.out.ipynb"
    nbformat.write(nb, source)
    execute_notebook(str(source), str(executed), kernel_name="sampan", progress_bar=False, **kwargs)
    printed = "".join(o.get("text", "") for o in nbformat.read(executed, as_version=4).cells[0].outputs)
    assert out.is_file(), "the spy did not run"
    return out.read_bytes(), printed


@pytest.mark.parametrize("forked", ["0", "1"], ids=["new-kernel", "forked-kernel"])
def test_a_lessons_kernel_outputs_are_unreadable_to_another_process(tmp_path, monkeypatch, forked):
    """``sampan path run`` and the tests run lessons through ``execute_notebook``, forked or not."""
    monkeypatch.setenv("SAMPAN_FORK_KERNELS", forked)
    heard, printed = _spied_run(tmp_path)
    assert "encrypted: ['curve_publickey', 'curve_secretkey']" in printed
    assert SECRET.decode() in printed  # the learner sees the output
    assert SECRET not in heard and heard == b""  # the spy nothing, not even the kernel's status messages


def test_the_same_spy_reads_an_unencrypted_kernels_outputs(tmp_path, monkeypatch):
    """The control: jupyter_client's default manager (transport_encryption "disabled") leaks every output."""
    from jupyter_client.manager import AsyncKernelManager

    monkeypatch.setenv("SAMPAN_FORK_KERNELS", "0")
    heard, printed = _spied_run(tmp_path, kernel_manager_class=AsyncKernelManager)
    assert "encrypted: []" in printed
    assert SECRET in heard


def test_the_sampan_kernel_spec_declares_curve_and_servers_ask_for_it():
    """``transport_encryption="auto"`` encrypts only kernels whose spec says they can: Sampan's spec says so, and
    every server Sampan starts asks for it (the live dashboards of a class insist)."""
    from sampan.cli import dashboard, lab
    from sampan.cli.kernel import kernel_spec
    from sampan.hub.live import voila_arguments

    assert "curve" in kernel_spec()["metadata"]["supported_encryption"]
    repo_spec = json.loads((Path(__file__).resolve().parents[2] / "kernels" / "sampan" / "kernel.json").read_text())
    assert "curve" in repo_spec["metadata"]["supported_encryption"]
    assert "--KernelManager.transport_encryption=auto" in lab.command(port=8888, open_browser=False)
    assert "--KernelManager.transport_encryption=auto" in dashboard.command(Path("d.ipynb"), port=8866)
    assert "--KernelManager.transport_encryption=required" in voila_arguments(Path("d"), "http://127.0.0.1:9", "/s/")


def test_a_class_encrypts_its_learners_kernels_on_every_deployment(tmp_path):
    """``sampan hub``'s learner servers, the Slurm nodes' and the container image's Jupyter servers."""
    import ast

    from traitlets.config import Config

    from sampan.hub.config import HubSettings, configure

    c = Config()
    configure(c, HubSettings(hub_dir=tmp_path / "hub", live="off", learner_user="root", course_dir=""))
    assert "--KernelManager.transport_encryption=auto" in c.Spawner.args
    deploy = Path(__file__).resolve().parents[2] / "deploy"
    slurm = ast.parse((deploy / "batchspawner_config.py").read_text())
    args = [ast.literal_eval(node.value) for node in ast.walk(slurm) if isinstance(node, ast.Assign)
            and ast.unparse(node.targets[0]) == "c.Spawner.args"]
    assert args == [["--KernelManager.transport_encryption=auto"]]
    config = '{"KernelManager": {"transport_encryption": "auto"}}'
    dockerfile = (deploy / "Dockerfile").read_text()
    assert dockerfile.count(f"echo '{config}' > /etc/jupyter/jupyter_config.json") == 2  # the cpu and cuda images


def test_no_policy_that_leaves_kernels_in_the_clear_is_accepted():
    from sampan.utils.notebooks import encryption_args

    with pytest.raises(ValueError, match=r"Expected `policy` to be 'auto' or 'required'.*Received: policy='disabled'"):
        encryption_args("disabled")
