"""Executes each course lesson in quick mode with its reference solutions and checks its recorded metrics.

Each lesson runs with papermill in a fresh kernel ("sampan" when that kernel spec
is installed, else "python3"), with ``QUICK=True, SOLUTION=True``, its working
directory in a temporary folder and ``SAMPAN_DATA`` pointing at a temporary
data directory shared by the session (so ``shapes`` is generated once). The
values the lesson records with ``sampan.record`` are read back from the
executed notebook and compared with the ranges below (quick mode); the ranges
for full mode are in the final report for ``notebooks/path.yaml``.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import papermill  # noqa: E402
from jupyter_client.kernelspec import find_kernel_specs  # noqa: E402

from lesson_helpers import assert_follows_conventions  # noqa: E402
from sampan.utils.record import collect_records  # noqa: E402

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
KERNEL = "sampan" if "sampan" in find_kernel_specs() else "python3"

# lesson -> {metric: (low, high)} in quick mode; None means unbounded on that side.
QUICK_RANGES: dict[str, dict[str, tuple]] = {
    "01-beginner/environment_check": {
        "check_ok": (True, True),
        "cpu_train_ok": (True, True),
        "checks_run": (2, None),
        "monitor_samples": (1, None),
        "peak_rss_mib": (50, 8000),
        "exercise_failed": (True, True),
        "exercise_batch_mib": (True, True),
    },
    "01-beginner/tensors_and_autograd": {
        "grad_error": (0.0, 1e-6),
        "fit_loss": (0.0, 0.05),
        "exercise_normalize": (True, True),
        "exercise_grad_of_cube": (True, True),
    },
    "01-beginner/first_model": {
        "test_acc": (0.97, 1.0),  # the foundation issue's bar: >= 97 % test accuracy on digits
        "epochs_trained": (1, 30),
        "exercise_most_confused": (True, True),
    },
    "01-beginner/datasets_and_transforms": {
        "digits_train_size": (1257, 1257),
        "normalized_mean": (-0.05, 0.05),
        "normalized_std": (0.95, 1.05),
        "steps_per_epoch": (94, 94),
        "defects_majority_share": (0.69, 0.71),
        "exercise_flattened": (True, True),
        "exercise_lenet_tf": (True, True),
    },
    "02-intermediate/from_paddle": {
        "paddle_habit_caught": (True, True),  # Paddle's [N, 1] labels stop fit with a pointer to the guide
        "total_params": (61610, 61610),  # paddle.vision.models.LeNet's count
        "test_acc": (0.9, 1.0),
        "export_max_diff": (0.0, 1e-4),
        "exercise_momentum_optimizer": (True, True),
    },
    "02-intermediate/training_craft": {
        "best_lr": (0.03, 0.5),
        "sweep_best_val_loss": (0.0, 0.6),
        "onecycle_val_acc": (0.85, 1.0),
        "early_stop_epochs": (5, 30),
        "early_stop_val_acc": (0.93, 1.0),
        "resume_max_abs_diff": (0.0, 0.0),
        "exercise_warmup_cosine": (True, True),
        "exercise_best_epoch": (True, True),
    },
    "02-intermediate/experiments": {
        "runs_recorded": (2, 2),  # the session store of the lesson's kernel (SAMPAN_TRACKING_URI, tests/conftest.py)
        "fast_lr_eval_acc": (0.8, 1.0),
        "sweep_trials": (6, 6),
        "sweep_best_acc": (0.85, 1.0),
        "exercise_differing": (True, True),
        "exercise_best_lr": (True, True),
    },
    "02-intermediate/sentiment_reviews_zh": {
        "tfidf_char_acc": (0.8, 0.86),
        "tfidf_bigram_acc": (0.83, 0.89),
        "textcnn_acc": (0.84, 0.95),
        "beats_char_tfidf": (True, True),  # the bar: above the TF-IDF baseline on the same characters
        "gap_to_bigram_tfidf": (-0.025, None),  # level with TF-IDF on bigrams, within the test set's noise
        "textcnn_random_acc": (0.65, 0.84),  # the control: the same TextCNN with random embeddings
        "pretrained_gain_points": (3.0, None),  # what the PPMI embeddings add (about 9 points in quick mode)
        "exercise_predict_sentiment": (True, True),
    },
    "02-intermediate/transfer_learning_defects": {
        "shapes_val_acc": (0.85, 1.0),
        "baseline_macro_f1": (0.19, 0.22),
        "plain_macro_f1": (0.6, 1.0),
        "defects_macro_f1": (0.75, 1.0),  # majority-class baseline: 0.206
        "defects_macro_recall": (0.75, 1.0),
        "exercise_inverse_frequency": (True, True),
        "exercise_macro_f1": (True, True),
    },
    "02-intermediate/gan_digits": {
        "judge_acc": (0.9, 1.0),
        "gan_confident_share": (0.2, 1.0),  # uniform noise: about 0.09
        "gan_digit_coverage": (7, 10),  # a collapsed generator draws only a few digits
        "d_loss_final": (0.3, 1.4),  # near 0: the discriminator won and the generator learns nothing
        # memorising: generated samples much nearer the training set than held-out real digits
        "gan_nn_ratio": (0.8, 2.5),  # median nearest-training distance, generated / held-out; noise: about 3
        "gan_near_copy_share": (0.0, 0.15),  # held-out digits: 0.05 by construction
        "exercise_d_loss": (True, True),
        "exercise_g_loss": (True, True),
        "exercise_interpolate": (True, True),
    },
    "03-advanced/profiling_and_memory": {
        "data_share_before": (0.7, 1.0),
        "data_share_after": (0.0, 0.5),
        "loader_speedup": (3.0, None),
        "leak_growth_mib": (50.0, None),
        "leak_detected": (True, True),
        "fixed_growth_mib": (None, 16.0),  # flat after the fix
        "fixed_leak_detected": (False, False),
        "oom_raised": (True, True),
        "batch512_saved_mib": (2.4, 2.7),
        "amp2048_saved_mib": (0.0, 8.0),  # fits the 8 MiB budget that fp32 overflows
        "accumulation_grad_err": (0.0, 1e-6),
        "exercise_activation_mib": (True, True),
        "exercise_leaky_line": (True, True),
    },
    "03-advanced/custom_cpp_operator": {
        "forward_max_err": (0.0, 1e-5),
        "backward_max_err": (0.0, 1e-5),
        "gradcheck": (True, True),
        "exercise_swish_grad": (True, True),
    },
}


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("sampan_data")


def execute(lesson: str, tmp_path: Path, data_dir: Path, monkeypatch, **parameters) -> tuple[dict, Path]:
    """Runs ``notebooks/<lesson>.ipynb`` and returns its records and the executed notebook."""
    monkeypatch.setenv("SAMPAN_DATA", str(data_dir))
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "2"))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    source = NOTEBOOKS / f"{lesson}.ipynb"
    output = tmp_path / f"{source.stem}.out.ipynb"
    params = {"QUICK": True, "SOLUTION": True, **parameters}
    papermill.execute_notebook(str(source), str(output), parameters=params, kernel_name=KERNEL,
                               cwd=str(tmp_path), progress_bar=False, log_output=False, execution_timeout=600)
    return collect_records(output), output


def assert_in_ranges(records: dict, ranges: dict[str, tuple]) -> None:
    missing = sorted(set(ranges) - set(records))
    assert not missing, f"metrics not recorded: {missing}; recorded: {sorted(records)}"
    for name, (low, high) in ranges.items():
        value = records[name]
        if isinstance(low, bool):
            assert value is low, f"{name} = {value!r}, expected {low!r}"
            continue
        assert low is None or value >= low, f"{name} = {value!r} is below {low}"
        assert high is None or value <= high, f"{name} = {value!r} is above {high}"


def outputs_text(notebook: Path) -> str:
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            parts.append(out.get("text", "") or out.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


@pytest.mark.notebook
@pytest.mark.parametrize("lesson", sorted(QUICK_RANGES))
def test_lesson_runs_and_meets_its_ranges(lesson, tmp_path, data_dir, monkeypatch):
    records, _ = execute(lesson, tmp_path, data_dir, monkeypatch)
    assert_in_ranges(records, QUICK_RANGES[lesson])
    assert all(v is True for k, v in records.items() if k.startswith("exercise_")), records


@pytest.mark.notebook
def test_unanswered_exercises_say_what_is_wrong(tmp_path, data_dir, monkeypatch):
    """Without the reference solutions the checks must fail and explain why, not crash the lesson."""
    records, output = execute("01-beginner/tensors_and_autograd", tmp_path, data_dir, monkeypatch, SOLUTION=False)
    exercises = {k: v for k, v in records.items() if k.startswith("exercise_")}
    assert exercises and not any(exercises.values()), exercises
    text = outputs_text(output)
    assert "✘ normalize" in text and "HINT:" in text, text[-2000:]


@pytest.mark.notebook
@pytest.mark.parametrize("lesson", sorted(p.relative_to(NOTEBOOKS).with_suffix("").as_posix()
                                          for p in NOTEBOOKS.glob("0*/*.ipynb")))
def test_every_lesson_follows_the_conventions(lesson):
    """Kernel, goal cell, parameters cell with QUICK and SOLUTION, an exercise, records, no committed outputs."""
    import nbformat

    path = NOTEBOOKS / f"{lesson}.ipynb"
    assert_follows_conventions(path)
    nb = nbformat.read(path, as_version=4)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert "SOLUTION = False" in params[0].source, lesson
    assert any("sampan.record" in c.source for c in nb.cells), lesson
