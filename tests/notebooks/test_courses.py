"""Executes each course lesson in quick mode, twice, and checks what it records.

Every lesson of ``notebooks/path.yaml`` runs with papermill in a fresh kernel ("sampan" when that kernel spec
is installed, else "python3") through ``lesson_helpers.lesson_run``: once with its reference solutions
(``SOLUTION=True``; a bilingual lesson runs in Chinese) — its records must meet ``path.yaml``'s quick ranges and
the ranges below, and every exercise must be right — and once with the learner's untouched starter code
(``SOLUTION=False``, in English) — it must still run to its end with no exercise passing. Other test files
read the same runs, whichever pytest-xdist worker made them (``lesson_helpers.lesson_run``); the lessons are dealt
to four test files (this one and ``test_courses_part1..3.py``) so that ``--dist loadfile`` spreads them.
"""
from __future__ import annotations

import functools
from pathlib import Path

import pytest


from lesson_helpers import (assert_exercises_follow_the_convention, assert_follows_conventions,  # noqa: E402
                            launches_process_groups, lesson_run, outputs_text)

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"

# lesson -> {metric: (low, high)} in quick mode; None means unbounded on that side.
QUICK_RANGES: dict[str, dict[str, tuple]] = {
    "01-beginner/environment_check": {
        "check_ok": (True, True),
        "cpu_train_ok": (True, True),
        "cuda_stack_ok": (True, True),  # run_check's CUDA build / driver / cuDNN verdict
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
        "constant_lr_val_acc": (0.85, 1.0),  # the control: the same rate held constant
        "onecycle_minus_constant": (-0.03, 0.03),  # within noise on a run this short (the text says so)
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
        "textcnn_acc": (0.835, 0.95),  # the quick mode's smaller network: about 0.85 (full: 0.855)
        "beats_char_tfidf": (True, True),  # the bar: above the TF-IDF baseline on the same characters
        "gap_to_bigram_tfidf": (-0.025, None),  # level with TF-IDF on bigrams, within the test set's noise
        "textcnn_random_acc": (0.65, 0.84),  # the control: the same TextCNN with random embeddings
        "pretrained_gain_points": (3.0, None),  # what the PPMI embeddings add (4 to 8 points in quick mode, SEED 0 and 1)
        "exercise_predict_sentiment": (True, True),
    },
    "02-intermediate/transfer_learning_defects": {
        "shapes_val_acc": (0.85, 1.0),
        # linear probes on 100 labels, 5 draws: the pretrained backbone against the control, the same net random
        "pretrained_macro_f1": (0.7, 1.0),
        "random_backbone_macro_f1": (0.5, 0.85),
        "transfer_gain_points": (2.0, None),  # measured with SEED 0, 1, 2: 5.9, 4.0, 4.7 points
        "transfer_wins": (3, 5),  # of 5 draws; measured 4, 4, 5
        "transfer_gain_points_mean": (2.0, None),  # over 50, 100, 200, 500 and 2000 labels
        "transfer_gain_points_min": (0.0, None),
        "transfer_gain_points_all_labels": (1.0, None),
        "baseline_macro_f1": (0.19, 0.22),
        "plain_macro_f1": (0.6, 1.0),
        "defects_macro_f1": (0.75, 1.0),  # majority-class baseline: 0.206
        "defects_macro_recall": (0.75, 1.0),
        "exercise_effective_number_weights": (True, True),
        "exercise_macro_f1": (True, True),
    },
    "02-intermediate/distillation": {
        "teacher_top_prob_t1": (0.85, 1.0),
        "teacher_top_prob_soft": (0.2, 0.8),  # the same softmax at T = 4
        "teacher_acc": (0.85, 1.0),
        "student_alone_acc": (0.75, 0.95),  # the control: the same student, labels and steps, no teacher
        "student_distilled_acc": (0.8, 1.0),
        "distill_gain_points": (1.5, None),
        "teacher_lead_points": (0.0, None),
        "size_ratio": (55, 70),
        "exercise_soft_cross_entropy": (True, True),
    },
    "02-intermediate/gan_digits": {
        "judge_acc": (0.9, 1.0),
        "gan_confident_share": (0.2, 1.0),  # uniform noise: about 0.09
        "noise_confident_share": (0.0, 0.15),  # the control: uniform noise through the same judge
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
        "exercise_no_leak": (True, True),
    },
    "03-advanced/compress_a_model": {
        "baseline_acc": (85, 100),
        "pruned_flops_ratio": (0.40, 0.505),
        "pruned_finetuned_acc": (82, 100),
        "rounding_error_steps": (0.0, 0.5),
        "fake_quant_matches_torch": (True, True),
        "static_int8_acc_drop": (None, 2),
        "int8_size_ratio": (0.0, 0.35),
        "mlp_fp32_acc": (88, 100),
        "dynamic_int8_acc_drop": (-1, 1),
        "small_fp32_acc": (90, 100),  # the control of QAT against PTQ (2-bit weights)
        "ptq_int8_drop_points": (None, 1.5),
        "ptq_int2_drop_points": (5, None),
        "qat_int2_drop_points": (None, 3),
        "qat_gain_points": (5, None),
        "served_int8_acc": (83, 100),
        "served_pruned_acc": (82, 100),
        "exercise_scale_zero_point": (True, True),
        "exercise_keep_sensitive_float": (True, True),
    },
    "03-advanced/custom_cpp_operator": {
        "forward_max_err": (0.0, 1e-5),
        "backward_max_err": (0.0, 1e-5),
        "gradcheck": (True, True),
        "opcheck_failures_without_fake": (2, 2),  # the control: no fake kernel, two opcheck tests fail
        "opcheck_passes_with_fake": (True, True),
        "exercise_mish_grad": (True, True),
    },
    "03-advanced/transformer_zh": {
        # quick pretraining (300 steps) learns character frequencies only: no better than always guessing ","
        "mlm_val_acc": (0.02, 0.10),
        "mlm_val_acc_untrained": (0.0, 0.01),  # the control on the pretraining task
        "mlm_val_acc_most_frequent": (0.03, 0.045),
        "mlm_gain_over_most_frequent_points": (-1.0, 1.0),
        "tfidf_acc": (0.78, 0.88),
        "textcnn_acc": (0.60, 0.80),
        "transformer_pretrained_acc": (0.70, 0.84),
        "transformer_random_acc": (0.70, 0.84),  # the control: the same Transformer never pretrained
        "pretrain_gain_points": (-4.0, 4.0),  # measured -0.7 / -0.9 / -0.9 (SEED 0 / 1 / 2): no measurable gain
        "tfidf_lead_points": (0.5, None),  # TF-IDF ahead of every network (measured 4.1 / 5.6 / 5.8)
        "probe_pretrained_acc": (0.54, 0.66),
        "probe_random_acc": (0.54, 0.66),
        "probe_gain_points": (-5.0, 3.0),  # measured -1.4 (full mode: +5.0)
        "exercise_mask_whole_words": (True, True),
    },
    "03-advanced/serving": {
        "served_acc": (0.85, 1.0),
        "served_max_abs_diff": (0.0, 1e-6),
        "bad_input_all_4xx": (True, True),
        "alive_after_bad_input": (True, True),
        "batch_speedup": (1.5, None),  # the control: one image per request (measured 13.7x)
        "server_stopped": (True, True),
        "cpp_max_abs_diff": (0.0, 1e-4),
        "cpp_classes_match": (True, True),
        "exercise_predict_all": (True, True),
    },
    "03-advanced/large_models": {
        "merge_vs_big_batch_max_abs_diff": (0.0, 1e-5),
        "small_batches_vs_big_batch_max_abs_diff": (1e-3, None),  # the control: a step per small batch
        "merged_over_big_peak": (0.0, 0.7),  # measured 2.91 / 8.06 MiB
        "pipeline_vs_single_max_abs_diff": (0.0, 1e-5),
        "gpipe_stage0_in_flight": (4, 4),
        "one_f_one_b_stage0_in_flight": (2, 2),
        "fsdp_over_ddp_bytes": (0.45, 0.55),  # FSDP2 per rank < DDP per rank, checked
        "fsdp_vs_ddp_max_abs_diff": (0.0, 1e-5),
        "exercise_merge_gradients": (True, True),
        "exercise_bubble_fraction": (True, True),
        "exercise_bytes_per_rank": (True, True),
    },
}


