"""`sampan kernel install`: the "Sampan (Python 3)" spec bound to this interpreter."""
from __future__ import annotations

import json
import sys

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
    assert "Expected `threads` to be a positive int. Received: threads=0" in capsys.readouterr().err
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
