"""An exported model from someone else never runs code when loaded (issue 11, security item 1).

The attack: take a real ``sampan.jit.save`` artifact, flag one weight ``use_pickle: true`` in the ``.pt2``'s
weights config, replace that weight with a pickle whose ``__reduce__`` runs a shell command, and recompute the
sha256 in the (attacker's own) meta file. Plain ``torch.export.load`` runs the command; Sampan must refuse the
file, naming the entry, before torch opens it.
"""
from __future__ import annotations

import contextlib
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


def _node(target: str, inputs: list, out: str) -> dict:
    return {"target": target, "inputs": inputs, "outputs": [{"as_tensor": {"name": out}}], "metadata": {},
            "is_hop_single_tensor_return": None, "name": out}


def _tensor_meta(n: int) -> dict:
    return {"dtype": 1, "sizes": [{"as_int": n}], "requires_grad": False, "device": {"type": "cpu", "index": None},
            "strides": [{"as_int": 1}], "storage_offset": {"as_int": 0}, "layout": 7}


def _meta(sizes: list[int], dtype: int = 7) -> dict:
    return {**_tensor_meta(1), "dtype": dtype, "sizes": [{"as_int": n} for n in sizes],
            "strides": [{"as_int": 1} for _ in sizes]}


def _arg(name: str, value: dict, kind: int = 1) -> dict:
    return {"name": name, "arg": value, "kind": kind}


def _run_with_plain_torch(prefix: Path, script: str = ""):
    """Loads and calls the model with plain torch in another process (the attack may crash it); ``script`` runs
    after, with the output as ``y``."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", "import sys, torch; y = torch.export.load(sys.argv[1]).module()"
                           f"(torch.randn(2, 4)); {script}", f"{prefix}.pt2"], capture_output=True, timeout=300)


def test_a_graph_that_writes_a_file_with_plain_aten_ops_is_refused(shared_model, tmp_path, capsys):
    """No pickle and no string torch evaluates: ``aten.from_file(path, shared=True)`` maps any file for writing,
    and ``slice`` + ``fill_`` nodes write the attacker's bytes into it (a ``.pth`` or ``.bashrc``: code later)."""
    target, content = tmp_path / "outside" / "evil.pth", b"import os\n"
    target.parent.mkdir()

    def edit(program):
        graph = program["graph_module"]["graph"]
        graph["tensor_values"]["mapped"] = _tensor_meta(len(content))
        nodes = [_node("torch.ops.aten.from_file.default", [
            {"name": "filename", "arg": {"as_string": str(target)}, "kind": 1},
            {"name": "shared", "arg": {"as_bool": True}, "kind": 1},
            {"name": "size", "arg": {"as_int": len(content)}, "kind": 1},
            {"name": "dtype", "arg": {"as_scalar_type": 1}, "kind": 2}], "mapped")]
        for i, byte in enumerate(content):
            graph["tensor_values"][f"b{i}"] = graph["tensor_values"][f"f{i}"] = _tensor_meta(1)
            nodes.append(_node("torch.ops.aten.slice.Tensor", [
                {"name": "self", "arg": {"as_tensor": {"name": "mapped"}}, "kind": 1},
                {"name": "dim", "arg": {"as_int": 0}, "kind": 1}, {"name": "start", "arg": {"as_int": i}, "kind": 1},
                {"name": "end", "arg": {"as_int": i + 1}, "kind": 1}], f"b{i}"))
            nodes.append(_node("torch.ops.aten.fill_.Scalar", [
                {"name": "self", "arg": {"as_tensor": {"name": f"b{i}"}}, "kind": 1},
                {"name": "value", "arg": {"as_int": byte}, "kind": 1}], f"f{i}"))
        graph["nodes"] = nodes + graph["nodes"]

    _edit_program(shared_model, edit)
    torch.export.load(f"{shared_model}.pt2").module()(torch.randn(2, 4))  # the attack is real
    assert target.read_bytes() == content
    target.unlink()
    refused = r"target 'torch\.ops\.aten\.from_file\.default'\" names an operator that takes the string argument " \
              r"'filename'"
    _refused_everywhere(shared_model, refused, "from_file", tmp_path, capsys)
    assert not target.exists()


@pytest.mark.parametrize("target", ["torch.os.system", "_operator.attrgetter", "torch.ops.myext.run.default",
                                    "#os.system", "torch.ops.aten.__class__.default",
                                    "torch.ops.aten.no_such_op.default"])
