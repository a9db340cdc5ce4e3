"""What a received model folder may choose about how it is opened: nothing that reads outside the folder, never
ends, or sets ONNX Runtime's session options.

The attacks: a model folder whose meta file or model file is a link to something outside the folder (a pipe or
device, where reading never ends, or another file of this machine), or a pipe itself (a tar keeps both); and an
ONNX file whose metadata holds ONNX Runtime session settings (``ort_config``), which ONNX Runtime applies over the
caller's when ``ORT_LOAD_CONFIG_FROM_MODEL=1`` is set, turning on profiling files written into the current folder.
Each entry point that opens a received folder (``sampan.jit.load``, ``create_predictor``, ``sampan export``) must
refuse them with ``UnsafeFileError`` before it reads a byte.
"""
from __future__ import annotations

import gc
import json
import os
import threading
from pathlib import Path

import pytest

import sampan
from sampan.errors import UnsafeFileError

from _attacks import reseal


def _open_with(how: str, prefix: Path, capsys=None):
    """Opens the received model ``prefix`` the way a learner would."""
    if how == "jit.load":
        return sampan.jit.load(prefix)
    if how == "create_predictor":
        return sampan.inference.create_predictor(sampan.inference.Config(prefix))
    from sampan.cli import main

    code = main(["export", f"{prefix}.pt2", "--format", "onnx", "--output", str(prefix.parent.parent / "out")])
    raise _Refused(capsys.readouterr().err) if code == 1 else AssertionError(f"sampan export returned {code}")


class _Refused(Exception):
    """``sampan export`` reports an error on stderr and returns 1: this carries the message."""


def _refused_in_time(fn, pipe: Path, seconds: float = 30) -> BaseException | None:
    """Runs ``fn`` in a thread; a call still blocked on ``pipe`` after ``seconds`` fails the test (the pipe is then
    opened for writing and closed, so the thread sees its end and the test run goes on)."""
    result: list[BaseException | None] = []

    def call():
        try:
            fn()
            result.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            result.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))  # the blocked reader gets an end of file
        thread.join(seconds)
        pytest.fail(f"opening the model blocked on {pipe} for {seconds} s instead of refusing it")
    return result[0]


@pytest.mark.parametrize("how", ["jit.load", "create_predictor", "sampan export"])
def test_a_meta_file_linked_to_a_pipe_outside_the_folder_is_refused_not_waited_on(shared_model, tmp_path, how,
                                                                                  capsys):
    """``mlp.meta.json -> /dev/zero`` read the meta file into memory until the machine ran out; a link to a pipe
    blocked for ever (the same hang, without filling the memory of the machine that runs this test)."""
    pipe = tmp_path / "outside" / "pipe"
    pipe.parent.mkdir()
    os.mkfifo(pipe)
    meta = Path(f"{shared_model}.meta.json")
    meta.unlink()
    meta.symlink_to(pipe)
    error = _refused_in_time(lambda: _open_with(how, shared_model, capsys), pipe)
    assert isinstance(error, _Refused if how == "sampan export" else UnsafeFileError), error
    assert "outside the model's folder" in str(error) and "mlp.meta.json" in str(error)


def test_a_model_file_that_is_a_pipe_is_refused_not_waited_on(shared_model, tmp_path):
    """``mlp.pt2`` as a pipe (or a link to ``/dev/zero`` in the folder: its checksum was computed for ever)."""
    model = Path(f"{shared_model}.pt2")
    model.unlink()
    os.mkfifo(model)
    error = _refused_in_time(lambda: sampan.jit.load(shared_model), model)
    assert isinstance(error, UnsafeFileError) and error.entry == "pt2", error
    assert "not a regular file" in str(error)


