"""binder/: requirements agree with pyproject.toml; postBuild installs Sampan and its kernel in a fresh venv."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sysconfig
import tomllib
import venv
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
BINDER = REPO / "binder"


def _requirements(lines) -> dict[str, str]:
    reqs = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        req = Requirement(line)
        reqs[canonicalize_name(req.name)] = str(req.specifier)
    return reqs


def _binder_links() -> list[tuple[str, str]]:
    """``(app, path)`` of each mybinder link in binder/README.md: ``lab/tree/<path>`` or ``voila/render/<path>``."""
    text = (BINDER / "README.md").read_text(encoding="utf-8")
    return re.findall(r"mybinder\.org/v2/gh/OWNER/REPO/HEAD\?urlpath=(lab/tree|voila/render)/([^`\s]+)", text)


def test_binder_links_open_the_single_language_courses_postbuild_builds():
    """notebooks/ holds the bilingual sources (every Markdown cell twice): the links open courses/<lang>/, built
    from them by postBuild as `sampan lab --lang` builds them; what each link opens has its source."""
    links = _binder_links()
    assert {app for app, _ in links} == {"lab/tree", "voila/render"}
    langs = set()
    for _, path in links:
        top, lang, rest = [*path.split("/", 2), "", ""][:3]
        assert top == "courses" and lang in ("en", "zh"), f"{path}: not a built course (courses/en or courses/zh)"
        assert (REPO / "notebooks" / rest).is_file(), path
        langs.add(lang)
    assert langs == {"en", "zh"}
    assert "build_course" in (BINDER / "postBuild").read_text()


def test_requirements_agree_with_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    wanted = _requirements(project["project"]["dependencies"])
    build = _requirements(project["build-system"]["requires"])
    text = (BINDER / "requirements.txt").read_text()
    binder = _requirements(text.splitlines())
    missing = {k: v for k, v in wanted.items() if k not in binder}
    assert not missing, f"binder/requirements.txt lacks {missing} from pyproject.toml"
    differ = {k: (binder[k], v) for k, v in wanted.items() if binder[k] != v}
    assert not differ, f"version specifiers differ (binder, pyproject): {differ}"
    extra = set(binder) - set(wanted) - set(build)
    assert not extra, f"binder/requirements.txt has packages pyproject.toml does not: {sorted(extra)}"
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in text  # CPU builds of torch
    assert (BINDER / "runtime.txt").read_text().strip().startswith("python-3.")


def test_postbuild_starts_with_set_e_and_is_executable():
    lines = [x for x in (BINDER / "postBuild").read_text().splitlines() if x.strip() and not x.startswith("#")]
    assert (BINDER / "postBuild").read_text().startswith("#!/bin/bash\n")
    assert lines[0] == "set -e"
    assert os.access(BINDER / "postBuild", os.X_OK)


def test_postbuild_runs_in_a_fresh_virtual_environment(tmp_path):
    # a copy of the repository, as repo2docker sees it
    repo = tmp_path / "repo"
    repo.mkdir()
    ignore = shutil.ignore_patterns(".venv", "*.egg-info", "__pycache__", "runs", ".git", "build")
    for name in ("pyproject.toml", "README.md", "platform", "widgets", "kernels", "notebooks", "datasets", "binder"):
        src = REPO / name
        (shutil.copytree(src, repo / name, ignore=ignore) if src.is_dir() else shutil.copy2(src, repo / name))
    # a fresh venv; the dependencies repo2docker installs from requirements.txt are lent from ours (offline)
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    site = subprocess.check_output([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   text=True).strip()
    Path(site, "_lent_requirements.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # requirements.txt asks for setuptools>=68: drop the older one ensurepip put in the venv
    for old in [*Path(site).glob("setuptools"), *Path(site).glob("setuptools-*.dist-info")]:
        shutil.rmtree(old)  # only inside the fresh venv: never touch the lent packages
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON", "JUPYTER"))}
    env.update(PATH=f"{env_dir / 'bin'}:{env['PATH']}", PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               HOME=str(tmp_path / "home"))
    done = subprocess.run(["bash", "binder/postBuild"], cwd=repo, env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    where = subprocess.check_output([str(py), "-c", "import sampan; print(sampan.__file__)"], env=env, text=True)
    assert where.strip() == str(repo / "platform" / "sampan" / "__init__.py")
    spec = json.loads((env_dir / "share" / "jupyter" / "kernels" / "sampan" / "kernel.json").read_text())
    assert spec["argv"][0] == str(py) and spec["display_name"] == "Sampan (Python 3)"
    assert "voila" in done.stdout
    # the links open built notebooks, each in one language (the sources show every Markdown cell twice)
    for _, path in _binder_links():
        lang = path.split("/")[1]
        nb = json.loads((repo / path).read_text(encoding="utf-8"))
        cell_langs = {c.get("metadata", {}).get("sampan", {}).get("lang") for c in nb["cells"]}
        assert cell_langs <= {lang, None} and lang in cell_langs, (path, cell_langs)
        assert nb["metadata"]["sampan"]["language"] == lang
