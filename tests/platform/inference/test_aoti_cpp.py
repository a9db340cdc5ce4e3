"""AOTInductor: jit.save(format="aoti"), jit.load, the predictor backend, and the C++ example."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import sampan
from sampan.inference import Config, create_predictor

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[3]
IMAGE = sampan.InputSpec([None, 1, 28, 28], "float32", "image")


@pytest.fixture(scope="module")
def aoti_lenet(tmp_path_factory):
    from sampan.vision.models import LeNet

    torch.manual_seed(0)
    net = LeNet().eval()
    prefix = tmp_path_factory.mktemp("aoti") / "lenet"
    path = sampan.jit.save(net, prefix, input_spec=[IMAGE], format="aoti", output_names=["logits"])
    sampan.jit.save(net, prefix, input_spec=[IMAGE], output_names=["logits"])
    sampan.onnx.export(net, prefix, input_spec=[IMAGE], output_names=["logits"])
    return net, prefix, path


def test_aoti_package_matches_eager_at_other_batch_sizes(aoti_lenet):
    net, prefix, path = aoti_lenet
    assert path.name == "lenet.aoti.pt2"
    loaded = sampan.jit.load(path)
    assert loaded.format == "aoti"
    with torch.no_grad():
        for batch in (1, 6, 31):
            x = torch.randn(batch, 1, 28, 28)
            torch.testing.assert_close(loaded(x), net(x), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match=r"input 'image' has dtype float64"):
        loaded(torch.zeros(2, 1, 28, 28, dtype=torch.float64))


def test_predictor_on_the_aoti_backend_and_auto_over_three(aoti_lenet):
    net, prefix, _ = aoti_lenet
    config = Config(prefix)
    config.set_backend("aoti")
    x = np.random.default_rng(0).standard_normal((5, 1, 28, 28)).astype("float32")
    expected = net(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(create_predictor(config).run([x])[0], expected, rtol=1e-4, atol=1e-5)
    config.set_backend("auto")
    predictor = create_predictor(config)
    assert set(predictor.timings) == {"pt2", "aoti", "onnxruntime"}
    np.testing.assert_allclose(predictor.run([x])[0], expected, rtol=1e-4, atol=1e-5)


def _built_example(cache_dir: Path) -> Path:
    """Builds examples/cpp_inference once per source and torch version (cached by pytest between runs), or takes
    the serving lesson's build of the same source in this test run, once one of that lesson's runs has finished
    (the lesson builds it into its work folder under the same key; a finished run means a finished build)."""
    source = REPO / "examples/cpp_inference"
    key = hashlib.sha256((source / "predict.cpp").read_bytes() + (source / "build.sh").read_bytes()
                         + torch.__version__.encode() + sys.executable.encode()).hexdigest()
    lessons = Path(os.environ.get("SAMPAN_TEST_LESSONS_DIR", "/nonexistent")) / "serving"  # tests/notebooks
    lesson_exe = lessons / "data" / "lessons" / "serving" / f"predict-{key[:12]}"
    if lesson_exe.is_file() and any(lessons.glob("*/records.json")):
        return lesson_exe
    exe = cache_dir / f"predict-{key[:16]}"
    if not exe.exists():
        subprocess.run(["bash", str(source / "build.sh"), str(exe), sys.executable],
                       check=True, capture_output=True, text=True, timeout=600)
    return exe


def test_cpp_example_prints_the_same_predictions_as_python(aoti_lenet, tmp_path, request):
    net, _, path = aoti_lenet
    cache = getattr(request.config, "cache", None)  # absent under `-p no:cacheprovider`: build in this run's tmp
    exe = _built_example(Path(cache.mkdir("sampan-cpp-inference")) if cache is not None else tmp_path)
    x = torch.randn(4, 1, 28, 28, generator=torch.Generator().manual_seed(1))
    x.numpy().tofile(tmp_path / "x.f32")
    result = subprocess.run([str(exe), str(path), str(tmp_path / "x.f32"), "4", "1", "28", "28"],
                            check=True, capture_output=True, text=True, timeout=120)
    rows = [line.split() for line in result.stdout.strip().splitlines()]
    expected = net(x).detach()
    assert len(rows) == 4
    for i, row in enumerate(rows):
        assert row[:2] == ["row", str(i)] and int(row[3]) == int(expected[i].argmax())
        np.testing.assert_allclose(np.array(row[5:], dtype=np.float32), expected[i].numpy(), rtol=1e-4, atol=1e-5)