def execute(lesson: str, *, solution: bool = True) -> tuple[dict, Path]:
    """The records and executed notebook of ``notebooks/<lesson>.ipynb`` (run once per test process)."""
    return lesson_run(lesson, solution=solution)


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


@functools.cache  # path.yaml is read once per test process, not once per test
def _path_lessons() -> dict[str, str]:
    """Every lesson of ``path.yaml``: id -> notebook path relative to notebooks/, without ``.ipynb``."""
    from sampan.path.manifest import load_path

    return {lesson.id: lesson.notebook.relative_to(NOTEBOOKS).with_suffix("").as_posix()
            for lesson in load_path(NOTEBOOKS / "path.yaml").lessons}


# Quick-mode seconds per lesson run on one thread (the mean of its two runs in `make test`, measured 2026-12-03;
# others ~10 s): the lessons are dealt to PARTS test files so that `pytest -n N --dist loadfile` (make test) spreads
# them evenly over the workers. The lessons that launch process groups go to one part: they run one at a time anyway
# (lesson_helpers.lesson_run), so in two parts one worker would wait for the other.
_COST = {"sentiment_reviews_zh": 280, "transformer_zh": 100, "serving": 185, "develop_dynamic_deploy_static": 140,
         "transfer_learning_defects": 140, "compress_a_model": 116, "distributed_training": 93, "distillation": 79,
         "large_models": 76, "first_model": 71, "experiments": 67, "profiling_and_memory": 67, "gan_digits": 58,
         "custom_cpp_operator": 55, "training_craft": 46, "from_paddle": 42, "environment_check": 38,
         "datasets_and_transforms": 35, "mixed_precision": 29, "tensors_and_autograd": 21}
