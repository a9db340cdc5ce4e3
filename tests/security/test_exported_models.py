"""An exported model from someone else never runs code when loaded (issue 11, security item 1).

The attack: take a real ``sampan.jit.save`` artifact, flag one weight ``use_pickle: true`` in the ``.pt2``'s
weights config, replace that weight with a pickle whose ``__reduce__`` runs a shell command, and recompute the
sha256 in the (attacker's own) meta file. Plain ``torch.export.load`` runs the command; Sampan must refuse the
file, naming the entry, before torch opens it.
"""
from __future__ import annotations

import json
import pickle
import re
import zipfile
from pathlib import Path

import pytest
import torch

import sampan
from sampan.errors import UnsafeFileError

from _attacks import Payload, reseal, rewrite_zip

CONFIG = "data/weights/model_weights_config.json"


def _read(file: Path, name: str) -> bytes:
    with zipfile.ZipFile(file) as archive:
        return archive.read(next(n for n in archive.namelist() if n.split("/", 1)[1] == name))


def _poison_weight(prefix: Path, marker: Path) -> str:
    """Flags the first weight use_pickle and replaces it by a command-running pickle; returns its name."""
    file = Path(f"{prefix}.pt2")
    config = json.loads(_read(file, CONFIG))
    fqn, entry = next(iter(config["config"].items()))
    entry["use_pickle"] = True
    rewrite_zip(file, {CONFIG: json.dumps(config).encode(), f"data/weights/{entry['path_name']}":
                       pickle.dumps(Payload(marker))})
    reseal(prefix)
    return fqn


@pytest.fixture
def poisoned(shared_model, tmp_path):
    marker = tmp_path / "pwned"
    fqn = _poison_weight(shared_model, marker)
    return shared_model, marker, fqn


def test_the_attack_is_real_plain_torch_runs_the_command(poisoned):
    prefix, marker, _ = poisoned
    try:
        torch.export.load(f"{prefix}.pt2")
    except Exception:  # noqa: BLE001 - the command already ran while unpickling
        pass
    assert marker.read_text().strip() == "pwned"


def test_jit_load_refuses_a_pickled_weight_naming_it(poisoned):
    prefix, marker, fqn = poisoned
    with pytest.raises(UnsafeFileError, match=rf"{CONFIG}: {fqn}.*use_pickle") as info:
        sampan.jit.load(prefix)
    assert info.value.entry == f"{CONFIG}: {fqn}" and info.value.path.endswith("mlp.pt2")
    assert not marker.exists()


def test_create_predictor_refuses_a_pickled_weight(poisoned):
    """Even with a clean ONNX file beside it: a tampered folder is reported, not silently worked around."""
    prefix, marker, fqn = poisoned
    assert Path(f"{prefix}.onnx").is_file()
    with pytest.raises(UnsafeFileError, match=rf"{fqn}.*use_pickle"):
        sampan.inference.create_predictor(sampan.inference.Config(prefix))
    with pytest.raises(UnsafeFileError, match=rf"{fqn}.*use_pickle"):
        sampan.inference.create_predictor(_config(prefix, "pt2"))
    assert not marker.exists()


def test_sampan_export_refuses_a_pickled_weight(poisoned, capsys):
    from sampan.cli import main

    prefix, marker, fqn = poisoned
    assert main(["export", f"{prefix}.pt2", "--format", "onnx", "--output", str(prefix.parent / "out")]) == 1
    err = capsys.readouterr().err
    assert "Refusing to load" in err and f"{CONFIG}: {fqn}" in err
    assert not marker.exists() and not (prefix.parent / "out.onnx").exists()


def test_a_legacy_pickled_weights_file_is_refused(shared_model, tmp_path):
    marker = tmp_path / "pwned"
    rewrite_zip(Path(f"{shared_model}.pt2"), {"data/weights/model.pt": pickle.dumps(Payload(marker))})
    reseal(shared_model)
    with pytest.raises(UnsafeFileError, match=r"'data/weights/model\.pt' is not part of a plain"):
        sampan.jit.load(shared_model)
    assert not marker.exists()


