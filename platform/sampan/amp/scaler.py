"""``GradScaler`` (``paddle.amp.GradScaler`` names on ``torch.amp.GradScaler``) and ``decorate`` (O2).

``decorate`` casts a network's parameters to half precision (normalisation
layers stay fp32) and points the optimizer at fp32 *master* copies: the
optimizer updates the fp32 copies, which are copied back into the half
parameters after each step, so small updates are not lost to rounding.
Step hooks on the optimizer move the half gradients onto the masters before
``optimizer.step()`` and copy the masters back after it, so a plain
``optimizer.step()`` trains (Paddle's bf16 O2 recipe, no scaler).
:class:`GradScaler` moves the gradients itself before it unscales (the hooks
then find nothing left to move), so ``scaler.step(optimizer)`` works unchanged.
"""
from __future__ import annotations

from typing import Any

import torch

from sampan.amp.autocast import as_dtype, check_level
from sampan.errors import bad_argument

_MASTERS = "_sampan_master_pairs"
_NORMS = (torch.nn.modules.batchnorm._NormBase, torch.nn.LayerNorm, torch.nn.GroupNorm)


def _checked(name: str, value: Any, paddle_name: str, paddle_value: Any, ok: Any, expected: str, fix: str) -> Any:
    """The torch-named setting when given, else Paddle's; an error naming whichever was passed when it is bad."""
    name, value = (name, value) if value is not None else (paddle_name, paddle_value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok(value):
        raise ValueError(bad_argument(name, value, expected, f"pass e.g. {name}={fix}"))
    return value


class GradScaler(torch.amp.GradScaler):
    """Dynamic loss scaling: ``torch.amp.GradScaler`` that also accepts Paddle's argument names.

    Args:
        enable: Paddle's name for ``enabled``.
        init_loss_scaling, incr_ratio, decr_ratio, incr_every_n_steps: Paddle's names for ``init_scale``,
            ``growth_factor``, ``backoff_factor``, ``growth_interval``.
        device: ``"cuda"`` or ``"cpu"`` (defaults to CUDA when present).
        decr_every_n_nan_or_inf: only ``1`` (torch backs off at every overflow).
        use_dynamic_loss_scaling: only ``True``.

    Example:
        >>> from sampan.amp import GradScaler
        >>> scaler = GradScaler(init_loss_scaling=1024, device="cpu")
        >>> scaler.get_scale()
        1024.0
    """

    def __init__(self, enable: bool = True, init_loss_scaling: float = 2.0**16, incr_ratio: float = 2.0,
                 decr_ratio: float = 0.5, incr_every_n_steps: int = 2000, decr_every_n_nan_or_inf: int = 1,
                 use_dynamic_loss_scaling: bool = True, *, device: str | None = None, enabled: bool | None = None,
                 init_scale: float | None = None, growth_factor: float | None = None,
                 backoff_factor: float | None = None, growth_interval: int | None = None):
        if decr_every_n_nan_or_inf != 1:
            raise ValueError(bad_argument("decr_every_n_nan_or_inf", decr_every_n_nan_or_inf,
                                          "1 (torch.amp.GradScaler backs off at every overflow)"))
        if not use_dynamic_loss_scaling:
            raise ValueError(bad_argument("use_dynamic_loss_scaling", use_dynamic_loss_scaling, "True",
                                          "torch.amp.GradScaler always scales dynamically; use amp='bf16', "
                                          "which needs no loss scaling"))
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        try:
            torch.device(device)
        except (RuntimeError, TypeError):
            raise ValueError(bad_argument("device", device, '"cuda" or "cpu"',
                                          'Paddle\'s "gpu" is torch\'s "cuda": pass device="cuda"')) from None
        scale = _checked("init_scale", init_scale, "init_loss_scaling", init_loss_scaling,
                         lambda v: v > 0, "a number > 0", "2.0 ** 16 (the default)")
        growth = _checked("growth_factor", growth_factor, "incr_ratio", incr_ratio,
                          lambda v: v > 1, "a number > 1", "2.0 (the default)")
        backoff = _checked("backoff_factor", backoff_factor, "decr_ratio", decr_ratio,
                           lambda v: 0 < v < 1, "a number in (0, 1)", "0.5 (the default)")
        interval = _checked("growth_interval", growth_interval, "incr_every_n_steps", incr_every_n_steps,
                            lambda v: isinstance(v, int) and v >= 1, "an int >= 1", "2000 (the default)")
        super().__init__(device, init_scale=float(scale), growth_factor=growth, backoff_factor=backoff,
                         growth_interval=interval, enabled=enable if enabled is None else enabled)

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        master_grads_from_model(optimizer)
        super().unscale_(optimizer)

    def step(self, optimizer: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
        master_grads_from_model(optimizer)
        result = super().step(optimizer, *args, **kwargs)
        model_from_masters(optimizer)
        return result

    # Paddle spellings
    def minimize(self, optimizer: torch.optim.Optimizer, scaled_loss: torch.Tensor | None = None) -> None:
        """``scaler.minimize(optimizer, scaled)``: step and update (the backward pass is already done)."""
        self.step(optimizer)
        self.update()

    def get_loss_scaling(self) -> float:
        return float(self.get_scale())

    def is_enable(self) -> bool:
        return self.is_enabled()


def master_grads_from_model(optimizer: torch.optim.Optimizer) -> None:
    """After ``decorate``: moves each half parameter's gradient onto its fp32 master (once per step: a second
    call finds no half gradient left and changes nothing)."""
    pairs = getattr(optimizer, _MASTERS, None)
    if not pairs:
        return
    for half, master in pairs:
        if half.grad is not None:
            master.grad = half.grad.to(torch.float32)
            half.grad = None


@torch.no_grad()
def model_from_masters(optimizer: torch.optim.Optimizer) -> None:
    """After ``decorate``: copies the updated fp32 masters back into the half parameters."""
    for half, master in getattr(optimizer, _MASTERS, None) or ():
        half.copy_(master)


def _half_parameters(network: torch.nn.Module, dtype: torch.dtype) -> None:
    keep = {id(p) for m in network.modules() if isinstance(m, _NORMS) for p in m.parameters(recurse=False)}
    for p in network.parameters():
        if p.is_floating_point() and id(p) not in keep:
            p.data = p.data.to(dtype)


def _attach_masters(optimizer: torch.optim.Optimizer, network: torch.nn.Module) -> None:
    half_ids = {id(p) for p in network.parameters() if p.dtype in (torch.float16, torch.bfloat16)}
    pairs = getattr(optimizer, _MASTERS, None) or []
    for group in optimizer.param_groups:
        for i, p in enumerate(group["params"]):
            if id(p) in half_ids:
                master = p.detach().to(torch.float32).requires_grad_(True)
                group["params"][i] = master
                pairs.append((p, master))
    setattr(optimizer, _MASTERS, pairs)
    # once per optimizer, however many networks (a copied optimizer has lost torch's hooks: add them again)
    if pairs and _before_step not in optimizer._optimizer_step_pre_hooks.values():
        optimizer.register_step_pre_hook(_before_step)
        optimizer.register_step_post_hook(_after_step)


def _before_step(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
    master_grads_from_model(optimizer)


def _after_step(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
    model_from_masters(optimizer)


def master_state(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [m.detach().clone() for _, m in getattr(optimizer, _MASTERS, None) or ()]


@torch.no_grad()
def load_master_state(optimizer: torch.optim.Optimizer, masters: list[torch.Tensor]) -> None:
    pairs = getattr(optimizer, _MASTERS, None) or ()
    if masters and len(masters) == len(pairs):
        for (_, master), saved in zip(pairs, masters):
            master.copy_(saved)
    else:  # no saved masters: start them from the (loaded) half weights
        for half, master in pairs:
            master.copy_(half)


def decorate(models: Any, optimizers: Any = None, level: str = "O2", dtype: Any = "float16",
             master_weight: bool | None = None, save_dtype: Any = None) -> Any:
    """Casts parameters to half precision for O2 training (``paddle.amp.decorate``).

    Normalisation layers keep fp32 parameters. With an optimizer and ``master_weight`` (the default),
    the optimizer steps fp32 master copies: its step hooks move the half gradients onto them before
    each ``optimizer.step()`` and copy the updated weights back after it, so bfloat16 trains with a
    plain ``optimizer.step()`` as in Paddle. For float16 step through :class:`GradScaler` (or
    ``Model.prepare(amp=...)``); ``torch.amp.GradScaler`` would unscale the masters before their
    gradients arrive.

    Args:
        models: an ``nn.Module`` or a list of them.
        optimizers: an optimizer (or list) over those parameters, or ``None``.
        level: ``"O2"`` casts; ``"O1"`` returns everything unchanged.
        dtype: ``"float16"`` or ``"bfloat16"``.
        master_weight: keep fp32 master weights (``None`` means yes).
        save_dtype: not supported (checkpoints hold the parameters' own dtype).

    Returns:
        ``models`` when ``optimizers`` is None, else ``(models, optimizers)``.

    Example:
        >>> import torch
        >>> from sampan.amp import decorate
        >>> net = torch.nn.Linear(4, 4)
        >>> net, opt = decorate(net, torch.optim.SGD(net.parameters(), 0.1), dtype="bfloat16")
        >>> net.weight.dtype, opt.param_groups[0]["params"][0].dtype
        (torch.bfloat16, torch.float32)
    """
    check_level(level)
    low = as_dtype(dtype)
    if save_dtype is not None:
        raise ValueError(bad_argument("save_dtype", save_dtype, "None", "cast the state_dict yourself"))
    model_list = list(models) if isinstance(models, (list, tuple)) else [models]
    opt_list = [] if optimizers is None else list(optimizers) if isinstance(optimizers, (list, tuple)) else [optimizers]
    for m in model_list:
        if not isinstance(m, torch.nn.Module):
            raise TypeError(bad_argument("models", m, "an nn.Module or a list of them"))
    if level == "O2":
        for m in model_list:
            _half_parameters(m, low)
        if master_weight is not False:
            for opt in opt_list:
                for m in model_list:
                    _attach_masters(opt, m)
    return models if optimizers is None else (models, optimizers)
