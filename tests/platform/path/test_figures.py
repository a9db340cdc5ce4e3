"""notebooks/figures/make_figures.py: the concept pictures are drawn by code, valid, non-trivial and deterministic.

The script is run as a learner or author would run it (a subprocess), into a temporary folder; the committed
PNGs must be exactly the set it writes. The two computations the pictures show that are not a torch call (the
ring all-reduce and the pipeline schedules) are checked against what they claim.
"""
from __future__ import annotations

import importlib.util
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

FIGURES = Path(__file__).resolve().parents[3] / "notebooks" / "figures"
SCRIPT = FIGURES / "make_figures.py"
EXPECTED = {"autograd_graph.png", "convolution.png", "train_eval_loop.png", "ddp_allreduce.png",
            "pipeline_schedule.png", "quantization_scale_zero_point.png"}


def _draw(out: Path, *names: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-B", str(SCRIPT), "--out", str(out), *names],
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    out = tmp_path_factory.mktemp("figures")
    done = _draw(out)
    assert done.returncode == 0, done.stderr
    return out, done


@pytest.fixture(scope="module")
def script():
    """The script as a module, imported without writing __pycache__ into notebooks/."""
    before = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        spec = importlib.util.spec_from_file_location("make_figures", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = before
    return module


def _assert_real_picture(file: Path) -> None:
    with Image.open(file) as image:
        image.verify()  # a truncated or corrupt PNG raises here
    with Image.open(file) as image:
        assert image.format == "PNG", file
        width, height = image.size
        assert width >= 800 and height >= 400, f"{file.name} is only {width}×{height}"
        pixels = np.asarray(image.convert("RGB")).reshape(-1, 3)
    inked = float((pixels.min(axis=1) < 200).mean())
    assert 0.02 < inked < 0.6, f"{file.name}: {inked:.1%} of the picture is drawn (blank or a solid block?)"
    packed = (pixels[:, 0].astype(np.uint32) << 16) | (pixels[:, 1].astype(np.uint32) << 8) | pixels[:, 2]
    colours = len(np.unique(packed))  # one integer a colour: np.unique(pixels, axis=0) took ~1 s a picture
    assert colours > 50, f"{file.name} has only {colours} colours"


def test_the_script_writes_every_picture_and_nothing_else(drawn):
    out, done = drawn
    written = {p.name for p in out.iterdir()}
    assert written == EXPECTED
    assert sorted(done.stdout.split()) == sorted(str(out / name) for name in EXPECTED)
    committed = {p.name for p in FIGURES.glob("*.png")}
    assert committed == written, "commit the PNGs the script writes (run notebooks/figures/make_figures.py)"


def test_each_drawn_picture_is_a_real_png(drawn):
    for name in sorted(EXPECTED):
        _assert_real_picture(drawn[0] / name)


def test_each_committed_picture_is_a_real_png():
    for name in sorted(EXPECTED):
        _assert_real_picture(FIGURES / name)


def test_drawing_is_deterministic(drawn, tmp_path):
    again = _draw(tmp_path, "convolution.png", "pipeline_schedule.png")
    assert again.returncode == 0, again.stderr
    for name in ("convolution.png", "pipeline_schedule.png"):
        assert (tmp_path / name).read_bytes() == (drawn[0] / name).read_bytes(), name


def test_an_unknown_picture_is_refused_with_the_known_names(tmp_path):
    done = _draw(tmp_path, "convolutoin.png")
    assert done.returncode == 2
    assert "Received: names=['convolutoin.png']" in done.stderr and "convolution.png" in done.stderr
    assert "HINT" in done.stderr and not list(tmp_path.iterdir())


@pytest.mark.parametrize("ranks", [2, 3, 4, 5])
def test_the_simulated_ring_all_reduce_gives_every_rank_the_mean(script, ranks):
    rng = random.Random(ranks)
    grads = [[rng.uniform(-1, 1) for _ in range(7)] for _ in range(ranks)]
    result, steps = script.ring_allreduce(grads)
    mean = [sum(column) / ranks for column in zip(*grads)]
    assert steps == 2 * (ranks - 1)
    for row in result:
        assert row == pytest.approx(mean)


@pytest.mark.parametrize("stages,micro", [(2, 4), (3, 6), (4, 4)])
def test_pipeline_schedules_have_the_textbook_bubble_and_1f1b_holds_fewer_activations(script, stages, micro):
    gpipe = script.schedule(script._gpipe(stages, micro))
    one_f_one_b = script.schedule(script._one_f_one_b(stages, micro))
    for start in (gpipe, one_f_one_b):
        total = max(t for ops in start for t in ops.values()) + 1
        idle = sum(total - len(ops) for ops in start)
        assert idle / (stages * total) == pytest.approx(2 * (stages - 1) / (2 * (micro + stages - 1)))
        for ops in start:  # a stage never runs two things at once
            assert len(set(ops.values())) == len(ops) == 2 * micro
    assert script._in_flight(gpipe[0]) == micro
    assert script._in_flight(one_f_one_b[0]) == min(stages, micro)
