"""What the predictor's compiled candidates share (``sampan.inference._pt2_candidate``)."""
from __future__ import annotations

import torch
from torch import nn

from sampan import InputSpec
from sampan.inference._pt2_candidate import compile_frozen


def _candidate(net: nn.Module):
    def forward(*args):  # one source for every predictor, as in inference.bf16 and inference.winograd
        return [net(*args)]

    return forward


def test_every_compiled_candidate_keeps_graphs_of_its_own_past_the_recompile_limit():
    """A process that creates several predictors compiles the same ``forward`` source again and again; Dynamo
    keeps at most ``recompile_limit`` graphs per code object, so with one shared code object the third
    predictor here (two graphs each: batch 1 and larger batches) would fail with ``fullgraph=True``."""
    specs = [InputSpec([None, 4], name="x")]
    torch._dynamo.reset()
    with torch._dynamo.config.patch(recompile_limit=2), torch.no_grad():
        for seed in range(4):
            torch.manual_seed(seed)
            net = nn.Linear(4, 3).eval()
            run = compile_frozen(_candidate(net), specs, "eager")
            for batch in (1, 3):
                x = torch.randn(batch, 4)
                torch.testing.assert_close(run(x)[0], net(x))


def test_a_config_naming_another_file_than_the_pt2_refuses_the_compiled_candidates(tmp_path):
    from sampan.inference import Config
    from sampan.inference._pt2_candidate import refusal

    exported = {"pt2": {}, "onnx": {}}
    assert "Config names the onnx file" in refusal(Config(tmp_path / "m.onnx"), exported, considered="c", on_gpu="g")
    assert refusal(Config(tmp_path / "m.pt2"), exported, considered="c", on_gpu="g") is None
    assert refusal(Config(tmp_path / "m"), exported, considered="c", on_gpu="g") is None
