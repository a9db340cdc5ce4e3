"""Fixtures for tests/security/: a real exported model to attack (the builders are in _attacks.py)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch


@pytest.fixture(scope="session")
def exported_mlp(tmp_path_factory):
    """A real exported 2-layer MLP (``sampan.jit.save`` pt2 + ``sampan.onnx.export``), built once; tests copy it."""
    import sampan

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    prefix = tmp_path_factory.mktemp("exported") / "mlp"
    sampan.jit.save(net, prefix, input_spec=[sampan.InputSpec([None, 4], name="x")])
    sampan.onnx.export(net, prefix, input_spec=[sampan.InputSpec([None, 4], name="x")])
    return prefix


@pytest.fixture
def shared_model(exported_mlp, tmp_path):
    """A fresh copy of the exported MLP in ``tmp_path/shared`` (the attacker edits this one)."""
    folder = tmp_path / "shared"
    folder.mkdir()
    for suffix in (".pt2", ".onnx", ".meta.json"):
        (folder / f"mlp{suffix}").write_bytes(Path(f"{exported_mlp}{suffix}").read_bytes())
    return folder / "mlp"