def test_a_graph_may_call_only_torch_tensor_operators_and_arithmetic(shared_model, target):
    def edit(program):
        program["graph_module"]["graph"]["nodes"][0]["target"] = target

    _edit_program(shared_model, edit)
    with pytest.raises(UnsafeFileError, match=rf"target {re.escape(repr(target))}\" names an operator that"):
        sampan.jit.load(shared_model)


def test_a_guard_that_closes_torchs_quoted_message_is_refused(shared_model, tmp_path):
    """torch pastes each guard into ``torch._assert(<guard>, "Guard failed: <guard>")`` and execs it: a bytes
    literal holding a double quote ends that message and the rest runs."""
    marker = tmp_path / "pwned"
    guard = f"""math.inf == inf or b'"+str(__import__("os").system("echo pwned > {marker}"))+"'"""
    _edit_program(shared_model, lambda program: program.update(guards_code=[guard]))
    torch.export.load(f"{shared_model}.pt2").module()(torch.randn(2, 4))  # the attack is real
    assert marker.read_text().strip() == "pwned"
    marker.unlink()
    with pytest.raises(UnsafeFileError, match=r"guards_code' holds Python that has characters beyond size"):
        sampan.jit.load(shared_model)
    from sampan.jit._safety import _unsafe_node

    assert "holds the constant b'x'" in _unsafe_node("math.inf == inf or b'x'", guard=True)
    assert not marker.exists()


def test_input_names_that_torch_pastes_into_guard_code_must_be_plain(shared_model):
    def edit(program):
        signature = program["graph_module"]["module_call_graph"][0]["signature"]
        spec = json.loads(signature["in_spec"])
        spec[1]["children_spec"][1]["context"] = json.dumps(['x"]+print(1)+["'])
        signature["in_spec"] = json.dumps(spec)

    _edit_program(shared_model, edit)
    with pytest.raises(UnsafeFileError, match=r"in_spec' has the keys"):
        sampan.jit.load(shared_model)


def _two_faced_zip(honest: bytes, evil: dict[str, bytes]) -> bytes:
    """One file holding two archives: Python's zipfile finds the central directory just before the end record
    (the honest one), torch's miniz reader goes where the end record points (the one with ``evil`` members)."""
    import io
    import struct

    def build(replace):
        buf = io.BytesIO()
        with zipfile.ZipFile(io.BytesIO(honest)) as src, zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as out:
            for info in src.infolist():
                data = replace.get(info.filename.split("/", 1)[1], src.read(info))
                out.writestr(zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0)), data)
        raw = buf.getvalue()
        _, _, _, _, count, size, offset, _ = struct.unpack("<4s4H2LH", raw[-22:])
        return raw[:offset], raw[offset:offset + size], count

    good_local, good_cd, count = build({})
    evil_local, evil_cd, _ = build(evil)
    assert len(good_cd) == len(evil_cd)  # same names: the two directories have one size
    shift, shifted, pos = len(good_cd) + len(good_local), bytearray(evil_cd), 0
    while pos < len(shifted):  # point the evil directory at its members, after the honest ones
        name_len, extra_len, comment_len = struct.unpack("<3H", shifted[pos + 28:pos + 34])
        (offset,) = struct.unpack("<L", shifted[pos + 42:pos + 46])
        shifted[pos + 42:pos + 46] = struct.pack("<L", offset + shift)
        pos += 46 + name_len + extra_len + comment_len
    body = b"\0" * len(good_cd) + good_local + evil_local
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, count, count, len(good_cd), len(body), 0)
    return body + bytes(shifted) + good_cd + end


def test_an_archive_that_reads_differently_for_torch_is_refused(shared_model, tmp_path):
    marker = tmp_path / "pwned"
    file = Path(f"{shared_model}.pt2")
    config = json.loads(_read(file, CONFIG))
    _, entry = next(iter(config["config"].items()))
    entry["use_pickle"] = True
    file.write_bytes(_two_faced_zip(file.read_bytes(), {
        CONFIG: json.dumps(config).encode(), f"data/weights/{entry['path_name']}": pickle.dumps(Payload(marker))}))
    reseal(shared_model)
    assert json.loads(_read(file, CONFIG))["config"] != config["config"]  # Python's zipfile sees the honest copy
    with pytest.raises(Exception):  # noqa: B017 - the attack is real: plain torch unpickles the other copy
        torch.export.load(str(file))
    assert marker.read_text().strip() == "pwned"
    marker.unlink()
    with pytest.raises(UnsafeFileError, match=r"reads differently with torch's zip reader than with Python's"):
        sampan.jit.load(shared_model)
    assert not marker.exists()


