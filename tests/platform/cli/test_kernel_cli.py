"""`sampan kernel install`: the "Sampan (Python 3)" spec bound to this interpreter."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from PIL import Image

from sampan.cli import main
from sampan.cli.kernel import kernel_spec, spec_source_dir


def test_repository_spec_has_its_logos_and_names_the_kernel():
    source = spec_source_dir()
    assert source is not None and source.name == "sampan"
    raw = json.loads((source / "kernel.json").read_text())
    assert raw["display_name"] == "Sampan (Python 3)" and raw["language"] == "python"
    assert "{connection_file}" in raw["argv"]
    for size in (32, 64):
        with Image.open(source / f"logo-{size}x{size}.png") as img:
            assert img.size == (size, size) and img.format == "PNG"


def test_spec_is_bound_to_the_current_interpreter(tmp_path):
    spec = kernel_spec(threads=3, data_dir=str(tmp_path / "sampan-x"))
    assert spec["argv"][:3] == [sys.executable, "-m", "ipykernel_launcher"]
    assert spec["env"] == {"OMP_NUM_THREADS": "3", "SAMPAN_DATA": str(tmp_path / "sampan-x")}
    assert kernel_spec()["env"] == {}  # SAMPAN_DATA and OMP_NUM_THREADS pass through by default


def test_install_into_a_prefix(tmp_path, capsys):
    assert main(["kernel", "install", "--prefix", str(tmp_path), "--threads", "2"]) == 0
    dest = tmp_path / "share" / "jupyter" / "kernels" / "sampan"
    spec = json.loads((dest / "kernel.json").read_text())
    assert spec["argv"][0] == sys.executable and spec["env"] == {"OMP_NUM_THREADS": "2"}
    assert (dest / "logo-64x64.png").is_file() and (dest / "logo-32x32.png").is_file()
    assert "Sampan (Python 3)" in capsys.readouterr().out
    from jupyter_client.kernelspec import KernelSpecManager

    ksm = KernelSpecManager(kernel_dirs=[str(dest.parent)])
    assert ksm.get_kernel_spec("sampan").display_name == "Sampan (Python 3)"


def test_bad_thread_count_and_missing_action(tmp_path, capsys):
    assert main(["kernel", "install", "--prefix", str(tmp_path), "--threads", "0"]) == 2
    assert "Expected `--threads` to be a positive int. Received: --threads=0" in capsys.readouterr().err
    assert main(["kernel"]) == 2


def test_install_inside_a_virtualenv_goes_into_that_environment(tmp_path):
    """Not system-wide (the old default): a real venv, whose python runs `sampan kernel install` with no option."""
    import site
    import subprocess
    import venv

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    packages = [p for p in site.getsitepackages() if p.endswith("site-packages")]
    code = ("import site, sys; [site.addsitedir(p) for p in sys.argv[1:]]; "
            "from sampan.cli import main; raise SystemExit(main(['kernel', 'install']))")
    jupyter_home = tmp_path / "jupyter-user"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "JUPYTER_DATA_DIR": str(jupyter_home)}
    proc = subprocess.run([str(python), "-c", code, *packages], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    dest = env_dir / "share" / "jupyter" / "kernels" / "sampan"
    assert f"in {dest}" in proc.stdout, proc.stdout
    spec = json.loads((dest / "kernel.json").read_text())
    assert spec["argv"][0] == str(python)
    assert not (jupyter_home / "kernels").exists()


def test_install_target_outside_a_virtualenv_is_the_users_folder(monkeypatch):
    from sampan.cli import kernel

    monkeypatch.setattr(kernel, "_in_virtualenv", lambda: False)
    assert kernel.install_target() == (True, None)
    assert kernel.install_target(sys_prefix=True) == (False, sys.prefix)
    assert kernel.install_target(prefix="/opt/x") == (False, "/opt/x")
    monkeypatch.setattr(kernel, "_in_virtualenv", lambda: True)
    assert kernel.install_target() == (False, sys.prefix)


def test_conda_prefix_counts_only_when_it_is_this_pythons_environment(monkeypatch, tmp_path):
    """A conda base auto-activated in the shell says nothing about a system Python: its spec goes to the user."""
    from sampan.cli import kernel

    here, other = tmp_path / "python", tmp_path / "conda"
    here.mkdir(), other.mkdir()
    monkeypatch.setattr(sys, "prefix", str(here))
    monkeypatch.setattr(sys, "base_prefix", str(here))
    monkeypatch.setenv("CONDA_PREFIX", str(other))
    assert kernel.install_target() == (True, None)
    monkeypatch.setenv("CONDA_PREFIX", str(tmp_path / "gone"))
    assert kernel.install_target() == (True, None)
    monkeypatch.setenv("CONDA_PREFIX", str(here) + "/")
    assert kernel.install_target() == (False, str(here))


def test_prefix_is_expanded_and_an_unusable_one_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["kernel", "install", "--prefix=~/kp"]) == 0
    assert (tmp_path / "home" / "kp" / "share" / "jupyter" / "kernels" / "sampan" / "kernel.json").is_file()
    assert not (work / "~").exists()
    capsys.readouterr()
    (work / "afile").write_text("")
    assert main(["kernel", "install", "--prefix", "afile"]) == 2
    err = capsys.readouterr().err
    assert "Expected `--prefix` to be a folder this user can write" in err and "Received: --prefix='afile'" in err
    assert "HINT:" in err and "Traceback" not in err


def test_a_data_dir_that_is_a_file_is_refused(tmp_path, capsys):
    (tmp_path / "afile").write_text("")
    assert main(["kernel", "install", "--prefix", str(tmp_path / "p"), "--data-dir", str(tmp_path / "afile")]) == 2
    err = capsys.readouterr().err
    assert "Expected `--data-dir` to be a folder (it is a file)" in err and "HINT:" in err
    assert not (tmp_path / "p").exists()


@pytest.fixture
def kernel_paths(tmp_path, monkeypatch):
    """Jupyter's kernel search path made of two folders, this environment's and the user's, with sys.prefix and
    the user's data folder moved under tmp_path (nothing is written to the real environment)."""
    import jupyter_client.kernelspec as kernelspec

    env, user = tmp_path / "env", tmp_path / "user"
    monkeypatch.setattr(sys, "prefix", str(env))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(user))
    order = [str(env / "share" / "jupyter" / "kernels"), str(user / "kernels")]
    monkeypatch.setattr(kernelspec, "jupyter_path", lambda *parts: list(order))
    return env / "share" / "jupyter" / "kernels" / "sampan", user / "kernels" / "sampan", order