def test_model_files_linked_outside_the_folder_are_not_read(shared_model, exported_mlp, tmp_path):
    """Links to another model of this machine (here the one the test suite exported, standing for the learner's own):
    Sampan read and served it, a read outside the folder it was given."""
    for suffix in (".meta.json", ".pt2"):
        file = Path(f"{shared_model}{suffix}")
        file.unlink()
        file.symlink_to(f"{exported_mlp}{suffix}")
    with pytest.raises(UnsafeFileError, match=r"outside the model's folder") as info:
        sampan.jit.load(shared_model)
    assert info.value.path.endswith("mlp.meta.json")
    # the meta file a plain file: the model file itself is refused
    meta = Path(f"{shared_model}.meta.json")
    meta.unlink()
    meta.write_bytes(Path(f"{exported_mlp}.meta.json").read_bytes())
    with pytest.raises(UnsafeFileError, match=r"outside the model's folder") as info:
        sampan.inference.create_predictor(sampan.inference.Config(shared_model))
    assert info.value.entry == "pt2"


def test_links_inside_the_folder_and_a_linked_folder_still_load(shared_model, tmp_path):
    """What stays inside the folder is the sender's business: ``mlp.pt2 -> v2/mlp.pt2``, ``link -> shared/``."""
    folder = shared_model.parent
    (folder / "v2").mkdir()
    Path(f"{shared_model}.pt2").rename(folder / "v2" / "mlp.pt2")
    Path(f"{shared_model}.pt2").symlink_to("v2/mlp.pt2")
    assert sampan.jit.load(shared_model).format == "pt2"
    (tmp_path / "link").symlink_to(folder)
    predictor = sampan.inference.create_predictor(sampan.inference.Config(tmp_path / "link" / "mlp"))
    assert predictor.backend in ("pt2", "onnxruntime")


def test_an_oversized_meta_file_is_refused(shared_model):
    meta = Path(f"{shared_model}.meta.json")
    data = json.loads(meta.read_text())
    data["padding"] = "x" * (sampan.jit._artifacts.MAX_META_BYTES + 1)
    meta.write_text(json.dumps(data))
    with pytest.raises(UnsafeFileError, match=r"larger than 16 MiB"):
        sampan.jit.load(shared_model)


def _with_ort_config(prefix: Path, settings: dict) -> None:
    import onnx

    file = Path(f"{prefix}.onnx")
    model = onnx.load(file)
    onnx.helper.set_model_props(model, {"ort_config": json.dumps({"session_options": settings})})
    file.write_bytes(model.SerializeToString())
    reseal(prefix, "onnx")


def test_an_onnx_model_cannot_set_onnx_runtime_session_options(shared_model, tmp_path, monkeypatch):
    """With ``ORT_LOAD_CONFIG_FROM_MODEL=1`` ONNX Runtime took ``enable_profiling`` from the model and wrote
    ``onnxruntime_profile_*.json`` into the current folder (outside the model's) when the session ended."""
    cwd = tmp_path / "notebooks"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("ORT_LOAD_CONFIG_FROM_MODEL", "1")
    _with_ort_config(shared_model, {"enable_profiling": 1, "intra_op_num_threads": 3})
    config = sampan.inference.Config(f"{shared_model}.onnx")
    try:
        with pytest.raises(UnsafeFileError, match=r"ONNX Runtime session settings \('ort_config'\)") as info:
            sampan.inference.create_predictor(config)
        assert info.value.entry == "ort_config"
        from sampan.quantization import OnnxModel

        with pytest.raises(UnsafeFileError, match=r"ORT_LOAD_CONFIG_FROM_MODEL=1"):
            OnnxModel(f"{shared_model}.onnx")
    finally:
        gc.collect()  # a session that was created writes its profile when it is destroyed
    assert not list(cwd.iterdir())
    # without the variable ONNX Runtime ignores the entry, and the model is served
    monkeypatch.delenv("ORT_LOAD_CONFIG_FROM_MODEL")
    assert sampan.inference.create_predictor(config).backend == "onnxruntime"
    gc.collect()
    assert not list(cwd.iterdir())
