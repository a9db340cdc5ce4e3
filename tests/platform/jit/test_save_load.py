"""sampan.jit.save / load: torch.export programs with specs, checksums and clear errors."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from jit_helpers import IMAGE, ExportsDifferently, lenet
from torch import nn

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


@pytest.mark.parametrize("artifacts", [["pt2"], {"pt2": "copy.pt2"}, {"aoti": {"file": "copy.aoti.pt2", "device": 5}}],
                         ids=["a-list", "a-bare-name", "a-numeric-device"])
def test_a_malformed_artifacts_table_is_called_corrupt(exported_lenet, tmp_path, artifacts):
    from sampan.inference import Config, create_predictor

    prefix, meta = _copy_export(exported_lenet, tmp_path)
    (tmp_path / "copy.meta.json").write_text(json.dumps({**meta, "artifacts": artifacts}))
    for opening in (sampan.jit.load, lambda p: create_predictor(Config(str(p)))):  # not an AttributeError inside
        with pytest.raises(CheckpointError, match=r"copy.meta.json' is corrupt .*'artifacts' must map each format"):
            opening(prefix)


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


class _DecoratedForward(nn.Module):
    """Paddle's idiom: @to_static on forward, with the input spec given there."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)

    @sampan.jit.to_static(input_spec=[InputSpec([None, 4], "float32", "x")], backend="aot_eager")
    def forward(self, x):
        return torch.tanh(self.linear(x))


def test_a_layer_with_to_static_on_its_class_forward_exports_with_that_spec(tmp_path):
    torch.manual_seed(0)
    net = _DecoratedForward().eval()
    x = torch.randn(3, 4)
    with torch.no_grad():
        expected = net(x)  # compiled (the instance's own StaticFunction, with the decorator's options)
    file = sampan.jit.save(net, tmp_path / "dec")  # no input_spec: the decorator's, as paddle.jit.save does
    loaded = sampan.jit.load(file)
    assert loaded.input_spec == [InputSpec([None, 4], "float32", "x")]
    torch.testing.assert_close(loaded(x), expected)
    own = net.__dict__["forward"]  # the instance's own static forward (made at its first call), back after save
    assert isinstance(own, sampan.jit.StaticFunction) and own.layer is net and own.status == "compiled"
    assert isinstance(type(net).__dict__["forward"], sampan.jit.StaticFunction)
    report = sampan.jit.explain(net, x)
    assert report.ok and report.graph_count == 1


def test_save_reuses_the_input_spec_given_to_to_static(tmp_path):
    spec = [InputSpec([None, 4], "float32", "x")]
    net = sampan.jit.to_static(nn.Sequential(nn.Linear(4, 2)).eval(), input_spec=spec, backend="eager")
    loaded = sampan.jit.load(sampan.jit.save(net, tmp_path / "s"))
    assert loaded.input_spec == spec
    x = torch.randn(5, 4)
    torch.testing.assert_close(loaded(x), net.forward.original(x))


def test_a_loaded_program_takes_eval_and_train_and_serves_a_model(exported_lenet):
    net, prefix = exported_lenet
    loaded = sampan.jit.load(prefix)
    assert loaded.eval() is loaded and loaded.training is False
    x = torch.randn(4, 1, 28, 28)
    loaded.train()
    assert loaded.training is True
    torch.testing.assert_close(loaded(x), net(x))  # the exported graph is fixed: eval-mode results
    model = sampan.Model(loaded, inputs=[IMAGE])
    model.prepare(device="cpu")
    (out,) = model.predict(torch.utils.data.TensorDataset(x), batch_size=2, verbose=0)
    np.testing.assert_allclose(out, net(x).detach().numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"Expected `mode` to be a bool"):
        loaded.train("no")


def _small_cnn():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 2, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(2, 2, 5), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten()).eval()


def test_dynamic_image_sizes_are_checked_at_the_examples_sizes(tmp_path):
    """[None, 1, None, None] on a CNN that needs images of 14 or more: the default size 8 cannot work, the
    examples' can; the check (and the predictor later) must use them, not 8."""
    net, spec = _small_cnn(), [InputSpec([None, 1, None, None], "float32", "image")]
    with pytest.raises(ValueError, match=r"refused them: .*HINT: .*pass examples=\[tensor, \.\.\.\]"):
        sampan.jit.save(net, tmp_path / "cnn", input_spec=spec)
    file = sampan.jit.save(net, tmp_path / "cnn", input_spec=spec, examples=[torch.randn(2, 1, 20, 20)])
    meta = json.loads((tmp_path / "cnn.meta.json").read_text())
    assert meta["example_shapes"] == [[2, 1, 20, 20]]
    x = torch.randn(3, 1, 31, 26)
    torch.testing.assert_close(sampan.jit.load(file)(x), net(x))


def test_examples_of_one_row_or_a_lone_tensor_are_accepted(tmp_path):
    """torch.export fixes a dimension traced at size 1: a one-image example is doubled along the batch."""
    torch.manual_seed(0)
    net, spec = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).eval(), [InputSpec([None, 4], name="x")]
    for examples in ([torch.randn(1, 4)], torch.randn(3, 4)):  # a list of one row; one tensor, not a list
        loaded = sampan.jit.load(sampan.jit.save(net, tmp_path / "m", input_spec=spec, examples=examples))
        x = torch.randn(7, 4)
        torch.testing.assert_close(loaded(x), net(x))
    assert json.loads((tmp_path / "m.meta.json").read_text())["example_shapes"] == [[3, 4]]
    with pytest.raises(ValueError, match=r"Expected `examples\[0\]` .*dynamic dimension 0.*use a batch of 2 or more"):
        sampan.jit.save(net, tmp_path / "m", input_spec=spec, examples=[torch.randn(0, 4)])


class _FixesTheBatch(nn.Module):
    def forward(self, x):
        return x.reshape(2, 4) * 2


def test_a_dynamic_dimension_the_model_fixes_keeps_torchs_explanation(tmp_path):
    with pytest.raises(SampanError, match=r"(?s)HINT: a dimension marked None.*torch.export said:\n.*specialized it "
                                          r"to be a constant \(2\)"):
        sampan.jit.save(_FixesTheBatch(), tmp_path / "f", input_spec=[InputSpec([None, 4], name="x")])


def test_save_writes_through_a_temporary_file_named_like_a_pt2(tmp_path, monkeypatch):
    """torch.export.save warns about (and logs) every archive name that does not end in .pt2."""
    names, save = [], torch.export.save

    def recording(program, f, **kwargs):
        names.append(str(f))
        return save(program, f, **kwargs)

    monkeypatch.setattr(torch.export, "save", recording)
    sampan.jit.save(nn.Linear(4, 2).eval(), tmp_path / "m", input_spec=[InputSpec([None, 4], name="x")])
    assert len(names) == 1 and names[0].endswith(".pt2") and names[0] != str(tmp_path / "m.pt2")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.meta.json", "m.pt2"]  # no temporary file left