def test_ensure_kernel_installs_where_kernel_install_would(kernel_paths, monkeypatch, capsys):
    from sampan.cli import _servers, kernel

    in_env, in_user, _ = kernel_paths
    monkeypatch.setattr(kernel, "_in_virtualenv", lambda: False)  # a system Python: the user's folder, not sys.prefix
    _servers.ensure_kernel()
    assert json.loads((in_user / "kernel.json").read_text())["argv"][0] == sys.executable
    assert not in_env.exists()
    assert f"Installed the 'Sampan (Python 3)' kernel spec in {in_user}" in capsys.readouterr().err
    _servers.ensure_kernel()  # it runs this Python: left alone
    assert capsys.readouterr().err == ""


def stale_spec(folder: Path, python: str = "/opt/old-env/bin/python") -> None:
    folder.mkdir(parents=True)
    (folder / "kernel.json").write_text(json.dumps({"argv": [python, "-m", "ipykernel_launcher", "-f",
                                                             "{connection_file}"], "display_name": "old"}))


def test_ensure_kernel_replaces_a_spec_that_runs_another_python(kernel_paths, monkeypatch, capsys):
    from jupyter_client.kernelspec import KernelSpecManager

    from sampan.cli import _servers, kernel

    in_env, in_user, _ = kernel_paths
    stale_spec(in_user)  # left by an older environment; this venv's folder comes first on the path
    monkeypatch.setattr(kernel, "_in_virtualenv", lambda: True)
    _servers.ensure_kernel()
    err = capsys.readouterr().err
    assert f"kernel spec in {in_user} runs /opt/old-env/bin/python, not this Python ({sys.executable})" in err
    assert f"Installed the 'Sampan (Python 3)' kernel spec in {in_env}" in err and "HINT" not in err
    assert KernelSpecManager().get_kernel_spec("sampan").argv[0] == sys.executable


def test_ensure_kernel_says_when_a_stale_spec_still_comes_first(kernel_paths, monkeypatch, capsys):
    from sampan.cli import _servers, kernel

    in_env, in_user, order = kernel_paths
    order.reverse()  # the user's folder first (JUPYTER_PREFER_ENV_PATH=0)
    stale_spec(in_user, python=os.path.realpath(sys.executable) + "-old")
    monkeypatch.setattr(kernel, "_in_virtualenv", lambda: True)
    _servers.ensure_kernel()
    err = capsys.readouterr().err
    assert (in_env / "kernel.json").is_file()
    assert f"The 'sampan' kernel spec in {in_user} still comes first on Jupyter's kernel path" in err
    assert "HINT: remove that folder" in err


def test_ensure_kernel_replaces_a_spec_without_encrypted_channels(kernel_paths, monkeypatch, capsys):
    """An older Sampan's spec runs this Python but does not declare CurveZMQ: the servers' transport_encryption
    "auto" would leave its channels in the clear (tests/security/test_kernel_channels.py), so it is replaced."""
    from jupyter_client.kernelspec import KernelSpecManager

    from sampan.cli import _servers, kernel

    in_env, _, _ = kernel_paths
    stale_spec(in_env, python=sys.executable)
    monkeypatch.setattr(kernel, "_in_virtualenv", lambda: True)
    _servers.ensure_kernel()
    err = capsys.readouterr().err
    assert f"kernel spec in {in_env} does not declare encrypted channels" in err
    assert KernelSpecManager().get_kernel_spec("sampan").metadata["supported_encryption"] == ["curve"]
    _servers.ensure_kernel()  # now current: left alone
    assert capsys.readouterr().err == ""
