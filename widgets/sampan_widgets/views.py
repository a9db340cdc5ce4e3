"""Smaller views: a model summary, a dataset browser and a confusion matrix."""
from __future__ import annotations

import html
import math
from typing import Any, Sequence

import ipywidgets as W
import numpy as np
import torch

from sampan_widgets._base import Drawn, Panel
from sampan_widgets._draw import new_figure, to_png
from sampan_widgets._i18n import tr


class SummaryView(Drawn):
    """``sampan.summary`` as a table: layers, output shapes, parameters, FLOPs.

    Args:
        model: a ``sampan.Model`` or an ``nn.Module``.
        input_size: one input shape such as ``(1, 1, 28, 28)``; optional for a Model with ``inputs``.

    Example:
        >>> import torch
        >>> from sampan_widgets import SummaryView
        >>> view = SummaryView(torch.nn.Linear(4, 2), (1, 4))
        >>> view.info["total_params"]
        10
    """

    def __init__(self, model: Any, input_size: Any = None, dtypes: Any = None) -> None:
        from sampan.hapi.summary import summary

        self._embedded = False
        if isinstance(model, torch.nn.Module):
            self.info = summary(model, input_size, dtypes, print_table=False)
        else:
            self.info = summary(model.network, input_size, dtypes, input_spec=model.inputs, print_table=False)
        self.html = W.HTML(self._html())
        self._panel = Panel([self.html])
        self._panel.add_class("sampan-summary")

    def _html(self) -> str:
        i = self.info
        rows = "".join(f"<tr><td>{html.escape(l['name'])}</td><td>{html.escape(l['type'])}</td>"
                       f"<td>{html.escape(str(l['output_shape']))}</td><td>{l['params']:,}</td><td>{l['flops']:,}</td></tr>"
                       for l in i["layers"])
        head = "".join(f"<th>{tr(h)}</th>" for h in ("layer", "type", "output shape", "params", "FLOPs"))
        totals = tr("total params <b>{total}</b> · trainable {trainable} · FLOPs per forward {flops}").format(
            total=f"{i['total_params']:,}", trainable=f"{i['trainable_params']:,}", flops=f"{i['flops']:,}")
        return (f'<table class="sampan-summary-table" style="font:12px monospace"><tr>{head}</tr>{rows}</table>'
                f"<p>{totals}</p>")


def _as_image(x: Any) -> np.ndarray:
    arr = x.detach().cpu().float().numpy() if isinstance(x, torch.Tensor) else np.asarray(x, dtype=np.float32)
    if arr.ndim == 3 and arr.shape[0] in (1, 3, 4) and arr.shape[-1] not in (1, 3, 4):
        arr = arr.transpose(1, 2, 0)  # CHW -> HWC
    if arr.ndim == 3 and arr.shape[-1] == 1:
        arr = arr[..., 0]
    lo, hi = float(arr.min()), float(arr.max())
    return (arr - lo) / (hi - lo) if hi > lo else arr * 0


class DatasetBrowser(Drawn):
    """A grid of samples with their labels, one page at a time (image datasets), or a table (text datasets).

    Args:
        dataset: items ``(sample, label)``; samples are image tensors ``[C, H, W]`` / arrays, or strings.
        classes: label names (default: ``dataset.classes`` when present).
        per_page: samples per page; columns: grid columns.

    Example:
        >>> import sampan
        >>> from sampan_widgets import DatasetBrowser
        >>> browser = DatasetBrowser(sampan.data.load_dataset("digits"), per_page=24)
    """

    def __init__(self, dataset: Any, *, classes: Sequence[str] | None = None, per_page: int = 24,
                 columns: int = 8) -> None:
        if not isinstance(per_page, int) or per_page < 1:
            raise ValueError(f"Expected `per_page` to be an int >= 1. Received: per_page={per_page!r}.")
        from sampan.errors import check_int

        check_int("columns", columns, fix="pass columns=8 (pictures per row)")
        self._embedded = False
        self.dataset, self.per_page, self.columns = dataset, per_page, columns
        self.classes = list(classes) if classes is not None else list(getattr(dataset, "classes", []) or [])
        self.pages = max(1, math.ceil(len(dataset) / per_page))
        self.page = 0
        self.prev_button = W.Button(description=tr("◀ previous"))
        self.next_button = W.Button(description=tr("next ▶"))
        self.label = W.Label()
        self.image = W.Image(format="png")
        self.text = W.HTML()
        self.prev_button.on_click(lambda _: self.show_page(self.page - 1))
        self.next_button.on_click(lambda _: self.show_page(self.page + 1))
        self._panel = Panel([W.HBox([self.prev_button, self.label, self.next_button]), self.image, self.text])
        self._panel.add_class("sampan-dataset-browser")
        self.show_page(0)

    def _name(self, label: Any) -> str:
        value = int(label) if isinstance(label, (int, np.integer)) or (
            isinstance(label, torch.Tensor) and label.numel() == 1) else label
        return self.classes[value] if isinstance(value, int) and 0 <= value < len(self.classes) else str(value)

    def show_page(self, page: int) -> None:
        self.page = min(max(page, 0), self.pages - 1)
        start = self.page * self.per_page
        items = [self.dataset[i] for i in range(start, min(start + self.per_page, len(self.dataset)))]
        self.label.value = tr("page {page} / {pages} (samples {first}–{last} of {count})").format(
            page=self.page + 1, pages=self.pages, first=start, last=start + len(items) - 1, count=len(self.dataset))
        self.prev_button.disabled, self.next_button.disabled = self.page == 0, self.page == self.pages - 1
        if items and isinstance(items[0][0], str):
            rows = "".join(f"<tr><td>{start + k}</td><td>{html.escape(self._name(y))}</td>"
                           f"<td>{html.escape(x[:200])}</td></tr>" for k, (x, y) in enumerate(items))
            head = f"<tr><th>#</th><th>{tr('label')}</th><th>{tr('text')}</th></tr>"
            self.text.value = f'<table style="font-size:12px">{head}{rows}</table>'
            self.image.layout.display = "none"
            return
        self.image.value = self._grid(items)

    def _grid(self, items: list) -> bytes:
        cols = min(self.columns, len(items)) or 1
        rows = math.ceil(len(items) / cols)
        fig = new_figure(1.1 * cols, 1.25 * rows, dpi=80)
        for k, (x, y) in enumerate(items):
            ax = fig.add_subplot(rows, cols, k + 1)
            img = _as_image(x)
            ax.imshow(img, cmap="gray" if img.ndim == 2 else None)
            ax.set_title(self._name(y), fontsize=8)
            ax.axis("off")
        return to_png(fig)


