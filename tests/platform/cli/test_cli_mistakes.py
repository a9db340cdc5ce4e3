"""A learner's mistakes with the command line and the experiments / widgets APIs get a message that names the
argument, the value and the fix (exit code 2 or a ValueError), never a traceback, a silent result or lost progress."""
from __future__ import annotations

import json

import pytest
import yaml

from sampan.cli import main

_NOTEBOOK = {"cells": [{"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": "lr = 0.1",
                        "outputs": [], "execution_count": None}],
             "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


@pytest.fixture
def course(tmp_path):
    root = tmp_path / "notebooks"
    (root / "s").mkdir(parents=True)
    for name in ("a", "b"):
        (root / "s" / f"{name}.ipynb").write_text(json.dumps(_NOTEBOOK))
    lessons = [{"id": "a", "notebook": "s/a.ipynb"}, {"id": "b", "notebook": "s/b.ipynb"}]
    (root / "path.yaml").write_text(yaml.safe_dump({"stages": [{"id": "beginner", "lessons": lessons}]}))
    return root / "path.yaml"


def _exit(argv, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    return stop.value.code, capsys.readouterr().err


# ---------------------------------------------------------------- progress.json
def test_path_list_names_a_damaged_progress_entry_and_keeps_the_others(course, data_home, capsys):
    from sampan.path.progress import load_progress, update_progress

    damaged = {"version": 1, "lessons": {"a": 3, "b": {"status": "passed", "at": "2026-01-01T00:00:00+00:00"}}}
    (data_home / "progress.json").write_text(json.dumps(damaged))
    assert main(["path", "--manifest", str(course), "list"]) == 0
    out, err = capsys.readouterr()
    assert "1/2 lessons done" in out and "Traceback" not in err
    assert "Expected `lessons.a` to be an object" in err and "Received: lessons.a=3" in err and "HINT:" in err
    assert load_progress() == {"b": damaged["lessons"]["b"]}  # the damaged lesson reads as not started
    update_progress("b", "failed")  # writing another lesson loses nothing
    assert json.loads((data_home / "progress.json").read_text())["lessons"]["a"] == 3
    assert update_progress("a", "passed")["status"] == "passed"  # running it again replaces the entry


def test_a_damaged_exercise_log_entry_starts_afresh(data_home):
    from sampan.path.progress import load_exercise_log, record_exercise

    (data_home / "exercises.json").write_text(json.dumps({"version": 1, "lessons": {"a": 3, "b": {"x": "y"}}}))
    assert record_exercise("a", "normalize", "incorrect")["attempts"] == 1
    assert record_exercise("b", "x", "hint2")["hints"] == 2
    assert set(load_exercise_log()) == {"a", "b"}


# ---------------------------------------------------------------- options
@pytest.mark.parametrize("argv, said_by", [
    (["path", "list", "--stage", "beginner"], "sampan path list"),
    (["sweep", "train.ipynb", "--dry-run"], "sampan sweep"),
    (["kernel", "install", "--name", "x"], "sampan kernel install"),
])
def test_an_unknown_option_is_named_by_the_command_given_it(argv, said_by, capsys):
    code, err = _exit(argv, capsys)
    unknown = " ".join(argv[-2:]) if argv[-1] != "--dry-run" else "--dry-run"
    assert code == 2 and f"{said_by}: error: unrecognized arguments: {unknown}; see `{said_by} --help`" in err


def test_path_index_names_a_missing_manifest_not_the_index_beside_it(tmp_path, capsys):
    assert main(["path", "--manifest", str(tmp_path / "nope.yaml"), "index"]) == 2
    err = capsys.readouterr().err
    assert "The learning-path manifest" in err and "nope.yaml does not exist. HINT: check `--manifest`" in err
    assert "index.ipynb" not in err


@pytest.mark.parametrize("option", [["--nproc_per_node", "0"], ["--nproc_per_node=abc"], ["--nproc-per-node", "-2"]])
def test_launch_refuses_a_bad_process_count_in_one_line(option, tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text("print('ran')\n")
    assert main(["launch", *option, str(script)]) == 2
    err = capsys.readouterr().err
    name = option[0].split("=")[0]
    assert f"sampan launch: Expected `{name}` to be an int >= 1" in err and "HINT: pass" in err


@pytest.mark.parametrize("kind", ["missing", "folder"])
def test_launch_refuses_a_script_that_is_not_a_file(kind, tmp_path, capsys):
    target = tmp_path / ("nope.py" if kind == "missing" else "")
    assert main(["launch", "--nproc_per_node", "1", str(target)]) == 2
    err = capsys.readouterr().err
    assert "Expected `script` to be a Python file" in err and f"Received: script='{target}'" in err
    assert ("is a folder" if kind == "folder" else "does not exist") in err


def test_bench_refuses_a_json_folder_before_running_anything(tmp_path, monkeypatch, capsys):
    import sampan.cli.bench as bench

    monkeypatch.setattr(bench, "_suite", lambda name: pytest.fail("a suite ran before --json was checked"))
    assert main(["bench", "fit", "--json", str(tmp_path)]) == 2
    assert "Expected `--json` to be a file to write the figures to" in capsys.readouterr().err


# ---------------------------------------------------------------- jobs and sweeps
@pytest.mark.parametrize("command", ["job", "sweep"])
@pytest.mark.parametrize("name, text", [("train.py", "print(1)\n"), ("notes.ipynb", "# not json\n"),
                                        ("empty.ipynb", "")])
def test_a_file_that_is_not_a_notebook_is_named(command, name, text, tmp_path, capsys):
    file = tmp_path / name
    file.write_text(text)
    argv = ["job", "run", str(file), "-p", "lr=1"] if command == "job" else ["sweep", str(file), "-p", "lr=1:2"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Expected `notebook` to be a Jupyter notebook (.ipynb)" in err and f"Received: notebook='{file}'" in err


def test_submit_names_parameters_that_are_not_a_dict(course):
    from sampan.experiments import submit

    with pytest.raises(ValueError, match=r"Expected `parameters` to be a dict .* Received: parameters=\['lr'\]"):
        submit(course.parent / "s" / "a.ipynb", ["lr"])


@pytest.mark.parametrize("target, kwargs, name", [(3, {}, "target"), (None, {"metric": 3}, "metric")])
def test_sweep_names_a_target_or_metric_of_the_wrong_type(course, target, kwargs, name):
    from sampan.experiments import sweep

    with pytest.raises(ValueError, match=rf"Expected `{name}` to be"):
        sweep(target if target is not None else course.parent / "s" / "a.ipynb", {"lr": "1:2"}, **kwargs)


@pytest.mark.parametrize("kwargs, name", [({"filter_string": 5}, "filter_string"),
                                          ({"order_by": "metrics.eval_acc"}, "order_by"),
                                          ({"max_results": "5"}, "max_results")])
def test_search_runs_names_an_argument_of_the_wrong_type(kwargs, name):
    from sampan.experiments import search_runs

    with pytest.raises(ValueError, match=rf"Expected `{name}` to be .* Received: {name}="):
        search_runs(**kwargs)


def test_search_runs_names_a_filter_mlflow_cannot_search():
    from mlflow.exceptions import MlflowException

    import sampan.experiments as ex

    c = ex.client()
    if c.get_experiment_by_name("mistakes") is None:
        c.create_experiment("mistakes")
    c.create_run(c.get_experiment_by_name("mistakes").experiment_id)
    with pytest.raises(MlflowException, match=r"Expected `filter_string` .* Received: filter_string='params.lr = 0.1'"):
        ex.search_runs("params.lr = 0.1", experiment="mistakes")


# ---------------------------------------------------------------- widgets
def _widgets():
    from sampan_widgets import ExperimentPanel, LiveCurves, ProfilerView, ResourceMonitor, RunCompare

    def panel(**kw):
        return ExperimentPanel(kw.pop("make_model", lambda lr: None), [], **kw)

    return {"LiveCurves": LiveCurves, "ProfilerView": ProfilerView, "RunCompare": RunCompare,
            "ResourceMonitor": ResourceMonitor, "ExperimentPanel": panel}


@pytest.mark.parametrize("widget, kwargs", [
    ("LiveCurves", {"max_interval": "2"}), ("LiveCurves", {"width": "340"}), ("LiveCurves", {"height": 0}),
    ("LiveCurves", {"metrics": 3}), ("LiveCurves", {"static": "yes"}),
    ("ProfilerView", {"steps": "10"}), ("ProfilerView", {"steps": 0}), ("ProfilerView", {"warmup": -1}),
    ("ProfilerView", {"row_limit": "20"}),
    ("RunCompare", {"filter_string": 5}), ("RunCompare", {"select": "5"}), ("RunCompare", {"max_runs": 0}),
    ("RunCompare", {"refresh_s": "2"}), ("RunCompare", {"metric": 3}),
    ("ResourceMonitor", {"probe_interval": "0.1"}), ("ResourceMonitor", {"leak_options": [1]}),
    ("ExperimentPanel", {"lr": (1.0, 1e-4, 1e-2)}), ("ExperimentPanel", {"lr": (-1, 1, 0.1)}),
    ("ExperimentPanel", {"batch_sizes": []}), ("ExperimentPanel", {"batch_sizes": 32}),
    ("ExperimentPanel", {"epochs": (10, 1, 2)}), ("ExperimentPanel", {"make_model": None}),
])
def test_a_widget_names_an_argument_of_the_wrong_type_or_range(widget, kwargs):
    (name, value), = kwargs.items()  # a value of the wrong type may be a TypeError (MonitorCallback's leak_options)
    with pytest.raises((ValueError, TypeError), match=rf"Expected `{name}` to be .*Received: {name}="):
        _widgets()[widget](**kwargs)


@pytest.mark.parametrize("command", ["job", "sweep"])
def test_a_parameter_given_two_values_is_named_not_overwritten(command, tmp_path, capsys):
    file = tmp_path / "train.ipynb"  # never read: the assignments are checked first
    argv = (["job", "run", str(file), "-p", "lr=0.1", "-p", "lr=0.01"] if command == "job" else
            ["sweep", str(file), "-p", "lr=1e-3:1e-1:log", "-p", "lr=0.5"])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Expected `-p` to be one value per parameter (lr is given" in err and "keep only the one you mean" in err
