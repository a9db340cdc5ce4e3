"""`sampan lab` / `sampan dashboard` command lines (the servers themselves: tests/browser/)."""
from __future__ import annotations

import shlex
import socket

import pytest

from sampan.cli import main
from sampan.cli._servers import free_port
from sampan.utils.io import repo_root
from sampan.utils.notebooks import VOILA_BOOT


def test_lab_command_binds_localhost_with_a_token_on_the_index(capsys):
    from sampan.path.lang import built_course_dir

    assert main(["lab", "--dry-run", "--no-browser", "--port", "0", "--lang", "en"]) == 0
    cmd = capsys.readouterr().out.split()
    assert cmd[1:4] == ["-P", "-m", "jupyterlab"]  # -P: nothing imported from the folder it starts in
    assert "--ServerApp.ip=127.0.0.1" in cmd and not any("token" in w.lower() for w in cmd)  # env: tests/security
    assert f"--ServerApp.root_dir={built_course_dir('en')}" in cmd  # notebooks/ built in English
    assert "--LabApp.default_url=/lab/tree/index.ipynb" in cmd and "--ServerApp.open_browser=False" in cmd
    assert (repo_root() / "notebooks" / "index.ipynb").is_file()


def test_lab_makes_up_a_random_token(monkeypatch):
    from sampan.cli._servers import new_token, server_env

    monkeypatch.delenv("SAMPAN_LAB_TOKEN", raising=False)
    tokens = [new_token("SAMPAN_LAB_TOKEN"), new_token("SAMPAN_LAB_TOKEN")]
    assert tokens[0] != tokens[1] and len(tokens[0]) > 40
    monkeypatch.setenv("SAMPAN_LAB_TOKEN", "t0ken")
    assert server_env(new_token("SAMPAN_LAB_TOKEN"))["JUPYTER_TOKEN"] == "t0ken"


def test_dashboard_command_spells_out_voila_security(capsys):
    assert main(["dashboard", "digit_playground", "--dry-run", "--port", "0"]) == 0
    cmd = shlex.split(capsys.readouterr().out)  # a line to paste into a shell
    assert cmd[1:4] == ["-P", "-c", VOILA_BOOT] and cmd[4].endswith("dashboards/digit_playground.ipynb")  # built: test_lang_lab
    for flag in ("--Voila.ip=127.0.0.1", "--VoilaConfiguration.strip_sources=True",
                 "--VoilaConfiguration.show_tracebacks=False", "--Voila.open_browser=False"):
        assert flag in cmd


def test_dashboard_list_and_unknown_name(capsys):
    assert main(["dashboard"]) == 0
    listed = capsys.readouterr().out
    assert listed.startswith("Dashboards: ")
    names = listed.split(": ", 1)[1].strip().split(", ")
    assert names == sorted(names) and {"digit_playground", "path_report", "training_monitor"} <= set(names)
    assert main(["dashboard", "nope"]) == 2
    assert "Received: name='nope'" in capsys.readouterr().err


def test_dashboards_name_the_sampan_kernel_and_have_no_outputs():
    import nbformat

    for nb_file in sorted((repo_root() / "notebooks" / "dashboards").glob("*.ipynb")):
        nb = nbformat.read(nb_file, as_version=4)
        assert nb.metadata["kernelspec"]["name"] == "sampan", nb_file.name
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), nb_file.name


def test_free_port_skips_a_taken_one():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        port = free_port(busy)
        assert port != busy and port > 0


@pytest.mark.parametrize("command", [["lab", "--no-browser"], ["dashboard", "digit_playground"],
                                     ["publish", "--serve"]])
def test_a_busy_port_is_replaced_by_another_and_the_learner_is_told(command, capsys, tmp_path, monkeypatch):
    """Audit: --port help said "the next free one when taken" while a random free port was picked silently."""
    monkeypatch.setenv("SAMPAN_DATA", str(tmp_path))  # publish --serve writes the gallery page there
    with pytest.raises(SystemExit):
        main([command[0], "--help"])
    assert "another free port when taken" in " ".join(capsys.readouterr().out.split())
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        assert main([*command, "--dry-run", "--port", str(busy)]) == 0
    out, err = capsys.readouterr()
    used = int(err.split("using port ")[1].split()[0])
    assert f"sampan {command[0]}: port {busy} is busy; using port {used} instead" in err
    assert used != busy and f"port={used}" in out  # the command runs on the port named
    assert main([*command, "--dry-run", "--port", str(used)]) == 0
    assert "busy" not in capsys.readouterr().err  # a free port: no note


@pytest.fixture
def spaced(tmp_path, monkeypatch):
    """A Python and a data folder whose paths have spaces, as on many learners' machines."""
    python = tmp_path / "my python" / "bin" / "python"
    monkeypatch.setattr("sys.executable", str(python))
    monkeypatch.setenv("SAMPAN_DATA", str(tmp_path / "my data"))
    monkeypatch.setenv("SAMPAN_HUB_LEARNER_USER", "root")  # hub as root (CI): the learners' account is chosen
    return str(python)


def test_dry_runs_print_a_command_that_pastes_into_a_shell(spaced, tmp_path, capsys):
    import json

    from sampan.path.lang import built_course_dir

    assert main(["lab", "--dry-run", "--no-browser", "--port", "0", "--lang", "en"]) == 0
    cmd = shlex.split(capsys.readouterr().out)
    assert cmd[:4] == [spaced, "-P", "-m", "jupyterlab"] and f"--ServerApp.root_dir={built_course_dir('en')}" in cmd

    assert main(["publish", "--serve", "--dry-run", "--port", "0"]) == 0
    cmd = shlex.split(capsys.readouterr().out.strip().splitlines()[-1])
    assert cmd[0] == spaced and str(tmp_path / "my data" / "gallery") in " ".join(cmd)
    settings = [w for w in cmd if w.startswith("--Voila.tornado_settings=")]
    assert len(settings) == 1 and "Content-Security-Policy" in json.loads(settings[0].split("=", 1)[1])["headers"]

    assert main(["hub", "--dry-run", "--dir", str(tmp_path / "my hub"), "--port", "8123"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert shlex.split(lines[-1])[:4] == [spaced, "-P", "-m", "jupyterhub"]
    assert f"SAMPAN_HUB_DIR={tmp_path / 'my hub'}" in [w for line in lines[:-1] for w in shlex.split(line)]