PARTS = 4  # test_courses.py and test_courses_part1..3.py


@functools.cache
def _together() -> tuple[str, ...]:
    """The lessons that launch process groups (lesson_helpers.lesson_run runs them one at a time)."""
    import json

    return tuple(i for i, rel in _path_lessons().items()
                 if launches_process_groups(json.loads((NOTEBOOKS / f"{rel}.ipynb").read_text(encoding="utf-8"))))


def lesson_part(part: int) -> list[str]:
    """The lesson ids of one part: the costliest first, each to the part with the least work so far."""
    units = [[i] for i in _path_lessons() if i not in _together()] + [list(_together())]
    loads, owner = [0.0] * PARTS, {}
    for unit in sorted((u for u in units if u), key=lambda u: (-sum(_COST.get(i, 10) for i in u), u)):
        k = loads.index(min(loads))
        owner.update(dict.fromkeys(unit, k))
        loads[k] += sum(_COST.get(i, 10) for i in unit)
    return sorted(i for i, k in owner.items() if k == part)


def check_lesson_ranges(lesson_id: str) -> None:
    """The reference-solution run (in Chinese when bilingual) meets path.yaml's quick ranges and the ranges
    above, and every exercise is right."""
    from sampan.path.manifest import load_path

    lesson = load_path(NOTEBOOKS / "path.yaml").lesson(lesson_id)
    rel = _path_lessons()[lesson_id]
    records, _ = execute(rel)
    problems = {m.name: m.check(records[m.name], "quick") if m.name in records else "not recorded"
                for m in lesson.metrics}
    assert not any(problems.values()), {k: v for k, v in problems.items() if v}
    assert_in_ranges(records, QUICK_RANGES.get(rel, {}))
    exercises = {k: v for k, v in records.items() if k.startswith("exercise_")}
    assert exercises and all(v is True for v in exercises.values()), exercises


def check_starter_code(lesson_id: str) -> None:
    """Run as a learner who answers nothing (``SOLUTION=False``): the lesson still runs to its end, every
    exercise is checked, and each one says not attempted or incorrect; none passes."""
    from sampan.path.manifest import load_path

    lesson = load_path(NOTEBOOKS / "path.yaml").lesson(lesson_id)
    records, output = execute(_path_lessons()[lesson_id], solution=False)
    exercises = {k: v for k, v in records.items() if k.startswith("exercise_")}
    ranged = {m.name for m in lesson.metrics if m.name.startswith("exercise_")}
    assert ranged and ranged <= set(exercises), f"exercises never checked: {sorted(ranged - set(exercises))}"
    assert not any(exercises.values()), f"passed with the starter code: {[k for k, v in exercises.items() if v]}"
    lines = [line for line in outputs_text(output).splitlines() if line[:1] in "○✘✔"]
    assert lines and not any(line.startswith("✔") for line in lines), lines


def test_the_parts_deal_out_every_lesson_once():
    dealt = [i for part in range(PARTS) for i in lesson_part(part)]
    assert sorted(dealt) == sorted(_path_lessons()) and len(set(dealt)) == len(dealt)
    # the lessons that launch process groups share one part: in two, one worker would wait on the other's lock
    assert {"distributed_training", "large_models"} <= set(_together())
    assert len({part for part in range(PARTS) for i in _together() if i in lesson_part(part)}) == 1


def part_tests(part: int) -> tuple:
    """The two tests of one part's lessons, for this file (part 0) and test_courses_part1..3.py."""
    @pytest.mark.notebook
    @pytest.mark.parametrize("lesson_id", lesson_part(part))
    def test_lesson_runs_and_meets_its_ranges(lesson_id):
        check_lesson_ranges(lesson_id)

    @pytest.mark.notebook
    @pytest.mark.parametrize("lesson_id", lesson_part(part))
    def test_the_untouched_starter_code_passes_no_exercise(lesson_id):
        check_starter_code(lesson_id)

    return test_lesson_runs_and_meets_its_ranges, test_the_untouched_starter_code_passes_no_exercise


test_lesson_runs_and_meets_its_ranges, test_the_untouched_starter_code_passes_no_exercise = part_tests(0)


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
    assert_exercises_follow_the_convention(path)