class ConfusionMatrixView(Drawn):
    """A confusion matrix as a heat map with counts, optionally normalized per true class.

    Args:
        y_true, y_pred: integer labels (sequences, arrays or tensors).
        classes: class names; num_classes: when ``classes`` is not given.

    Example:
        >>> from sampan_widgets import ConfusionMatrixView
        >>> view = ConfusionMatrixView([0, 1, 1], [0, 1, 0], classes=["cat", "dog"])
        >>> view.matrix.tolist()
        [[1, 0], [1, 1]]
    """

    def __init__(self, y_true: Any, y_pred: Any, *, classes: Sequence[str] | None = None,
                 num_classes: int | None = None, normalize: bool = False) -> None:
        t = np.asarray(torch.as_tensor(y_true).cpu()).astype(np.int64).ravel()
        p = np.asarray(torch.as_tensor(y_pred).cpu()).astype(np.int64).ravel()
        if t.shape != p.shape:
            raise ValueError(f"Expected `y_true` and `y_pred` to have the same length. Received: {len(t)} and {len(p)}.")
        n = len(classes) if classes is not None else (num_classes or int(max(t.max(initial=0), p.max(initial=0))) + 1)
        self._embedded = False
        self.classes = list(classes) if classes is not None else [str(i) for i in range(n)]
        self.matrix = np.zeros((n, n), dtype=np.int64)
        np.add.at(self.matrix, (t, p), 1)
        self.accuracy = float(np.trace(self.matrix) / max(self.matrix.sum(), 1))
        self.normalize = W.ToggleButton(value=normalize, description=tr("normalize rows"))
        self.image = W.Image(format="png")
        self.caption = W.HTML(tr("accuracy <b>{accuracy:.2%}</b> on {count} samples").format(
            accuracy=self.accuracy, count=int(self.matrix.sum())))
        self.normalize.observe(lambda _: self._draw(), names="value")
        self._panel = Panel([self.normalize, self.image, self.caption])
        self._panel.add_class("sampan-confusion")
        self._draw()

    @classmethod
    def from_model(cls, model: Any, data: Any, *, batch_size: int = 64, **kwargs: Any) -> "ConfusionMatrixView":
        """Predicts ``data`` (items ``(inputs, label)``) with a ``sampan.Model`` and compares with its labels."""
        logits = model.predict(data, batch_size=batch_size, verbose=0)[0]
        labels = torch.as_tensor([int(data[i][-1]) for i in range(len(data))])
        kwargs.setdefault("classes", getattr(data, "classes", None))
        return cls(labels, torch.as_tensor(logits).argmax(-1), **kwargs)

    def _draw(self) -> None:
        m = self.matrix.astype(float)
        if self.normalize.value:
            m = m / np.maximum(m.sum(axis=1, keepdims=True), 1)
        n = len(self.classes)
        fig = new_figure(1.0 + 0.45 * n, 0.8 + 0.45 * n)
        ax = fig.subplots()
        ax.imshow(m, cmap="Blues")
        ax.set_xticks(range(n), self.classes, rotation=45, fontsize=8)
        ax.set_yticks(range(n), self.classes, fontsize=8)
        ax.set_xlabel(tr("predicted"))
        ax.set_ylabel(tr("true"))
        for i in range(n):
            for j in range(n):
                text = f"{m[i, j]:.2f}" if self.normalize.value else f"{int(m[i, j])}"
                ax.text(j, i, text, ha="center", va="center", fontsize=7,
                        color="white" if m[i, j] > m.max() / 2 else "black")
        self.image.value = to_png(fig)