def test_onnx_sparse_initializer_data_outside_the_folder_is_refused(tmp_path):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from sampan.jit._safety import check_onnx

    values = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4])
    values.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "../secret.bin"), ("offset", "0"), ("length", "16")):
        entry = values.external_data.add()
        entry.key, entry.value = key, value
    sparse = helper.make_sparse_tensor(values, numpy_helper.from_array(np.arange(4, dtype=np.int64), "i"), [4])
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], sparse_initializer=[sparse])
    (tmp_path / "model").mkdir()
    onnx.save(helper.make_model(graph), tmp_path / "model" / "m.onnx")
    with pytest.raises(UnsafeFileError, match=r"tensor 'w' reads its data from '\.\./secret\.bin'"):
        check_onnx(tmp_path / "model" / "m.onnx")


def test_a_name_that_torch_pastes_into_generated_code_is_refused(shared_model, tmp_path):
    """torch writes the program's input names into ``def forward(self, <name>):`` and execs it while loading:
    a name carrying a default value runs code before the model is ever called."""
    marker = tmp_path / "pwned"

    def edit(program):
        module = program["graph_module"]
        module["graph"]["inputs"].append({"as_none": True})
        module["signature"]["input_specs"].append({"constant_input": {
            "name": f"c=__import__('os').system('touch {marker}')", "value": {"as_none": True}}})

    _edit_program(shared_model, edit)
    with contextlib.suppress(Exception):  # the attack is real: plain torch runs it while loading, then fails
        torch.export.load(f"{shared_model}.pt2").module()
    assert marker.exists()
    marker.unlink()
    with pytest.raises(UnsafeFileError, match=r"models/model\.json: name' holds \"c=__import__.*not a plain name"):
        sampan.jit.load(shared_model)
    assert not marker.exists()


def _refused_everywhere(model, refused: str, named: str, tmp_path, capsys) -> None:
    """``sampan.jit.load``, the predictor (``auto`` and ``pt2``) and ``sampan export`` all refuse ``model``."""
    from sampan.cli import main

    with pytest.raises(UnsafeFileError, match=refused):
        sampan.jit.load(model)
    for backend in ("auto", "pt2"):
        with pytest.raises(UnsafeFileError, match=refused):
            sampan.inference.create_predictor(_config(model, backend))
    assert main(["export", f"{model}.pt2", "--format", "onnx", "--output", str(tmp_path / "out")]) == 1
    assert named in capsys.readouterr().err


def test_aten_internals_that_write_out_of_bounds_are_refused(shared_model):
    """Public-looking tensor arithmetic from aten's internals: a sparse tensor built without index checks, then
    densified, writes a chosen value far outside its buffer (plain torch crashes; a nearer offset corrupts
    memory silently)."""
    def edit(program):
        graph = program["graph_module"]["graph"]
        graph["tensor_values"].update(idx=_meta([1, 1], 5), val=_meta([1]), sp=_meta([4]), dense=_meta([4]))
        graph["nodes"] = [
            _node("torch.ops.aten.full.default", [_arg("size", {"as_ints": [1, 1]}),
                                                  _arg("fill_value", {"as_int": 50_000_000_000}),
                                                  _arg("dtype", {"as_scalar_type": 5}, 2)], "idx"),
            _node("torch.ops.aten.full.default", [_arg("size", {"as_ints": [1]}), _arg("fill_value", {"as_float": 7.0}),
                                                  _arg("dtype", {"as_scalar_type": 7}, 2)], "val"),
            _node("torch.ops.aten._sparse_coo_tensor_with_dims_and_tensors.default", [
                _arg("sparse_dim", {"as_int": 1}), _arg("dense_dim", {"as_int": 0}), _arg("size", {"as_ints": [4]}),
                _arg("indices", {"as_tensor": {"name": "idx"}}), _arg("values", {"as_tensor": {"name": "val"}}),
                _arg("dtype", {"as_scalar_type": 7}, 2), _arg("layout", {"as_layout": 1}, 2),
                _arg("device", {"as_device": {"type": "cpu", "index": None}}, 2),
                _arg("pin_memory", {"as_bool": False}, 2)], "sp"),
            _node("torch.ops.aten._to_dense.default", [_arg("self", {"as_tensor": {"name": "sp"}})], "dense"),
        ] + graph["nodes"]

    _edit_program(shared_model, edit)
    plain = _run_with_plain_torch(shared_model)
    assert plain.returncode < 0, plain.stderr[-2000:]  # the attack is real: plain torch dies of a signal
    with pytest.raises(UnsafeFileError, match=r"aten\.(_to_dense|_sparse_coo_tensor_with_dims_and_tensors)\.default"
                                              r"'\" names an operator that is one of aten's internal operators"):
        sampan.jit.load(shared_model)
    from sampan.jit._safety import _unsafe_target

    assert "sparse" in _unsafe_target("torch.ops.aten.sparse_coo_tensor.indices")  # the public door too
    assert "other memory" in _unsafe_target("torch.ops.aten.set_.source_Tensor")


