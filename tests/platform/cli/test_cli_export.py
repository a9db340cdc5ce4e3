"""`sampan export CHECKPOINT --format ... --input-spec ...`."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import sampan
from sampan.cli import main
from sampan.cli.export import parse_input_spec


def _lenet():
    from sampan.vision.models import LeNet

    torch.manual_seed(0)
    return LeNet().eval()


def test_parse_input_spec():
    spec = parse_input_spec("image:float32:None,1,28,28")
    assert spec == sampan.InputSpec([None, 1, 28, 28], "float32", "image")
    assert parse_input_spec("ids:int64:[-1, ?]").shape == (None, None)
    with pytest.raises(ValueError, match=r"Expected `--input-spec` to be NAME:DTYPE:SHAPE"):
        parse_input_spec("image:float32")


def test_export_a_state_dict_to_pt2_then_the_pt2_to_onnx(tmp_path, capsys):
    net = _lenet()
    torch.save(net.state_dict(), tmp_path / "lenet.pt")
    code = main(["export", str(tmp_path / "lenet.pt"), "--format", "pt2", "--network", "sampan.vision.models:LeNet",
                 "--input-spec", "image:float32:None,1,28,28", "--output-name", "logits"])
    assert code == 0 and "lenet.pt2" in capsys.readouterr().out
    x = torch.randn(3, 1, 28, 28)
    torch.testing.assert_close(sampan.jit.load(tmp_path / "lenet")(x), net(x))

    code = main(["export", str(tmp_path / "lenet.pt2"), "--format", "onnx"])
    assert code == 0
    config = sampan.inference.Config(tmp_path / "lenet")
    config.set_backend("onnxruntime")
    (got,) = sampan.inference.create_predictor(config).run([x.numpy()])
    np.testing.assert_allclose(got, net(x).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_export_errors_exit_1_with_a_message(tmp_path, capsys):
    assert main(["export", str(tmp_path / "missing.pt"), "--network", "sampan.vision.models:LeNet",
                 "--input-spec", "image:float32:None,1,28,28"]) == 1
    assert "missing.pt" in capsys.readouterr().err
    # a missing file comes first, before the arguments that would matter once it is found; a folder is a folder
    assert main(["export", str(tmp_path / "missing.pt"), "--network", "sampan.vision.models:LeNet"]) == 1
    err = capsys.readouterr().err
    assert "missing.pt', a path that does not exist" in err and "--input-spec" not in err
    (tmp_path / "folder.pt").mkdir()
    assert main(["export", str(tmp_path / "folder.pt"), "--network", "sampan.vision.models:LeNet",
                 "--input-spec", "image:float32:None,1,28,28"]) == 1
    assert "folder.pt', a folder, not a file" in capsys.readouterr().err
    torch.save(_lenet().state_dict(), tmp_path / "w.pt")
    assert main(["export", str(tmp_path / "w.pt"), "--input-spec", "image:float32:None,1,28,28"]) == 1
    assert "--network" in capsys.readouterr().err


def test_an_output_naming_a_folder_is_refused_and_nothing_is_written_beside_it(tmp_path, capsys):
    """``--output models/`` once wrote models.pt2 and models.meta.json beside the folder, over any model there."""
    torch.save(_lenet().state_dict(), tmp_path / "w.pt")
    (tmp_path / "models").mkdir()
    for output in (f"{tmp_path / 'models'}/", f"{tmp_path / 'models'}/."):
        assert main(["export", str(tmp_path / "w.pt"), "--network", "sampan.vision.models:LeNet",
                     "--input-spec", "image:float32:None,1,28,28", "--output", output]) == 1
        err = capsys.readouterr().err
        assert f"Expected `--output` to be a file prefix, not a folder. Received: --output={output!r}" in err
        assert "HINT: name the files inside it, e.g. --output " in err
    spec = [sampan.InputSpec([None, 1, 28, 28], "float32", "image")]
    for write in (sampan.jit.save, sampan.onnx.export):
        with pytest.raises(ValueError, match=r"Expected `path` to be a file prefix, not a folder.*models/model"):
            write(_lenet(), f"{tmp_path / 'models'}/", input_spec=spec)
    with pytest.raises(ValueError, match=r"Expected `path` to be a file prefix, not a folder"):
        sampan.jit.load(f"{tmp_path / 'models'}/")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["models", "w.pt"]


def test_a_checkpoint_of_another_network_and_a_missing_spec_are_explained(tmp_path, capsys):
    torch.save(_lenet().state_dict(), tmp_path / "w.pt")
    assert main(["export", str(tmp_path / "w.pt"), "--network", "torch.nn:Identity",
                 "--input-spec", "image:float32:None,1,28,28"]) == 1
    err = capsys.readouterr().err
    assert "belongs to another network" in err and "not in this network (10)" in err
    assert "--network torch.nn:Identity (Identity) does not fit it. HINT: pass the --network" in err
    assert "Traceback" not in err and "skip_mismatch" not in err  # CLI words, not the Python API's
    assert main(["export", str(tmp_path / "w.pt"), "--network", "sampan.vision.models:LeNet"]) == 1
    err = capsys.readouterr().err
    assert "Expected `--input-spec` to be given once per input" in err
    assert "HINT: add --input-spec NAME:DTYPE:SHAPE, e.g. --input-spec image:float32:None,1,28,28" in err
    assert "input_spec=[sampan.InputSpec" not in err


def test_a_pt2_exported_with_large_images_converts_at_its_sizes(tmp_path):
    """[None, 1, None, None] on a CNN that needs 14 pixels or more: the .pt2 -> ONNX conversion traces and checks
    at the sizes the .pt2 was exported with, not the default 8."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 5), torch.nn.MaxPool2d(2), torch.nn.Conv2d(2, 2, 5),
                              torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()).eval()
    spec = [sampan.InputSpec([None, 1, None, None], "float32", "image")]
    sampan.jit.save(net, tmp_path / "cnn", input_spec=spec, examples=[torch.randn(2, 1, 20, 20)])
    assert main(["export", str(tmp_path / "cnn.pt2"), "--format", "onnx"]) == 0
    config = sampan.inference.Config(tmp_path / "cnn.onnx")
    x = torch.randn(3, 1, 30, 25)
    np.testing.assert_allclose(sampan.inference.create_predictor(config).run([x.numpy()])[0],
                               net(x).detach().numpy(), rtol=1e-4, atol=1e-5)
