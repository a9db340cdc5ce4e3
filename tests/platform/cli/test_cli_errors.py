"""Bad command-line input gets an error that names the option, the value and the fix (exit 2 or 1), never a
traceback: ports, `path run --timeout/--output`, `export --network`."""
from __future__ import annotations

import pytest
import yaml

from sampan.cli import main


def _exit_code_and_stderr(argv, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    return stop.value.code, capsys.readouterr().err


@pytest.mark.parametrize("command", [["lab", "--dry-run"], ["dashboard", "digit_playground", "--dry-run"]])
@pytest.mark.parametrize("value", ["99999", "-5", "http"])
def test_a_port_out_of_range_is_refused_naming_it(command, value, capsys):
    code, err = _exit_code_and_stderr([*command, "--port", value], capsys)
    assert code == 2
    assert "Expected `--port` to be an int from 0 to 65535" in err and f"Received: --port='{value}'" in err
    assert "HINT: pass --port 8888" in err and "Traceback" not in err


@pytest.fixture
def course(tmp_path):
    root = tmp_path / "notebooks"
    (root / "01-beginner").mkdir(parents=True)
    (root / "01-beginner" / "a.ipynb").write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    stages = [{"id": "beginner", "lessons": [{"id": "a", "notebook": "01-beginner/a.ipynb"}]}]
    (root / "path.yaml").write_text(yaml.safe_dump({"stages": stages}))
    return root / "path.yaml"


@pytest.mark.parametrize("value", ["-5", "0", "soon", "nan"])
def test_path_run_refuses_a_timeout_that_is_not_positive(course, value, capsys):
    code, err = _exit_code_and_stderr(["path", "--manifest", str(course), "run", "--timeout", value], capsys)
    assert code == 2
    assert "Expected `--timeout` to be a number of seconds greater than 0" in err and f"--timeout='{value}'" in err


def test_path_run_refuses_an_output_that_is_a_file(course, tmp_path, capsys):
    taken = tmp_path / "report.txt"
    taken.write_text("not a folder")
    assert main(["path", "--manifest", str(course), "run", "--output", str(taken)]) == 2
    err = capsys.readouterr().err
    assert f"Received: output_dir='{taken}'. HINT: it is a file; pass --output with a folder" in err
    assert taken.read_text() == "not a folder"


def test_path_run_refuses_a_data_dir_that_is_a_file(course, tmp_path, capsys):
    taken = tmp_path / "data.txt"
    taken.write_text("")
    assert main(["path", "--manifest", str(course), "run", "--data-dir", str(taken),
                 "--output", str(tmp_path / "runs")]) == 2
    assert f"Received: data_dir='{taken}'. HINT: it is a file; pass --data-dir with a folder" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()  # refused before a run folder was made


def test_path_run_without_the_kernel_says_how_to_install_it(course, tmp_path, capsys):
    code = main(["path", "--manifest", str(course), "run", "--kernel", "no-such-kernel",
                 "--output", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert code == 2
    assert "Expected `kernel_name` to be an installed Jupyter kernel (" in err and "python3" in err
    assert "Received: kernel_name='no-such-kernel'. HINT: pass --kernel with one of those" in err


@pytest.mark.parametrize("network, says", [
    ("no_such_module:X", "there is no module named 'no_such_module'"),
    ("no_such_module.sub:Net", "there is no module named 'no_such_module'"),
    ("sampan.vision.models:Nope", "module 'sampan.vision.models' has no callable 'Nope'; it has LeNet"),
])
def test_export_names_a_network_that_cannot_be_imported(tmp_path, network, says, capsys):
    (tmp_path / "model.pt").write_bytes(b"")  # a checkpoint that is there: a missing one is reported first
    code = main(["export", str(tmp_path / "model.pt"), "--network", network, "--input-spec", "x:float32:None,4"])
    err = capsys.readouterr().err
    assert code == 1
    assert "Expected `--network` to be MODULE:FACTORY" in err and f"Received: --network='{network}'" in err
    assert says in err and "sampan.vision.models:LeNet" in err


@pytest.mark.parametrize("command", [["check", "--no-compile"], ["kernel", "install"]])
def test_ctrl_c_ends_a_command_with_a_line_and_code_130(command, monkeypatch, capsys):
    import importlib

    from sampan.cli import COMMANDS

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib.import_module(COMMANDS[command[0]][0]), "run", interrupted)
    try:
        code = main(command)
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C came out of main() as a KeyboardInterrupt (a traceback on the terminal)")
    assert code == 130
    err = capsys.readouterr().err
    assert err.strip() == f"sampan {command[0]}: interrupted" and "Traceback" not in err


def test_version_and_top_level_help_import_no_subcommand(tmp_path):
    """`sampan --version` and `sampan --help` read the version file and COMMANDS: no subcommand module (and what
    each imports: Jupyter, MLflow, Optuna) is loaded, nor torch (`import sampan` imports it on first use only);
    every command's own module, which `sampan <command> --help` loads, imports no torch either."""
    import subprocess
    import sys

    import sampan

    code = ("import contextlib, io, sys\n"
            "from sampan.cli import main\n"
            "out = io.StringIO()\n"
            "for argv in (['--version'], ['--help']):\n"
            "    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
            "        main(argv)\n"
            "loaded = sorted(m for m in sys.modules if m.startswith('sampan.cli.'))\n"
            "torch_then = 'torch' in sys.modules\n"
            "import importlib, sampan.cli\n"
            "heavy = {}\n"
            "for command, (module, _) in sampan.cli.COMMANDS.items():\n"
            "    importlib.import_module(module)\n"
            "    heavy[command] = sorted({'torch', 'numpy', 'mlflow'} & set(sys.modules))\n"
            "print(repr((out.getvalue(), loaded, torch_then, heavy)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text, loaded, torch_then, heavy = eval(done.stdout.strip().splitlines()[-1])  # noqa: S307 - our own repr
    assert loaded == [] and not torch_then
    assert heavy == dict.fromkeys(heavy, []) and len(heavy) >= 12, heavy
    assert text.startswith(f"sampan {sampan.__version__}\n")
    for name in ("check", "lab", "path", "dashboard", "kernel", "publish", "hub", "sweep", "job"):
        assert f"\n    {name}" in text


def test_hub_names_a_roster_that_is_missing_or_a_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SAMPAN_HUB_LEARNER_USER", "root")
    monkeypatch.chdir(tmp_path)
    assert main(["hub", "--dry-run", "--roster", "missing.csv"]) == 2
    err = capsys.readouterr().err
    assert "Expected `--roster` to be an existing CSV file with the header row 'username,role'" in err
    assert f"Received: --roster='missing.csv'. HINT: check the path (a relative one is read from {tmp_path})" in err
    assert "Errno" not in err
    (tmp_path / "class").mkdir()
    assert main(["hub", "--dry-run", "--roster", "class"]) == 2
    assert "(it is a folder). Received: --roster='class'. HINT: name the CSV file inside it" in capsys.readouterr().err
