"""Shared plumbing: a box that runs cleanup when closed, display helpers and the kernel check."""
from __future__ import annotations

import base64
from typing import Any, Callable

import ipywidgets as W

from sampan.errors import bad_argument, is_number


class Panel(W.VBox):
    """A VBox that calls ``on_close`` callbacks (stop threads, drop references) when closed."""

    def __init__(self, children=(), *, on_close: Callable[[], None] | None = None, **kwargs: Any) -> None:
        super().__init__(children=list(children), **kwargs)
        self._on_close = on_close

    def close(self) -> None:
        callback, self._on_close = self._on_close, None
        if callback is not None:
            callback()
        for child in list(self.children):
            child.close()
        super().close()


def check_number(name: str, value: Any, *, fix: str, zero_ok: bool = False) -> float:
    """``value`` when it is a finite real number greater than 0 (at least 0 with ``zero_ok``), not a bool nor a
    string of digits; else a ValueError naming ``name``.

    Example:
        >>> from sampan_widgets._base import check_number
        >>> check_number("refresh_s", 2, fix="pass refresh_s=2")
        2
    """
    if not (is_number(value) and (value >= 0 if zero_ok else value > 0)):
        expected = "a number >= 0" if zero_ok else "a number greater than 0"
        raise ValueError(bad_argument(name, value, expected, fix))
    return value


def check_size(name: str, value: Any, default: int) -> float:
    """A chart's ``width`` or ``height``: a number of pixels greater than 0."""
    return check_number(name, value, fix=f"pass {name}={default} (pixels)")


def in_kernel() -> bool:
    """True inside a Jupyter kernel (JupyterLab, Voilà, nbclient/papermill), False in a script or a terminal."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def png_bundle(png: bytes) -> dict:
    return {"image/png": base64.b64encode(png).decode("ascii")}


class Drawn:
    """Mixin for objects that are both a ``sampan`` callback or tool and a displayable widget: ``.widget`` is
    the ipywidgets view; displaying the object displays it."""

    _panel: Panel

    @property
    def widget(self) -> Panel:
        """The ipywidgets view, to place in a layout (``VBox([live.widget, monitor.widget])``)."""
        self._embedded = True
        return self._panel

    def _repr_mimebundle_(self, **kwargs: Any):
        return self._panel._repr_mimebundle_(**kwargs)

    def close(self) -> None:
        """Closes the view (and stops whatever it runs)."""
        self._panel.close()
