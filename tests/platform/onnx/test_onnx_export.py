"""sampan.onnx.export: dynamo export with dynamic axes, checked in ONNX Runtime against eager."""
from __future__ import annotations

import json
import os

import numpy as np
import onnxruntime as ort
import pytest
import torch
from onnx_helpers import ExportsDifferently, lenet

import sampan
from sampan import InputSpec
from sampan.jit import ExportMismatchError

IMAGE = InputSpec([None, 1, 28, 28], "float32", "image")


@pytest.fixture(scope="module")
def onnx_lenet(tmp_path_factory):
    net = lenet()
    path = sampan.onnx.export(net, tmp_path_factory.mktemp("onnx") / "lenet.onnx", input_spec=[IMAGE],
                              output_names=["logits"])
    return net, path


def test_onnx_runtime_matches_eager_at_other_batch_sizes(onnx_lenet):
    net, path = onnx_lenet
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (inp,) = session.get_inputs()
    assert inp.name == "image" and inp.shape[1:] == [1, 28, 28] and isinstance(inp.shape[0], str)
    assert [o.name for o in session.get_outputs()] == ["logits"]
    for batch in (1, 6, 40):
        x = torch.randn(batch, 1, 28, 28)
        (got,) = session.run(None, {"image": x.numpy()})
        np.testing.assert_allclose(got, net(x).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_export_writes_one_file_and_records_the_check(onnx_lenet):
    _, path = onnx_lenet
    assert path.suffix == ".onnx" and not path.with_name("lenet.onnx.data").exists()
    meta = json.loads(path.with_name("lenet.meta.json").read_text())
    assert meta["artifacts"]["onnx"]["check"]["max_abs_diff"] < 1e-4
    assert meta["outputs"] == ["logits"]


def test_a_disagreeing_onnx_file_fails_the_export(tmp_path):
    with pytest.raises(ExportMismatchError, match=r"exported onnx model disagrees with eager by up to 1") as info:
        sampan.onnx.export(ExportsDifferently(), tmp_path / "bad", input_spec=[InputSpec([None, 4], name="x")])
    assert info.value.format == "onnx" and info.value.max_abs_diff == pytest.approx(1.0, abs=1e-5)


def test_export_needs_an_input_spec(tmp_path):
    with pytest.raises(ValueError, match=r"Expected `input_spec` to be a list of sampan.InputSpec"):
        sampan.onnx.export(lenet(), tmp_path / "x")


class _Two(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        y = self.linear(x)
        return y, y.softmax(-1)


def test_output_names_must_name_every_output(tmp_path):
    spec = [InputSpec([None, 4], "float32", "x")]
    with pytest.raises(ValueError, match=r"Expected `output_names` to be 2 name\(s\), one per output. "
                                         r"Received: output_names=\['logits'\]"):
        sampan.onnx.export(_Two().eval(), tmp_path / "two", input_spec=spec, output_names=["logits"])
    assert not (tmp_path / "two.onnx").exists()


class _Decorated(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    @sampan.jit.to_static(input_spec=[InputSpec([None, 4], "float32", "x")], backend="eager")
    def forward(self, x):
        return self.linear(x)


def test_export_a_to_static_layer_with_its_spec_and_a_lone_example(tmp_path):
    """@to_static on forward (Paddle's idiom), and to_static(layer): exported from the Python forward with the
    input_spec given there; examples may be one tensor, of one row."""
    torch.manual_seed(0)
    converted = sampan.jit.to_static(torch.nn.Linear(4, 2).eval(), input_spec=[InputSpec([None, 4], name="x")],
                                     backend="eager")
    for name, net in (("decorated", _Decorated().eval()), ("converted", converted)):
        path = sampan.onnx.export(net, tmp_path / name, examples=torch.randn(1, 4))
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        x = torch.randn(5, 4)
        (got,) = session.run(None, {"x": x.numpy()})
        np.testing.assert_allclose(got, net(x).detach().numpy(), rtol=1e-5, atol=1e-5)
        assert json.loads(path.with_name(f"{name}.meta.json").read_text())["example_shapes"] == [[2, 4]]


def test_torchlibs_registry_is_built_once_and_each_export_gets_its_own_copy(tmp_path, monkeypatch):
    """torch.onnx.export builds its registry of torchlib's ONNX functions on every call (half the CPU of a LeNet
    export); sampan.onnx.export builds it once per process and hands each export a copy."""
    import importlib

    from torch.onnx._internal.exporter import _core, _registration

    onnx_export = importlib.import_module("sampan.onnx.export")  # the module: sampan.onnx.export is its function

    net = lenet()
    sampan.onnx.export(net, tmp_path / "first", input_spec=[IMAGE])  # the first export in a process registers ops
    registry_class = _registration.ONNXRegistry
    build = registry_class.__dict__["from_torchlib"]
    built, handed = [], []

    def counting(cls, *args, **kwargs):
        registry = build.__func__(cls, *args, **kwargs)
        built.append(registry)
        return registry

    monkeypatch.setattr(registry_class, "from_torchlib", classmethod(counting))
    monkeypatch.setattr(onnx_export, "_TORCHLIB", {})
    real_export = _core.export

    def spying_export(*args, registry=None, **kwargs):  # the registry torch's exporter is given
        handed.append(registry)
        return real_export(*args, registry=registry, **kwargs)

    monkeypatch.setattr(_core, "export", spying_export)
    x = torch.randn(3, 1, 28, 28)
    for name in ("a", "b", "c"):
        path = sampan.onnx.export(net, tmp_path / name, input_spec=[IMAGE])
        (got,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"image": x.numpy()})
        np.testing.assert_allclose(got, net(x).detach().numpy(), rtol=1e-4, atol=1e-5)
    assert len(built) == 1 and len(handed) == 3  # three exports, one registry built
    first, second = handed[0], handed[1]
    assert first is not second and first.functions is not second.functions
    assert first.functions.keys() == built[0].functions.keys() and first.opset_version == built[0].opset_version
    target = next(iter(first.functions))
    first.functions[target].clear()  # what one export does to its registry never reaches the next one
    assert second.functions[target] and next(iter(onnx_export._TORCHLIB.values())).functions[target]
    # outside sampan's export, torch's own from_torchlib is back: a plain torch.onnx.export builds its own
    assert registry_class.__dict__["from_torchlib"].__func__ is counting
    assert registry_class.from_torchlib() is built[-1] and len(built) == 2


def test_exports_in_two_threads_take_turns_swapping_torchs_registry_builder():
    """Two exports at once in threads: the second would save the first's replacement as torch's own builder and
    put it back for good; it waits instead."""
    import importlib
    import threading

    from torch.onnx._internal.exporter import _registration

    onnx_export = importlib.import_module("sampan.onnx.export")
    registry_class = _registration.ONNXRegistry
    own = registry_class.__dict__["from_torchlib"]
    entered, seen = threading.Event(), []

    def second():
        with onnx_export._torchlib_registry_once():
            seen.append(registry_class.__dict__["from_torchlib"])
            entered.set()

    with onnx_export._torchlib_registry_once():
        thread = threading.Thread(target=second)
        thread.start()
        assert not entered.wait(0.5)  # it waits while this one has torch's builder swapped
    thread.join(30)
    assert entered.is_set() and seen[0] is not own  # then it swaps it in turn
    assert registry_class.__dict__["from_torchlib"] is own  # and torch's own is back


QUANTIZED_AFTER_FLOAT = """
import sys, torch, sampan
from torch import nn
from sampan.quantization import PTQ, QuantConfig, export_onnx

spec = [sampan.InputSpec([None, 8], name="x")]
net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).eval()
assert not hasattr(torch.ops.quantized_decomposed, "dequantize_per_channel")  # torch has no quantized ops yet
sampan.onnx.export(net, sys.argv[1] + "/float", input_spec=spec)  # the registry is built without them
ptq = PTQ(QuantConfig())
observed = ptq.quantize(net, torch.randn(2, 8))
ptq.calibrate(observed, [(torch.randn(16, 8), torch.zeros(16))])
export_onnx(ptq.convert(observed), sys.argv[1] + "/int8", spec, layout="qdq")
print("exported")
"""


def test_ops_torch_gains_after_an_export_reach_the_next_exports_registry(tmp_path):
    """The quantized ops appear when torch.ao.quantization is imported: a registry built before that has no ONNX
    functions for them, so an int8 export after a float one in the same process needs a registry built again
    (a fresh interpreter: in this one they exist already)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", QUANTIZED_AFTER_FLOAT, str(tmp_path)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0 and done.stdout.strip().endswith("exported"), done.stderr[-3000:]
    assert (tmp_path / "float.onnx").is_file() and (tmp_path / "int8.onnx").is_file()


class _Block(torch.nn.Module):
    """Conv, then in-place hard activations (MobileNetV3's); ``reuse`` adds the input back after the activation
    overwrote it, so in place and out of place compute different things."""

    def __init__(self, reuse: bool = False):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.swish, self.sigmoid = torch.nn.Hardswish(inplace=True), torch.nn.Hardsigmoid(inplace=True)
        self.reuse = reuse

    def forward(self, x):
        y = self.conv(x)
        z = self.sigmoid(self.swish(y))
        return z + y if self.reuse else z


SMALL = InputSpec([None, 3, 8, 8], "float32", "x")


@pytest.fixture
def exported_flags(monkeypatch):
    """The (swish, sigmoid) inplace flags of each network torch.onnx.export is given, in order."""
    seen, export = [], torch.onnx.export

    def recording(layer, *args, **kwargs):
        seen.append((layer.swish.inplace, layer.sigmoid.inplace))
        return export(layer, *args, **kwargs)

    monkeypatch.setattr(torch.onnx, "export", recording)
    return seen


def test_in_place_hard_activations_are_exported_out_of_place_and_put_back(tmp_path, exported_flags):
    """torch.onnx.export decomposes hardswish_ / hardsigmoid_ slowly (MobileNetV3 takes twice as long): the export
    traces them out of place, then checks against the network as it is, in place."""
    import onnx

    torch.manual_seed(0)
    net = _Block().eval()
    path = sampan.onnx.export(net, tmp_path / "block", input_spec=[SMALL])
    assert exported_flags == [(False, False)]
    assert net.swish.inplace is True and net.sigmoid.inplace is True  # put back
    assert {"HardSwish", "HardSigmoid"} <= {n.op_type for n in onnx.load(path).graph.node}
    x = torch.randn(5, 3, 8, 8)
    (got,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})
    np.testing.assert_allclose(got, net(x.clone()).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_a_network_that_reads_an_overwritten_input_is_exported_in_place(tmp_path, exported_flags):
    torch.manual_seed(0)
    net = _Block(reuse=True).eval()
    path = sampan.onnx.export(net, tmp_path / "reuse", input_spec=[SMALL])
    assert exported_flags == [(False, False), (True, True)]  # out of place disagreed with eager: again, in place
    assert net.swish.inplace is True and net.sigmoid.inplace is True
    x = torch.randn(5, 3, 8, 8)
    (got,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})
    np.testing.assert_allclose(got, net(x.clone()).detach().numpy(), rtol=1e-5, atol=1e-6)
    out_of_place = torch.nn.Hardsigmoid()(torch.nn.Hardswish()(net.conv(x))) + net.conv(x)
    assert not torch.allclose(torch.from_numpy(got), out_of_place.detach(), atol=1e-3)  # the control


def test_the_flags_are_put_back_when_the_export_fails_and_left_alone_without_the_check(tmp_path, monkeypatch):
    from sampan.errors import SampanError

    seen = []

    def broken(layer, *args, **kwargs):
        seen.append(layer.swish.inplace)
        raise RuntimeError("exporter broke")

    monkeypatch.setattr(torch.onnx, "export", broken)
    net = _Block().eval()
    with pytest.raises(SampanError, match="exporter broke"):
        sampan.onnx.export(net, tmp_path / "broken", input_spec=[SMALL])
    assert net.swish.inplace is True and net.sigmoid.inplace is True
    with pytest.raises(SampanError, match="exporter broke"):  # nothing would tell a difference: exported as it is
        sampan.onnx.export(net, tmp_path / "broken", input_spec=[SMALL], verify=False)
    assert seen == [False, True]
