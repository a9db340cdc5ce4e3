"""``ExperimentPanel``: sliders for learning rate, batch size and epochs that launch short fits and overlay
their curves."""
from __future__ import annotations

import html
from typing import Any, Callable, Sequence

import ipywidgets as W

from sampan_widgets._base import Drawn, Panel
from sampan_widgets._draw import COLORS, new_figure, to_png
from sampan_widgets._i18n import tr


def _check_arguments(make_model: Any, lr: Any, batch_sizes: Any, epochs: Any) -> None:
    """ExperimentPanel's arguments, each refused with a message naming it (not a slider's TraitError)."""
    from sampan.errors import bad_argument, is_number

    if not callable(make_model):
        raise ValueError(bad_argument("make_model", make_model, "a function lr -> a prepared sampan.Model",
                                      "pass the function itself, e.g. ExperimentPanel(make_model, train_set)"))
    ok = isinstance(lr, (tuple, list)) and len(lr) == 3 and all(is_number(v) and v > 0 for v in lr)
    if not (ok and lr[0] < lr[1] and lr[0] <= lr[2] <= lr[1]):
        raise ValueError(bad_argument("lr", lr, "(min, max, value): three numbers > 0 with min < max and the value "
                                      "between them", "pass lr=(1e-4, 1.0, 1e-2)"))
    sizes = list(batch_sizes) if isinstance(batch_sizes, (tuple, list, range)) else None
    if not sizes or not all(isinstance(b, int) and not isinstance(b, bool) and b >= 1 for b in sizes):
        raise ValueError(bad_argument("batch_sizes", batch_sizes, "a non-empty list of ints >= 1",
                                      "pass batch_sizes=(16, 32, 64)"))
    ints = isinstance(epochs, (tuple, list)) and len(epochs) == 3 and all(
        isinstance(e, int) and not isinstance(e, bool) for e in epochs)
    if not (ints and 1 <= epochs[0] <= epochs[2] <= epochs[1]):
        raise ValueError(bad_argument("epochs", epochs, "(min, max, value): three ints with 1 <= min <= value <= max",
                                      "pass epochs=(1, 10, 2)"))


class ExperimentPanel(Drawn):
    """Launches short fits from sliders and overlays every run's loss (and eval loss) per epoch.

    Args:
        make_model: ``make_model(lr) -> sampan.Model``, prepared with an optimizer at that learning rate.
        train_data, eval_data: passed to ``fit``.
        lr: ``(min, max, value)`` of the log slider; batch_sizes: choices; epochs: ``(min, max, value)``.
        fit_kwargs: more ``fit`` arguments (``num_iters``...).

    Example:
        >>> def make_model(lr):  # doctest: +SKIP
        ...     net = sampan.vision.models.LeNet()
        ...     model = sampan.Model(net)
        ...     model.prepare(torch.optim.Adam(net.parameters(), lr=lr), torch.nn.CrossEntropyLoss())
        ...     return model
        >>> ExperimentPanel(make_model, train_set, val_set)  # doctest: +SKIP
    """

    def __init__(self, make_model: Callable[[float], Any], train_data: Any, eval_data: Any = None, *,
                 lr: tuple[float, float, float] = (1e-4, 1.0, 1e-2), batch_sizes: Sequence[int] = (16, 32, 64, 128),
                 epochs: tuple[int, int, int] = (1, 10, 2), fit_kwargs: dict | None = None) -> None:
        import math

        _check_arguments(make_model, lr, batch_sizes, epochs)
        self._embedded = False
        self.make_model, self.train_data, self.eval_data = make_model, train_data, eval_data
        self.fit_kwargs = dict(fit_kwargs or {})
        self.runs: list[dict] = []
        self.lr = W.FloatLogSlider(value=lr[2], min=math.log10(lr[0]), max=math.log10(lr[1]), step=0.25,
                                   description=tr("learning rate"), readout_format=".1e")
        self.batch_size = W.Dropdown(options=list(batch_sizes), value=batch_sizes[min(1, len(batch_sizes) - 1)],
                                     description=tr("batch size"))
        self.epochs = W.IntSlider(value=epochs[2], min=epochs[0], max=epochs[1], description=tr("epochs"))
        self.run_button = W.Button(description=tr("run"), button_style="primary", icon="play")
        self.clear_button = W.Button(description=tr("clear"))
        self.status = W.HTML(tr("<i>choose settings and press run</i>"))
        self.image = W.Image(format="png")
        self.run_button.on_click(lambda _: self.run())
        self.clear_button.on_click(lambda _: self.clear())
        self._panel = Panel([W.HBox([self.lr, self.batch_size, self.epochs]),
                             W.HBox([self.run_button, self.clear_button, self.status]), self.image])
        self._panel.add_class("sampan-experiment")

    def run(self, *, lr: float | None = None, batch_size: int | None = None, epochs: int | None = None) -> Any:
        """One short fit with the sliders' values (or the given ones); returns its History."""
        lr = self.lr.value if lr is None else lr
        batch_size = self.batch_size.value if batch_size is None else batch_size
        epochs = self.epochs.value if epochs is None else epochs
        label = f"lr={lr:.1e} bs={batch_size} ep={epochs}"
        self.status.value = tr("running {label}…").format(label=html.escape(label))
        self.run_button.disabled = True
        try:
            model = self.make_model(lr)
            history = model.fit(self.train_data, self.eval_data, batch_size=batch_size, epochs=epochs,
                                verbose=0, **self.fit_kwargs)
        except Exception as exc:
            failed = tr("{label} failed: {error}").format(label=html.escape(label), error=html.escape(str(exc)))
            self.status.value = f'<span style="color:#b00">{failed}</span>'
            raise
        finally:
            self.run_button.disabled = False
        self.runs.append({"label": label, "lr": lr, "batch_size": batch_size, "epochs": epochs,
                          "history": history.to_dict()})
        last = {k: v[-1] for k, v in history.to_dict().items() if k != "epoch" and v}
        summary = " · ".join(f"{k} {v:.4g}" for k, v in last.items() if k != "lr")
        self.status.value = tr("{n} run(s); last: {label}: {summary}").format(
            n=len(self.runs), label=html.escape(label), summary=html.escape(summary))
        self._draw()
        return history

    def clear(self) -> None:
        self.runs.clear()
        self.image.value = b""
        self.status.value = tr("<i>cleared</i>")

    def _draw(self) -> None:
        fig = new_figure(6.4, 3.0)
        ax = fig.subplots()
        for i, run in enumerate(self.runs):
            h, color = run["history"], COLORS[i % len(COLORS)]
            epochs = [e + 1 for e in h["epoch"]]
            ax.plot(epochs, h["loss"], marker="o", color=color, label=f"{run['label']} {tr('train')}")
            if "eval_loss" in h:
                ax.plot(epochs, h["eval_loss"], marker="s", linestyle="--", color=color,
                        label=f"{run['label']} {tr('eval')}")
        ax.set_xlabel(tr("epoch"))
        ax.set_ylabel(tr("loss"))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        self.image.value = to_png(fig)
