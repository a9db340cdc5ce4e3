"""sampan.path.run refuses bad input before anything runs, and names what went wrong: a bad timeout, an output
or data folder that is a file, a kernel that is not installed, the cell during which the kernel died."""
from __future__ import annotations

import os
import subprocess
import sysconfig
import venv

import pytest

import sampan.path
from sampan.errors import DataDirectoryError


@pytest.fixture
def one_lesson(planted):
    planted.notebook("01-beginner/a.ipynb", "x = 1")
    return planted.manifest([{"id": "beginner", "lessons": [{"id": "a", "notebook": "01-beginner/a.ipynb"}]}])


@pytest.mark.parametrize("timeout", [-5, 0, float("nan"), "60", True])
def test_a_timeout_that_is_not_a_positive_number_is_refused(one_lesson, tmp_path, timeout):
    with pytest.raises(ValueError, match=r"Expected `timeout` to be a number of seconds greater than 0.*"
                                         r"Received: timeout="):
        sampan.path.run(lesson="a", manifest=one_lesson, output_dir=tmp_path / "runs", timeout=timeout)
    assert not (tmp_path / "runs").exists()  # refused, not blamed on the lesson


def test_an_output_dir_that_is_a_file_is_refused_naming_it(one_lesson, tmp_path):
    taken = tmp_path / "runs.txt"
    taken.write_text("keep me")
    with pytest.raises(ValueError, match=r"Received: output_dir='.*runs\.txt'\. HINT: it is a file; pass --output"):
        sampan.path.run(lesson="a", manifest=one_lesson, output_dir=taken)
    assert taken.read_text() == "keep me"


def test_sampan_data_that_is_a_file_is_named(one_lesson, tmp_path, monkeypatch):
    taken = tmp_path / "data-file"
    taken.write_text("")
    monkeypatch.setenv("SAMPAN_DATA", str(taken))
    with pytest.raises(DataDirectoryError, match=r"\$SAMPAN_DATA='.*data-file' is a file, not a folder.*HINT"):
        sampan.path.run(lesson="a", manifest=one_lesson, output_dir=tmp_path / "runs")
    with pytest.raises(DataDirectoryError, match=r"Cannot record your progress: \$SAMPAN_DATA="):
        sampan.path.update_progress("a", "passed")


def test_a_kernel_that_is_not_installed_is_named_before_anything_runs(planted, tmp_path):
    planted.notebook("01-beginner/a.ipynb", "x = 1", kernel="retired-kernel")
    manifest = planted.manifest([{"id": "beginner", "lessons": [{"id": "a", "notebook": "01-beginner/a.ipynb"}]}])
    with pytest.raises(sampan.path.KernelNotFoundError,
                       match=r"Lesson 'a' needs the Jupyter kernel 'retired-kernel', which is not installed here "
                             r"\(installed: .*python3.*\). HINT: install the 'retired-kernel' kernel"):
        sampan.path.run(lesson="a", manifest=manifest, output_dir=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def test_without_the_sampan_kernel_the_cli_says_sampan_kernel_install(planted, tmp_path):
    """A real environment without the 'sampan' kernel spec: a bare venv that sees this one's packages."""
    planted.notebook("01-beginner/a.ipynb", "x = 1")  # names the 'sampan' kernel, like every lesson
    manifest = planted.manifest([{"id": "beginner", "lessons": [{"id": "a", "notebook": "01-beginner/a.ipynb"}]}])
    bare = tmp_path / "bare-env"
    venv.EnvBuilder(with_pip=False).create(bare)
    python = bare / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(site, "sampan_parent_env.pth"), "w") as fh:  # this env's packages, .pth files included
        fh.write(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    env = {k: v for k, v in os.environ.items() if k != "JUPYTER_PATH"}
    env["JUPYTER_DATA_DIR"] = str(tmp_path / "no-user-kernels")  # nor the user's kernels
    done = subprocess.run([str(python), "-m", "sampan", "path", "--manifest", str(manifest), "run",
                           "--output", str(tmp_path / "runs")], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "Lesson 'a' needs the Jupyter kernel 'sampan', which is not installed here" in done.stderr
    assert "HINT: run `sampan kernel install`" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists()


def test_a_kernel_that_dies_in_cell_3_is_reported_at_cell_3(planted, tmp_path):
    planted.notebook("01-beginner/a.ipynb", "x = 1", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
                     "print('never runs')")
    manifest = planted.manifest([{"id": "beginner", "lessons": [{"id": "a", "notebook": "01-beginner/a.ipynb"}]}])
    report = sampan.path.run(lesson="a", manifest=manifest, output_dir=tmp_path / "runs", progress=False)
    result = report.result("a")
    assert result.status == "failed" and result.error["ename"] == "DeadKernelError"
    # markdown 0, parameters 1, `x = 1` 2, the kill 3
    assert result.error["cell_index"] == 3 and "SIGKILL" in result.error["source"]
    assert result.reason.startswith("DeadKernelError in cell 3 (counting from 0): Kernel died. "
                                    "HINT: the kernel process ended")
    assert "before any cell ran" not in result.reason
