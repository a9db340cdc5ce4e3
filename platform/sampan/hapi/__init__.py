"""The high-level API: ``Model`` with prepare / fit / evaluate / predict (``paddle.Model``)."""
from sampan.hapi.model import Model
from sampan.hapi.summary import summary

__all__ = ["Model", "summary"]
