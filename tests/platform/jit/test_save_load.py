"""sampan.jit.save / load: torch.export programs with specs, checksums and clear errors."""
from __future__ import annotations

import json

import pytest
import torch
from jit_helpers import IMAGE, ExportsDifferently, lenet

import sampan
from sampan import InputSpec
from sampan.errors import CheckpointError, SampanError
from sampan.jit import ExportMismatchError, LoadedProgram, MissingModelError


def test_load_matches_eager_at_batch_sizes_other_than_exported(exported_lenet):
    net, prefix = exported_lenet
    loaded = sampan.jit.load(prefix)
    assert isinstance(loaded, LoadedProgram) and loaded.format == "pt2"
    assert loaded.output_names == ["logits"] and loaded.input_spec == [IMAGE]
    with torch.no_grad():
        for batch in (1, 5, 33):
            x = torch.randn(batch, 1, 28, 28)
            torch.testing.assert_close(loaded(x), net(x), rtol=1e-5, atol=1e-5)


def test_metadata_records_specs_versions_and_checksums(exported_lenet):
    _, prefix = exported_lenet
    meta = json.loads(prefix.with_name("lenet.meta.json").read_text())
    assert meta["inputs"] == [{"shape": [None, 1, 28, 28], "dtype": "float32", "name": "image"}]
    assert meta["outputs"] == ["logits"]
    assert meta["torch"] == torch.__version__ and meta["sampan"] == sampan.__version__
    assert len(meta["artifacts"]["pt2"]["sha256"]) == 64
    assert meta["artifacts"]["pt2"]["check"]["max_abs_diff"] < 1e-5


def test_wrong_rank_and_dtype_name_the_input(exported_lenet):
    _, prefix = exported_lenet
    loaded = sampan.jit.load(prefix)
    with pytest.raises(ValueError, match=r"input 'image' has rank 3 .* expects rank 4"):
        loaded(torch.randn(2, 28, 28))
    with pytest.raises(ValueError, match=r"input 'image' has dtype float64 but its InputSpec expects float32"):
        loaded(torch.randn(2, 1, 28, 28, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"Expected 1 input\(s\) \(image \[None, 1, 28, 28\] float32\)"):
        loaded(torch.randn(2, 1, 28, 28), torch.randn(2))


def test_a_batch_dimension_exported_static_rejects_other_batches(tmp_path):
    net = lenet()
    sampan.jit.save(net, tmp_path / "fixed", input_spec=[InputSpec([4, 1, 28, 28], name="image")])
    loaded = sampan.jit.load(tmp_path / "fixed.pt2")
    torch.testing.assert_close(loaded(torch.ones(4, 1, 28, 28)), net(torch.ones(4, 1, 28, 28)))
    with pytest.raises(ValueError, match=r"dimension 0 must be 4.*mark the dimension dynamic with None"):
        loaded(torch.ones(2, 1, 28, 28))


def test_missing_file_says_how_to_export(tmp_path):
    with pytest.raises(MissingModelError, match=r"No exported model at .*nothing.*sampan.jit.save") as info:
        sampan.jit.load(tmp_path / "nothing")
    assert isinstance(info.value, FileNotFoundError)


def _copy_export(exported_lenet, tmp_path):
    _, prefix = exported_lenet
    for suffix in (".pt2", ".meta.json"):
        (tmp_path / f"copy{suffix}").write_bytes(prefix.with_name(f"lenet{suffix}").read_bytes())
    meta = json.loads((tmp_path / "copy.meta.json").read_text())
    meta["artifacts"] = {"pt2": {**meta["artifacts"]["pt2"], "file": "copy.pt2"}}
    (tmp_path / "copy.meta.json").write_text(json.dumps(meta))
    return tmp_path / "copy", meta


def test_corrupt_pt2_is_caught_by_its_checksum(exported_lenet, tmp_path):
    prefix, _ = _copy_export(exported_lenet, tmp_path)
    data = bytearray(prefix.with_suffix(".pt2").read_bytes())
    data[len(data) // 2] ^= 0xFF
    prefix.with_suffix(".pt2").write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"copy.pt2' is corrupt or was modified after export"):
        sampan.jit.load(prefix)


def test_torch_version_mismatch_is_refused(exported_lenet, tmp_path):
    prefix, meta = _copy_export(exported_lenet, tmp_path)
    meta["torch"] = "2.9.0"
    (tmp_path / "copy.meta.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=r"exported with torch 2.9.0 but this is torch"):
        sampan.jit.load(prefix)


def test_unknown_metadata_version_and_garbage_metadata(exported_lenet, tmp_path):
    prefix, meta = _copy_export(exported_lenet, tmp_path)
    (tmp_path / "copy.meta.json").write_text(json.dumps({**meta, "format_version": 99}))
    with pytest.raises(CheckpointError, match=r"format_version 99; this Sampan .* reads format_version 1"):
        sampan.jit.load(prefix)
    (tmp_path / "copy.meta.json").write_text("{not json")
    with pytest.raises(CheckpointError, match=r"copy.meta.json' is corrupt"):
        sampan.jit.load(prefix)


def test_save_needs_an_input_spec_and_a_known_format(tmp_path):
    with pytest.raises(ValueError, match=r"Expected `input_spec` to be a list of sampan.InputSpec"):
        sampan.jit.save(lenet(), tmp_path / "x")
    with pytest.raises(ValueError, match=r"Expected `format` to be 'pt2' or 'aoti'"):
        sampan.jit.save(lenet(), tmp_path / "x", input_spec=[IMAGE], format="onnx")
    with pytest.raises(ValueError, match=r"example 'image' has shape"):
        sampan.jit.save(lenet(), tmp_path / "x", input_spec=[IMAGE], examples=[torch.randn(2, 1, 32, 32)])


def test_save_fails_when_the_export_disagrees_with_eager(tmp_path):
    spec = [InputSpec([None, 4], name="x")]
    with pytest.raises(ExportMismatchError, match=r"exported pt2 model disagrees with eager by up to 1"):
        sampan.jit.save(ExportsDifferently(), tmp_path / "bad", input_spec=spec)


def test_save_a_model_that_cannot_be_one_graph_explains(tmp_path):
    from sampan.text import BiGRU

    with pytest.raises(SampanError, match=r"torch.export could not capture BiGRU.*\n.*HINT"):
        sampan.jit.save(BiGRU(30, 2, embed_dim=8, hidden_size=8), tmp_path / "gru",
                        input_spec=[InputSpec([None, None], "int64", "ids")])


def test_save_a_to_static_layer_keeps_it_static(tmp_path):
    net = sampan.jit.to_static(lenet(), backend="aot_eager")
    sampan.jit.save(net, tmp_path / "s", input_spec=[IMAGE])
    assert isinstance(net.forward, sampan.jit.StaticFunction)
    x = torch.randn(3, 1, 28, 28)
    torch.testing.assert_close(sampan.jit.load(tmp_path / "s")(x), net.forward.original(x))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_saving_a_gpu_model_for_the_cpu_leaves_it_on_the_gpu(tmp_path):
    """Module.to moves in place: a model still in training on the GPU must not land on the CPU by being saved."""
    net = lenet().cuda()
    sampan.jit.save(net, tmp_path / "m", input_spec=[IMAGE])  # pt2 for the CPU
    assert all(p.device.type == "cuda" for p in net.parameters())
    assert sampan.jit.load(tmp_path / "m")(torch.randn(2, 1, 28, 28)).shape == (2, 10)
