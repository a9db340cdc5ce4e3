"""Callbacks for ``Model.fit`` / ``evaluate`` / ``predict`` (``paddle.callbacks``, Keras callbacks)."""
from sampan.callbacks.base import Callback, CallbackList
from sampan.callbacks.csv_logger import CSVLogger
from sampan.callbacks.early_stopping import EarlyStopping
from sampan.callbacks.history import History
from sampan.callbacks.lr_scheduler import LRScheduler
from sampan.callbacks.model_checkpoint import ModelCheckpoint
from sampan.callbacks.progress import ProgBarLogger, ProgressBar
from sampan.callbacks.terminate_on_nan import TerminateOnNaN
from sampan.callbacks.visualdl import VisualDL

__all__ = [
    "CSVLogger",
    "Callback",
    "CallbackList",
    "EarlyStopping",
    "History",
    "LRScheduler",
    "ModelCheckpoint",
    "ProgBarLogger",
    "ProgressBar",
    "TerminateOnNaN",
    "VisualDL",
]
