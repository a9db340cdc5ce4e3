"""The AMP NaN doctor: when the loss turns non-finite, find the module that produced it.

While training, the AMP precision plugin keeps only a reference to the last
batch's inputs (its ``convert_input`` hook, which the loop calls). When a loss is NaN or infinite it
runs that batch again, under the same autocast and then in fp32, with a forward
hook on every module (installed only for this diagnosis), and raises
:class:`AmpNonFiniteError` naming the first module whose output was not finite,
the loss-scale history and what to do.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch

from sampan.callbacks.terminate_on_nan import TerminateOnNaN
from sampan.errors import NonFiniteLossError


class AmpNonFiniteError(NonFiniteLossError):
    """A non-finite loss under AMP, diagnosed.

    Attributes:
        module: qualified name of the first module whose output was non-finite (``None`` when every module's
            output was finite, i.e. the loss function produced it).
        module_type: that module's class name.
        finite_in_fp32: whether the same batch gives finite outputs in fp32 (then AMP caused it).
        loss_scale_history: ``[(optimizer_step, scale), ...]`` where the scale changed.
        suggestion: the HINT text.
    """

    def __init__(self, message: str, *, epoch: int, step: int, value: float, module: str | None,
                 module_type: str | None, finite_in_fp32: bool | None, loss_scale_history: list,
                 suggestion: str):
        super().__init__(message, epoch=epoch, step=step, value=value)
        self.module, self.module_type, self.finite_in_fp32 = module, module_type, finite_in_fp32
        self.loss_scale_history, self.suggestion = loss_scale_history, suggestion


def _non_finite(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return value.is_floating_point() and not bool(torch.isfinite(value).all())
    if isinstance(value, (tuple, list)):
        return any(_non_finite(v) for v in value)
    if isinstance(value, dict):
        return any(_non_finite(v) for v in value.values())
    return False


@torch.no_grad()
def first_non_finite_module(network: torch.nn.Module, args: tuple, kwargs: dict,
                            context: Callable[[], contextlib.AbstractContextManager]) -> tuple[str, str] | None:
    """Runs ``network(*args, **kwargs)`` inside ``context()`` and returns ``(name, class)`` of the first
    module (in the order outputs were produced) whose output holds NaN or inf, or ``None``."""
    found: list[tuple[str, str]] = []
    names = {id(m): name or "<root>" for name, m in network.named_modules()}

    def hook(module, _inputs, output):
        if not found and _non_finite(output):
            found.append((names[id(module)], type(module).__name__))

    handles = [m.register_forward_hook(hook) for m in network.modules()]
    try:
        with context():
            network(*args, **kwargs)
    except Exception:  # the diagnosis must not hide the original problem
        pass
    finally:
        for h in handles:
            h.remove()
    return found[0] if found else None


class NanDoctor(TerminateOnNaN):
    """The NaN check under AMP: a :class:`~sampan.callbacks.TerminateOnNaN` whose error diagnoses the batch.
    ``Model.prepare(amp=...)`` makes it the fit's NaN check (``AmpConfig(doctor=False)``: the plain one).

    Args:
        precision: the AMP precision plugin (for its autocast, dtype, loss-scale history and last inputs).
        raise_error: raise (the default) rather than just set ``model.stop_training``.
    """

    def __init__(self, precision: Any, raise_error: bool = True):
        super().__init__(raise_error=raise_error)
        self.precision = precision

    def on_train_begin(self, logs=None):
        self.precision.last_inputs = None

    def on_train_end(self, logs=None):
        self.precision.last_inputs = None

    def on_exception(self, exception):
        self.precision.last_inputs = None  # the last batch is not kept alive

    def error(self, step: int, loss: float) -> AmpNonFiniteError:
        last, self.precision.last_inputs = self.precision.last_inputs, None
        return self.diagnose(step, loss, None if last is None else (tuple(last), {}))

    def diagnose(self, step: int, loss: float, last: tuple[tuple, dict] | None) -> AmpNonFiniteError:
        network, p = self.model.network, self.precision
        where, fp32_ok = None, None
        if last is not None:
            args, kwargs = last
            where = first_non_finite_module(network, args, kwargs, p.autocast)
            if where is not None:
                fp32_ok = first_non_finite_module(network, args, kwargs, contextlib.nullcontext) is None
        history = list(p.scale_history)
        amp_name = f"{str(p.dtype).replace('torch.', '')} {p.config.level}"
        lines = [f"The loss became {loss} at epoch {self.epoch + 1}, batch {step} (global step "
                 f"{self.model.global_step}) under AMP ({amp_name})."]
        if last is None:
            lines.append("The batch could not be replayed (no forward pass was captured).")
        elif where is None:
            lines.append("Every module's output was finite: the loss function itself produced the value.")
        else:
            lines.append(f"First non-finite output: module '{where[0]}' ({where[1]}); in fp32 the same batch "
                         f"is {'finite' if fp32_ok else 'also non-finite'}.")
        lines.append("Loss-scale history (optimizer step: scale): "
                     + (", ".join(f"{s}: {v:g}" for s, v in history) or "no change")
                     + f"; skipped steps: {p.skipped_steps}.")
        suggestion = self._suggest(where, fp32_ok, p)
        lines.append(f"HINT: {suggestion}")
        return AmpNonFiniteError("\n".join(lines), epoch=self.epoch, step=step, value=loss,
                                 module=where[0] if where else None, module_type=where[1] if where else None,
                                 finite_in_fp32=fp32_ok, loss_scale_history=history, suggestion=suggestion)

    @staticmethod
    def _suggest(where: tuple[str, str] | None, fp32_ok: bool | None, p: Any) -> str:
        if where is not None and fp32_ok:
            fixes = [f"keep that module in fp32 with amp=sampan.amp.AmpConfig(dtype={p.config.dtype!r}, "
                     f"custom_black_list=[{where[0]!r}])"]
            if p.dtype == torch.float16:
                fixes.append("use amp='bf16' (the range of fp32)")
            return "; or ".join(fixes) + "."
        return ("the problem is not AMP's: lower the learning rate, clip gradients with prepare(grad_clip=1.0), "
                "and check the inputs for NaN/inf" + ("; or use amp='bf16'." if p.dtype == torch.float16 else "."))