def test_sample_inputs_that_need_unsafe_unpickling_are_refused(shared_model, tmp_path):
    """torch retries sample inputs with weights_only=False when the safe load fails."""
    marker = tmp_path / "pwned"
    rewrite_zip(Path(f"{shared_model}.pt2"), {"data/sample_inputs/model.pt": pickle.dumps(Payload(marker))})
    reseal(shared_model)
    with pytest.raises(UnsafeFileError, match=r"data/sample_inputs/model\.pt.*weights_only=False"):
        sampan.jit.load(shared_model)
    assert not marker.exists()


def test_an_opaque_constant_is_refused(shared_model, tmp_path):
    marker = tmp_path / "pwned"
    name = "data/constants/model_constants_config.json"
    config = {"config": {"evil": {"path_name": "opaque_obj_0", "is_param": False, "use_pickle": False,
                                  "tensor_meta": None}}}
    rewrite_zip(Path(f"{shared_model}.pt2"), {name: json.dumps(config).encode(),
                                              "data/constants/opaque_obj_0": pickle.dumps(Payload(marker))})
    reseal(shared_model)
    with pytest.raises(UnsafeFileError, match=r"opaque_obj_0"):
        sampan.jit.load(shared_model)
    assert not marker.exists()


def test_meta_file_cannot_point_the_model_elsewhere(shared_model):
    meta_file = Path(f"{shared_model}.meta.json")
    meta = json.loads(meta_file.read_text())
    meta["artifacts"]["pt2"]["file"] = "../elsewhere.pt2"
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(UnsafeFileError, match=r"names the pt2 file '\.\./elsewhere\.pt2'"):
        sampan.jit.load(shared_model)


def test_the_untouched_artifact_still_loads_and_runs(shared_model):
    loaded = sampan.jit.load(shared_model)
    assert loaded(torch.randn(5, 4)).shape == (5, 3)


