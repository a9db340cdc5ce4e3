"""Parity on real networks: eager vs to_static vs jit.load vs ONNX Runtime, at batch sizes not exported.

resnet18 compiles with inductor (once); mobilenet_v3_small and TextCNN use the
``aot_eager`` backend for to_static to keep the suite within minutes on 2 cores
(same dynamo capture and dynamic dims; inductor codegen is covered by LeNet and resnet18).
resnet18 compiles without the Winograd rewrite: on AVX-512 CPUs ``winograd="auto"`` would compile and time an F(4x4)
graph at each new batch size (7 CPU-s here), which tests/platform/jit/test_winograd.py covers on its own.
"""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch

import sampan
from sampan import InputSpec

pytestmark = pytest.mark.slow


def _vision(name):
    from sampan.vision import models

    torch.manual_seed(0)
    return getattr(models, name)(num_classes=10).eval()


def _textcnn():
    from sampan.text import TextCNN

    torch.manual_seed(0)
    return TextCNN(100, 3, embed_dim=32, num_filters=16).eval()


CASES = {
    "resnet18": (lambda: _vision("resnet18"), InputSpec([None, 3, 64, 64], "float32", "image"), "inductor",
                 lambda b: torch.randn(b, 3, 64, 64)),
    "mobilenet_v3_small": (lambda: _vision("mobilenet_v3_small"), InputSpec([None, 3, 64, 64], "float32", "image"),
                           "aot_eager", lambda b: torch.randn(b, 3, 64, 64)),
    "textcnn": (_textcnn, InputSpec([None, None], "int64", "ids"), "aot_eager",
                lambda b: torch.randint(1, 100, (b, 9 + b))),
}


@pytest.mark.parametrize("name", list(CASES))
def test_eager_static_loaded_and_onnxruntime_agree(name, tmp_path):
    build, spec, backend, make = CASES[name]
    eager, static = build(), build()
    static = sampan.jit.to_static(static, input_spec=[spec], backend=backend, winograd=False)
    prefix = tmp_path / name
    sampan.jit.save(eager, prefix, input_spec=[spec])
    sampan.onnx.export(eager, prefix, input_spec=[spec])
    loaded = sampan.jit.load(prefix)
    session = ort.InferenceSession(f"{prefix}.onnx", providers=["CPUExecutionProvider"])
    with torch.no_grad():
        for batch in (3, 5):  # exported with batch 2
            x = make(batch)
            expected = eager(x)
            torch.testing.assert_close(static(x), expected, rtol=1e-3, atol=1e-4)
            torch.testing.assert_close(loaded(x), expected, rtol=1e-4, atol=1e-4)
            (got,) = session.run(None, {spec.name: x.numpy()})
            np.testing.assert_allclose(got, expected.numpy(), rtol=1e-3, atol=1e-4)
    assert static.forward.status == "compiled" and static.forward.verified is True


def test_bigru_with_packed_sequences_falls_back_to_eager_with_the_reason():
    from sampan.text import BiGRU

    torch.manual_seed(0)
    net = BiGRU(50, 2, embed_dim=16, hidden_size=8).eval()
    expected = net(torch.tensor([[3, 4, 0], [5, 0, 0]]))
    sampan.jit.to_static(net, input_spec=[InputSpec([None, None], "int64", "ids")], backend="aot_eager")
    with pytest.warns(RuntimeWarning, match=r"(?s)could not compile BiGRU.forward.*pack_padded_sequence"):
        out = net(torch.tensor([[3, 4, 0], [5, 0, 0]]))
    torch.testing.assert_close(out, expected)
    assert net.forward.status == "eager"