def test_an_operator_whose_unsafe_flag_skips_bounds_checks_is_refused(shared_model, tmp_path, capsys,
                                                                        monkeypatch):
    """``aten.segment_reduce`` is public and its only string is a mode (``reduce="sum"``), but ``unsafe=True``
    turns off the check that ``lengths`` fit the data: its kernel reads past the buffer and the model returns the
    process's heap memory (pointers, other tensors' data) as its output; a big segment crashes the process."""
    size = 16  # segments of one float each, from the 3-float bias

    def edit(program):
        graph = program["graph_module"]["graph"]
        graph["tensor_values"].update(lens=_meta([size], 4), leak=_meta([size]))
        graph["nodes"] += [
            _node("torch.ops.aten.full.default", [_arg("size", {"as_ints": [size]}), _arg("fill_value", {"as_int": 1}),
                                                  _arg("dtype", {"as_scalar_type": 4}, 2)], "lens"),
            _node("torch.ops.aten.segment_reduce.default", [
                _arg("data", {"as_tensor": {"name": "p_2_bias"}}), _arg("reduce", {"as_string": "sum"}),
                _arg("lengths", {"as_tensor": {"name": "lens"}}, 2), _arg("unsafe", {"as_bool": True}, 2)], "leak")]
        graph["outputs"] = [{"as_tensor": {"name": "leak"}}]
        for spec in program["graph_module"]["signature"]["output_specs"]:
            spec["user_output"]["arg"]["as_tensor"]["name"] = "leak"

    _edit_program(shared_model, edit)
    plain = _run_with_plain_torch(shared_model, "print('read', y.numel())")
    # the attack is real: plain torch returns 16 floats read from a 3-float buffer (or dies of a signal)
    assert plain.returncode < 0 or plain.stdout.strip() == f"read {size}".encode(), plain.stderr[-2000:]

    def never(*args, **kwargs):
        raise AssertionError("torch.export.load ran on a file the checks should have refused")

    monkeypatch.setattr(torch.export, "load", never)  # the refusal comes first: nothing is loaded or run
    refused = r"target 'torch\.ops\.aten\.segment_reduce\.default'\" names an operator that takes the argument " \
              r"'unsafe', which turns off its bounds checks"
    _refused_everywhere(shared_model, refused, "segment_reduce.default", tmp_path, capsys)
    assert not (tmp_path / "out.onnx").exists()


@pytest.mark.parametrize("value", [{"as_bool": True}, {"as_int": 1}, {"as_bools": [True]}])
def test_a_node_passing_unsafe_is_refused_whatever_its_operator(tmp_path, value):
    """Defence in depth: a node that passes ``unsafe`` anything but false is refused even when its operator
    alone would pass (a future operator whose schema check missed it)."""
    from sampan.jit._safety import _check_program_dict

    node = _node("torch.ops.aten.add.Tensor", [_arg("self", {"as_tensor": {"name": "x"}}), _arg("unsafe", value, 2)],
                 "y")
    with pytest.raises(UnsafeFileError, match=r"\"m\.json: target 'torch\.ops\.aten\.add\.Tensor'\" passes unsafe=.* "
                                              r"to an operator, which turns off its bounds checks"):
        _check_program_dict(tmp_path / "m.pt2", "m.json", node)
    node["inputs"][1]["arg"] = {"as_bool": False}
    _check_program_dict(tmp_path / "m.pt2", "m.json", node)  # an explicit false is what honest exports write