def test_an_aoti_package_not_compiled_here_is_refused(shared_model, tmp_path, monkeypatch):
    """An AOTInductor package is a shared library: loading it runs it, so only our own compiles load."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # this user has compiled nothing
    package = shared_model.parent / "mlp.aoti.pt2"
    package.write_bytes(b"PK\x05\x06" + b"\0" * 18)  # what it holds does not matter: it is never opened
    meta_file = Path(f"{shared_model}.meta.json")
    meta = json.loads(meta_file.read_text())
    meta["artifacts"]["aoti"] = dict(meta["artifacts"]["pt2"], file=package.name)
    meta_file.write_text(json.dumps(meta))
    reseal(shared_model, "aoti")
    with pytest.raises(UnsafeFileError, match=r"AOTInductor package .*compiled machine code"):
        sampan.jit.load(shared_model, format="aoti")
    with pytest.raises(UnsafeFileError, match=r"not compiled on this machine"):
        sampan.inference.create_predictor(_config(shared_model, "aoti"))
    # "auto" skips the package (it may be honest, just not ours) and serves the files that hold no code
    predictor = sampan.inference.create_predictor(sampan.inference.Config(shared_model))
    assert predictor.backend in ("pt2", "onnxruntime") and "not compiled on this machine" in predictor.rejected["aoti"]


def _config(prefix, backend):
    config = sampan.inference.Config(prefix)
    config.set_backend(backend)
    return config


def test_onnx_external_data_outside_the_folder_is_refused(exported_mlp, tmp_path):
    import onnx
    from onnx.external_data_helper import set_external_data

    prefix = tmp_path / "shared" / "mlp"
    prefix.parent.mkdir()
    sampan.onnx.export(torch.nn.Sequential(torch.nn.Linear(4, 3)), prefix,
                       input_spec=[sampan.InputSpec([None, 4], name="x")])
    model = onnx.load(f"{prefix}.onnx")
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"\0" * 48)
    weight = model.graph.initializer[0]
    set_external_data(weight, location="../secret.bin", length=weight.ByteSize())
    weight.ClearField("raw_data")
    weight.data_location = onnx.TensorProto.EXTERNAL
    Path(f"{prefix}.onnx").write_bytes(model.SerializeToString())
    reseal(prefix, "onnx")
    with pytest.raises(UnsafeFileError, match=rf"tensor '{weight.name}' reads its data from '\.\./secret\.bin'"):
        sampan.inference.create_predictor(_config(prefix, "onnxruntime"))


def _edit_program(prefix: Path, edit) -> None:
    file = Path(f"{prefix}.pt2")
    program = json.loads(_read(file, "models/model.json"))
    edit(program)
    rewrite_zip(file, {"models/model.json": json.dumps(program).encode()})
    reseal(prefix)


def test_a_shape_expression_that_runs_code_is_refused(shared_model, tmp_path):
    """torch reads symbolic shapes with sympy.sympify, which evals: no pickle needed for this one."""
    marker = tmp_path / "pwned"
    command = f"__import__('os').system('echo pwned > {marker}')"

    def edit(program):
        text = json.dumps(program)
        assert "\"expr_str\": \"Symbol(" in text  # the batch dimension is symbolic
        program.clear()
        program.update(json.loads(re.sub(r'"expr_str": "Symbol\([^"]*\)"', json.dumps({"expr_str": command})[1:-1],
                                          text)))

    _edit_program(shared_model, edit)
    with pytest.raises(Exception):  # noqa: B017 - the attack is real: plain torch runs it while loading
        torch.export.load(f"{shared_model}.pt2")
    assert marker.read_text().strip() == "pwned"
    marker.unlink()
    with pytest.raises(UnsafeFileError, match=r"'models/model\.json: expr_str' holds a shape expression"):
        sampan.jit.load(shared_model)
    assert not marker.exists()


def test_guards_code_that_runs_code_is_refused(shared_model, tmp_path):
    """torch execs a program's guards_code into the module: the first call would run the command."""
    marker = tmp_path / "pwned"
    _edit_program(shared_model, lambda program: program.update(
        guards_code=[f"__import__('os').system('echo pwned > {marker}') == 0"]))
    torch.export.load(f"{shared_model}.pt2").module()(torch.randn(2, 4))  # the attack is real
    assert marker.read_text().strip() == "pwned"
    marker.unlink()
    with pytest.raises(UnsafeFileError, match=r"'models/model\.json: guards_code' holds Python"):
        sampan.jit.load(shared_model)
    with pytest.raises(UnsafeFileError, match=r"guards_code"):
        sampan.inference.create_predictor(sampan.inference.Config(shared_model))
    assert not marker.exists()


def test_honest_shape_expressions_and_guards_still_load(tmp_path):
    """The checks refuse code, not arithmetic: a model whose export records FloorDiv/Mul shapes and size
    guards (non-empty guards_code) loads and runs."""

    class Fold(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(8, 3)

        def forward(self, x):
            b, t, c = x.shape
            return self.linear(x.reshape(b * t // 2, 2 * c)[:, :8]).reshape(b, -1).sum(1)

    file = sampan.jit.save(Fold(), tmp_path / "fold", input_spec=[sampan.InputSpec([None, None, 4], name="x")],
                           examples=[torch.randn(2, 4, 4)])
    program = json.loads(_read(file, "models/model.json"))
    assert program["guards_code"] and "FloorDiv(" in json.dumps(program)
    assert sampan.jit.load(tmp_path / "fold")(torch.randn(3, 6, 4)).shape == (3,)


def test_a_second_copy_of_an_entry_is_refused(shared_model, tmp_path):
    """A zip may hold two members of one name, or a second root folder: which one torch reads is not the
    one a checker reads, so neither is allowed."""
    file = Path(f"{shared_model}.pt2")
    with zipfile.ZipFile(file, "a") as archive:
        root = archive.namelist()[0].split("/", 1)[0]
        archive.writestr("other/models/model.json", _read(file, "models/model.json"))
    reseal(shared_model)
    with pytest.raises(UnsafeFileError, match=r"second root folder"):
        sampan.jit.load(shared_model)
    assert root != "other"
