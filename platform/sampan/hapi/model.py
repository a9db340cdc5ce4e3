"""``sampan.Model``: ``paddle.Model``'s prepare / fit / evaluate / predict around an ordinary ``nn.Module``."""
from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from sampan.callbacks.base import Callback, CallbackList
from sampan.callbacks.history import History
from sampan.callbacks.model_checkpoint import ModelCheckpoint
from sampan.callbacks.progress import ProgressBar
from sampan.callbacks.terminate_on_nan import TerminateOnNaN
from sampan.errors import SampanError, bad_argument, check_int, first_line, is_number
from sampan.hapi import _guards
from sampan.hapi import checkpoint as ckpt
from sampan.hapi import loop
from sampan.hapi.metrics import MetricSet, as_metrics
from sampan.amp.precision import PrecisionPlugin
from sampan.distributed.base import Strategy
from sampan.spec import InputSpec, as_specs


def resolve_device(device: Any) -> torch.device:
    """``None`` -> CUDA when present, else CPU; accepts ``"cpu"``, ``"cuda:1"``, Paddle's ``"gpu"``."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if isinstance(device, str):
        device = device.replace("gpu", "cuda")
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(bad_argument("device", device, "'cpu', 'cuda', 'cuda:N' or a torch.device")) from exc
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(bad_argument("device", str(device), "a device this machine has",
                                      "no CUDA GPU is visible here: use device='cpu' or leave device=None"))
    return device


class Model:
    """A trainable wrapper of an ``nn.Module`` with Paddle's high-level API.

    Args:
        network: any ``torch.nn.Module``; it stays an ordinary module (``model.network``).
        inputs: ``InputSpec`` (or list) of the network's inputs; batches are checked against
            it and ``sampan.jit`` uses it to export. Optional.
        labels: ``InputSpec`` (or list) of the labels. Optional.

    Example:
        >>> import torch, sampan
        >>> net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 10))
        >>> model = sampan.Model(net, inputs=sampan.InputSpec([None, 1, 8, 8], "float32", "image"))
        >>> model.prepare(torch.optim.Adam(net.parameters(), 1e-3), torch.nn.CrossEntropyLoss(),
        ...               sampan.metric.Accuracy())
        Model(Sequential, prepared=True, epoch=0)
    """

    # What the loop reads lives in one loop.LoopState (self._loop), built by prepare; these are views of it.
    device = loop.StateField()
    inputs = loop.StateField()
    labels = loop.StateField()
    _train_net = loop.StateField()
    _eval_net = loop.StateField()
    _optimizer = loop.StateField()
    _loss = loop.StateField()
    _precision = loop.StateField()
    _strategy = loop.StateField()
    _accumulate_steps = loop.StateField()
    _grad_clip = loop.StateField()
    _n_inputs = property(lambda self: self._loop.n_inputs)
    _n_labels = property(lambda self: self._loop.n_labels)

    def __init__(self, network: torch.nn.Module, inputs: InputSpec | Sequence[InputSpec] | None = None,
                 labels: InputSpec | Sequence[InputSpec] | None = None):
        if not isinstance(network, torch.nn.Module):
            fix = (f"create the network first: Model({network.__name__}(...)), not the class"
                   if isinstance(network, type) else "wrap your function in an nn.Module subclass")
            raise TypeError(bad_argument("network", network, "a torch.nn.Module", fix))
        self.network = network
        self._loop = loop.LoopState(train_net=network, eval_net=network)
        self.inputs = as_specs(inputs, "inputs")
        self.labels = as_specs(labels, "labels")
        self.stop_training = False
        self.epoch = 0
        self.global_step = 0
        self.history: History | None = None
        self._prepared = False
        self._metrics: list = []
        self._callbacks = CallbackList()
        self._pending_callback_states: list | None = None
        self._seen_inputs: list[InputSpec] | None = None  # the first batch's specs, for save(training=False)
        self._input_hook: Any = None

    # ------------------------------------------------------------------ prepare
    def prepare(self, optimizer: torch.optim.Optimizer | None = None, loss: Callable | None = None,
                metrics: Any = None, *, amp: Any = None, accumulate_steps: int = 1, grad_clip: float | None = None,
                device: Any = None, to_static: bool = False, strategy: Any = None,
                deterministic: bool = False, amp_configs: Any = None) -> "Model":
        """Sets the optimizer, loss and metrics, and turns on optional features.

        Everything the loop reads goes into the model's :class:`~sampan.hapi.loop.LoopState`: the
        (wrapped, compiled) network, optimizer, loss, precision plugin, strategy, accumulation, device.

        Args:
            optimizer: a ``torch.optim.Optimizer`` over ``network``'s parameters (needed by ``fit``).
            loss: a callable ``loss(*outputs, *labels)``, e.g. ``torch.nn.CrossEntropyLoss()``.
            metrics: a ``sampan.metric.Metric`` or a list of them.
            amp: ``None``, ``"bf16"``, ``"fp16"`` or a ``sampan.amp.AmpConfig``.
            accumulate_steps: micro-batches per optimizer step (gradient accumulation).
            grad_clip: clip gradients to this global L2 norm.
            device: ``None`` (CUDA when present, else CPU), ``"cpu"``, ``"cuda:N"``.
            to_static: compile the network with ``sampan.jit.to_static`` (``torch.compile``).
            strategy: ``None`` (DDP automatically under torchrun), ``"ddp"`` or ``"fsdp"``.
            deterministic: use deterministic kernels (``torch.use_deterministic_algorithms``).
            amp_configs: Paddle's name for ``amp`` (``"O0"`` or ``{"level": "O0"}``: off).

        Returns:
            The model, so calls can be chained.
        """
        amp = _paddle_amp(amp, amp_configs)
        if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(bad_argument("optimizer", optimizer, "a torch.optim.Optimizer",
                                         "write torch.optim.Adam(network.parameters(), lr=1e-3)"))
        if loss is not None and not callable(loss):
            raise TypeError(bad_argument("loss", loss, "a callable such as torch.nn.CrossEntropyLoss()"))
        if isinstance(loss, type) and issubclass(loss, torch.nn.Module):  # calling the class builds a module
            raise TypeError(bad_argument("loss", loss, "a loss module instance, not its class",
                                         f"add the brackets: loss={loss.__name__}()"))
        if grad_clip is not None and (not is_number(grad_clip) or grad_clip <= 0):  # True read as a norm of 1.0
            raise ValueError(bad_argument("grad_clip", grad_clip, "a positive float (max global gradient norm)"))
        self._accumulate_steps = check_int("accumulate_steps", accumulate_steps)
        _guards.check_optimizer_owns(self.network, optimizer, loss)  # before setup wraps or maps parameters
        self._optimizer, self._loss, self._grad_clip = optimizer, loss, grad_clip
        self._metrics = as_metrics(metrics)
        if deterministic:
            from sampan.utils.seed import enable_determinism

            enable_determinism()
        self.device = resolve_device(device)
        self._precision = _make_precision(amp, self.device)
        self._strategy = _make_strategy(strategy)
        self.network, self._optimizer = self._precision.setup(self.network, self._optimizer)
        self._train_net = self._strategy.setup(self.network, self.device)
        self._optimizer = self._strategy.setup_optimizer(self._optimizer)
        if to_static:
            from sampan.jit import to_static as _to_static
            from sampan.jit.training import align_optimizer_state, fuse_optimizer

            # Paddle's BuildStrategy for a static trainer: one fused optimizer kernel (the layout is measured
            # with the compiled and eager paths at the first training step; the optimizer's state follows it)
            fused = fuse_optimizer(self._optimizer)
            self._train_net = _to_static(self._train_net, input_spec=self.inputs)
            self._train_net.forward.training_passes = [fused] if fused else []
            self._train_net.forward.on_layout_change = lambda: align_optimizer_state(self._optimizer)
        self._eval_net = self._train_net
        for m in self._metrics:
            m.to(self.device)
        self._prepared = True
        self._remember_inputs(self._train_net)  # train_batch / eval_batch see data too
        return self

    def _require_prepared(self, what: str, need_optimizer: bool = False) -> None:
        if not self._prepared:
            raise RuntimeError(f"Call model.prepare(optimizer, loss, metrics) before model.{what}(). "
                               f"HINT: model.prepare(torch.optim.Adam(net.parameters()), torch.nn.CrossEntropyLoss())")
        if need_optimizer and (self._optimizer is None or self._loss is None):
            raise RuntimeError(f"model.{what}() needs an optimizer and a loss; prepare() got "
                               f"optimizer={self._optimizer!r}, loss={self._loss!r}. HINT: pass both to prepare().")

    # ------------------------------------------------------------------ data
    def _loader(self, data: Any, argument: str, *, batch_size: int, shuffle: bool, drop_last: bool,
                num_workers: int) -> DataLoader:
        if isinstance(data, DataLoader):
            return data
        if not isinstance(data, Dataset) and not (hasattr(data, "__getitem__") and hasattr(data, "__len__")):
            raise TypeError(bad_argument(argument, data, "a torch Dataset or DataLoader",
                                         "wrap tensors with torch.utils.data.TensorDataset(x, y)"))
        _guards.check_not_array_pair(data, argument)
        if loop.length(data) == 0:
            raise ValueError(bad_argument(argument, data, "a dataset with at least one sample (len 0 received)",
                                          "check the split name and the data directory"))
        check_int("batch_size", batch_size)
        check_int("num_workers", num_workers, minimum=0)
        if isinstance(data, IterableDataset):  # a stream has no order to shuffle and no index to shard
            if self._strategy.world_size > 1:
                raise ValueError(bad_argument(argument, data, "a map-style Dataset under distributed training "
                                              "(each rank reads its own share by index)",
                                              "shard the stream per rank yourself and pass a DataLoader"))
            return DataLoader(data, batch_size=batch_size, drop_last=drop_last, num_workers=num_workers)
        return self._strategy.make_loader(data, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last,
                                          num_workers=num_workers)

    # ------------------------------------------------------------------ callbacks
    def _callback_list(self, callbacks: Any, *, verbose: int, log_freq: int, save_dir: Any,
                       save_freq: int) -> CallbackList:
        # Paddle takes one callback or a list; anything else reaches CallbackList whole, which names it
        items = list(callbacks) if isinstance(callbacks, (list, tuple)) else [] if callbacks is None else [callbacks]
        if not any(isinstance(c, ProgressBar) for c in items):
            items.insert(0, ProgressBar(verbose=verbose, log_freq=log_freq))
        if save_dir is not None and not any(isinstance(c, ModelCheckpoint) for c in items):
            items.append(ModelCheckpoint(save_dir, save_freq=save_freq))
        if not any(isinstance(c, TerminateOnNaN) for c in items):
            items.append(self._precision.nan_check())  # the one NaN check; under AMP it diagnoses the batch
        items.extend(self._precision.callbacks())
        history = next((c for c in items if isinstance(c, History)), None) or History()
        if history not in items:
            items.append(history)
        items.extend(_guards.heartbeat(self._strategy.world_size))  # where each rank is, should one stall
        from sampan.experiments.recorder import Recorder, default_callbacks  # every fit is a recorded run

        if not any(isinstance(c, Recorder) for c in items):
            items.extend(default_callbacks(log_freq))
        # A checkpoint is written after every other callback's on_epoch_end (History, LRScheduler, EarlyStopping),
        # whatever the order given: it must hold their state of that epoch for the resume to be exact.
        items.sort(key=lambda c: isinstance(c, ModelCheckpoint))
        cbks = CallbackList(items)
        cbks.set_model(self)
        return cbks

    # ------------------------------------------------------------------ fit
    @_guards.watch_collectives
    def fit(self, train_data: Any = None, eval_data: Any = None, batch_size: int = 32, epochs: int = 1,
            eval_freq: int = 1, log_freq: int = 10, save_dir: str | os.PathLike | None = None, save_freq: int = 1,
            verbose: int = 1, drop_last: bool = False, shuffle: bool = True, num_workers: int = 0,
            callbacks: Sequence[Callback] | Callback | None = None, num_iters: int | None = None,
            resume: str | os.PathLike | None = None, accumulate_grad_batches: int | None = None) -> History:
        """Trains the network; returns the :class:`~sampan.callbacks.History`.

        Takes ``paddle.Model.fit``'s arguments with their meaning; the defaults differ where
        noted in docs/MIGRATING_FROM_PADDLE.md (``batch_size=32``, ``verbose=1``).

        Args:
            train_data: a Dataset or DataLoader of ``(inputs..., labels...)``.
            eval_data: evaluated every ``eval_freq`` epochs; its values appear as ``eval_<name>``.
            batch_size: one int, or ``(train_batch_size, eval_batch_size)`` as in Paddle.
            shuffle, drop_last, num_workers: DataLoader settings of the training data (ignored for a
                DataLoader); the evaluation data is never shuffled nor cut.
            epochs: epochs to train; a resumed run continues from the checkpoint's epoch up to ``epochs``.
            log_freq: steps between metric updates in the logs and the progress bar.
            save_dir, save_freq: write a checkpoint every ``save_freq`` epochs and ``final`` at the end.
            verbose: 0 silent, 1 progress bars, 2 one line per epoch.
            callbacks: one callback or a list; ProgressBar, TerminateOnNaN and History are added when absent.
            num_iters: train this many optimizer steps in total: it sets the number of epochs, as in Paddle.
                With ``accumulate_grad_batches=N`` each step takes N batches (Paddle counts batches).
            resume: ``"auto"`` (the newest readable checkpoint in ``save_dir``, if any; truncated or
                stray files are skipped with a warning) or a checkpoint path. ``epochs`` counts all
                epochs, the checkpoint's included: resuming at epoch 3 with ``epochs=2`` trains nothing
                and warns.
            accumulate_grad_batches: micro-batches per optimizer step (Paddle's name for
                ``prepare(accumulate_steps=...)``); ``None`` keeps what ``prepare`` set.

        Example:
            >>> history = model.fit(train_set, val_set, epochs=5, batch_size=64)  # doctest: +SKIP
        """
        self._require_prepared("fit", need_optimizer=True)
        check_int("epochs", epochs)
        check_int("eval_freq", eval_freq)
        check_int("log_freq", log_freq)
        if num_iters is not None:
            check_int("num_iters", num_iters)
        prepared_accumulation = self._accumulate_steps
        if accumulate_grad_batches is not None:
            self._accumulate_steps = check_int("accumulate_grad_batches", accumulate_grad_batches)
        try:
            return self._fit(train_data, eval_data, batch_size=batch_size, epochs=epochs, eval_freq=eval_freq,
                             log_freq=log_freq, save_dir=save_dir, save_freq=save_freq, verbose=verbose,
                             drop_last=drop_last, shuffle=shuffle, num_workers=num_workers, callbacks=callbacks,
                             num_iters=num_iters, resume=resume)
        except BaseException as exc:
            from sampan.experiments.recorder import fit_raised

            fit_raised(exc)  # the fit's recorded run ends KILLED (interrupted) or FAILED, not left RUNNING
            raise
        finally:
            self._accumulate_steps = prepared_accumulation  # fit's argument holds for this fit only

    def _fit(self, train_data: Any, eval_data: Any, *, batch_size: Any, epochs: int, eval_freq: int, log_freq: int,
             save_dir: Any, save_freq: int, verbose: int, drop_last: bool, shuffle: bool, num_workers: int,
             callbacks: Any, num_iters: int | None, resume: Any) -> History:
        train_bs, eval_bs = _batch_sizes(batch_size)
        for name, flag in (("shuffle", shuffle), ("drop_last", drop_last)):
            if not isinstance(flag, bool):  # shuffle="no" is a non-empty string: it shuffled
                raise TypeError(bad_argument(name, flag, "True or False", f"write {name}=False, without quotes"))
        train_loader = self._loader(train_data, "train_data", batch_size=train_bs, shuffle=shuffle,
                                    drop_last=drop_last, num_workers=num_workers)
        eval_loader = None if eval_data is None else self._loader(
            eval_data, "eval_data", batch_size=eval_bs, shuffle=False, drop_last=False, num_workers=num_workers)
        if eval_data is not None:
            self._check_has_labels(eval_data, "eval_data")
        train_batches = loop.length(train_loader)
        eval_batches = None if eval_loader is None else loop.length(eval_loader)
        if num_iters is not None and train_batches:
            epochs = -(-num_iters * self._accumulate_steps // train_batches)  # Paddle: num_iters sets the epochs
        cbks = self._callback_list(callbacks, verbose=verbose, log_freq=log_freq, save_dir=save_dir,
                                   save_freq=save_freq)
        self._callbacks = cbks
        self._loop.clock = loop.clock_of(cbks)
        self._remember_inputs(self._train_net)
        self.epoch = 0
        self._resume(resume, save_dir, epochs)  # sets self.epoch to the checkpoint's
        metrics = MetricSet(self._metrics)
        smoke = loop.fast_dev_run(stacklevel=3)  # $SAMPAN_FAST_DEV_RUN (the user: above _fit, fit, its wrapper)
        steps = None if train_batches is None else min(train_batches, smoke)
        eval_steps = None if eval_batches is None else min(eval_batches, smoke)
        cbks.set_params({"epochs": epochs, "steps": steps, "verbose": verbose, "batch_size": train_bs,
                         "metrics": ["loss", *metrics.names()], "has_eval": eval_loader is not None,
                         "eval_steps": eval_steps, "in_fit": True})
        self.history = cbks.find(History)[0]
        self.stop_training = False
        budget = num_iters if num_iters is not None else float("inf")
        logs: dict = {}
        try:
            cbks.call("on_train_begin", {})
            for epoch in range(self.epoch, epochs):
                if self.stop_training or budget <= 0:
                    break
                self._strategy.set_epoch(train_loader, epoch)
                cbks.call("on_epoch_begin", epoch, {})
                start = self.global_step
                batches = budget * self._accumulate_steps  # the budget counts optimizer steps; an epoch, batches
                logs = loop.train_epoch(self._loop, self, train_loader, cbks, metrics, log_freq=log_freq,
                                        max_steps=int(min(batches, smoke if steps is None else steps)))
                budget -= self.global_step - start
                if eval_loader is not None and ((epoch + 1) % eval_freq == 0 or epoch + 1 == epochs):
                    eval_logs = loop.evaluate_loop(self._loop, eval_loader, cbks, metrics, max_steps=smoke)
                    logs.update({f"eval_{k}": v for k, v in eval_logs.items() if isinstance(v, (int, float))})
                self.epoch = epoch + 1
                cbks.call("on_epoch_end", epoch, logs)
            cbks.call("on_train_end", logs)
        except BaseException as exc:  # an error or Ctrl-C: callbacks release what on_train_begin took
            cbks.call_exception(exc)
            raise
        return self.history

    def _resume(self, resume: Any, save_dir: Any, epochs: int) -> None:
        if resume is None:
            return
        payload = None
        if resume == "auto":
            if save_dir is None:
                raise ValueError(bad_argument("resume", resume, "a checkpoint path, or 'auto' together with save_dir"))
            found = ckpt.latest_intact(save_dir, map_location=self.device)  # skips truncated or stray files
            if found is None:
                return
            path, payload = found
        else:
            path = resume
        self.load(path, _restore_rng=True, _payload=payload)
        if self.epoch >= epochs:
            warnings.warn(f"fit(epochs={epochs}, resume={str(resume)!r}) has nothing to train: the checkpoint "
                          f"{ckpt.checkpoint_file(path)} is already at epoch {self.epoch}, and `epochs` counts all "
                          f"epochs, those of the checkpoint included. HINT: pass epochs={self.epoch + epochs} to "
                          f"train {epochs} more.", UserWarning, stacklevel=5)  # the user, above fit

    def _check_has_labels(self, data: Any, argument: str) -> None:
        _guards.check_not_array_pair(data, argument)  # before its first "sample" is judged
        _guards.check_has_labels(data, argument, n_inputs=self._n_inputs, n_labels=self._n_labels,
                                 loss=self._loss, metrics=self._metrics)

    # ------------------------------------------------------------------ evaluate / predict
    def evaluate(self, eval_data: Any, batch_size: int = 32, log_freq: int = 10, verbose: int = 1,
                 num_workers: int = 0, callbacks: Sequence[Callback] | None = None,
                 num_iters: int | None = None) -> dict:
        """Computes the loss and metrics on ``eval_data``: ``{"loss": ..., "acc": ...}``.

        A confusion-matrix metric appears as a nested list. ``eval_data`` must hold labels
        (``(inputs..., labels...)`` items) when a loss or metrics are prepared: data without labels
        raises ``ValueError`` instead of returning a meaningless score; use :meth:`predict` for it.
        Under a launcher each rank evaluates its share and every sample counts once, and every rank
        reports the same values: the loss and ``sampan.metric``'s metrics are reduced across ranks
        (they reduce their own counts), and a metric of your own is fed every rank's outputs and labels,
        gathered batch by batch as ``paddle.Model`` does.

        Example:
            >>> model.evaluate(val_set, batch_size=64)  # doctest: +SKIP
            {'loss': 0.31, 'acc': 0.91}
        """
        self._require_prepared("evaluate")
        if num_iters is not None:
            check_int("num_iters", num_iters)
        self._check_has_labels(eval_data, "eval_data")
        loader = self._loader(eval_data, "eval_data", batch_size=batch_size, shuffle=False, drop_last=False,
                              num_workers=num_workers)
        smoke = loop.fast_dev_run()
        max_steps = min(num_iters or loop.NO_LIMIT, smoke)
        cbks = self._callback_list(callbacks, verbose=verbose, log_freq=log_freq, save_dir=None, save_freq=1)
        n_batches = loop.length(loader)
        cbks.set_params({"verbose": verbose, "eval_steps": None if n_batches is None else min(n_batches, max_steps),
                         "in_fit": False})
        return loop.evaluate_loop(self._loop, loader, cbks, MetricSet(self._metrics), max_steps=max_steps)

    def predict(self, test_data: Any, batch_size: int = 32, num_workers: int = 0, stack_outputs: bool = True,
                verbose: int = 1, callbacks: Sequence[Callback] | None = None) -> list:
        """Runs the network on ``test_data`` (labels, if present, are ignored).

        Under a launcher (DDP, FSDP) each rank runs its share, and every rank returns the outputs of every
        sample, in the data's order, as ``paddle.Model.predict`` gathers them.

        Returns:
            One entry per network output: a NumPy array over all samples when
            ``stack_outputs``, else a list of per-batch arrays.
        """
        if not self._prepared:
            self.device = next((p.device for p in self.network.parameters()), torch.device("cpu"))
        loader = self._loader(test_data, "test_data", batch_size=batch_size, shuffle=False, drop_last=False,
                              num_workers=num_workers)
        cbks = self._callback_list(callbacks, verbose=verbose, log_freq=10, save_dir=None, save_freq=1)
        cbks.set_params({"verbose": verbose, "predict_steps": loop.length(loader)})
        self._remember_inputs(self._eval_net)
        batches = loop.predict_loop(self._loop, loader, cbks)
        per_output = list(zip(*batches))
        if stack_outputs:
            return [torch.cat(list(outs)).numpy() for outs in per_output]
        return [[o.numpy() for o in outs] for outs in per_output]

    # ------------------------------------------------------------------ one batch at a time
    def train_batch(self, inputs: Any, labels: Any = None, update: bool = True) -> Any:
        """One training step on one batch, as ``paddle.Model.train_batch``.

        The same step as ``fit``'s (AMP, DDP, ``to_static``, clipping). ``update=False`` runs forward and
        backward only, so the gradients of several calls add up before a call with ``update=True`` steps the
        optimizer (gradient accumulation); each loss is divided by ``prepare(accumulate_steps=...)``.

        Args:
            inputs: a tensor or NumPy array, or a list of them (one per network input).
            labels: the same for the labels.
            update: step the optimizer and clear the gradients after the backward pass.

        Returns:
            ``[loss]`` as NumPy, or ``([loss], [metric values on this batch])`` when metrics were prepared.

        Example:
            >>> loss = model.train_batch([x], [y])  # doctest: +SKIP
            >>> model.train_batch([x1], [y1], update=False); model.train_batch([x2], [y2])  # doctest: +SKIP
        """
        self._require_prepared("train_batch", need_optimizer=True)
        return loop.train_batch(self._loop, self, self._metrics, inputs, labels, update)

    def eval_batch(self, inputs: Any, labels: Any = None) -> Any:
        """The loss and metrics of one batch without gradients, as ``paddle.Model.eval_batch``.

        Returns:
            ``[loss]`` (empty without a loss), or ``([loss], [metric values])`` when metrics were prepared.

        Example:
            >>> loss, (acc,) = model.eval_batch([x], [y])  # doctest: +SKIP
        """
        self._require_prepared("eval_batch")
        return loop.eval_batch(self._loop, self._metrics, inputs, labels)

    def predict_batch(self, inputs: Any) -> list:
        """The network's outputs on one batch, one NumPy array per output (``paddle.Model.predict_batch``).

        Example:
            >>> (logits,) = model.predict_batch([x])  # doctest: +SKIP
        """
        if not self._prepared:
            self.device = next((p.device for p in self.network.parameters()), torch.device("cpu"))
        return loop.predict_batch(self._loop, inputs)

    def _remember_inputs(self, net: torch.nn.Module) -> None:
        """Records the next batch's input specs (batch dim None), as Paddle infers them for ``save``."""
        if self.inputs is not None or self._seen_inputs is not None:
            return
        if self._input_hook is not None:  # still waiting, perhaps on a network that prepare has wrapped since
            self._input_hook.remove()
        self._input_hook = net.register_forward_pre_hook(_FirstInputs(self))

    def _export_specs(self, path: Any, input_spec: Any) -> Any:
        if input_spec is not None or self.inputs is not None:
            return input_spec if input_spec is not None else self.inputs
        if self._seen_inputs is None:
            raise ValueError(bad_argument(
                "inputs", None, "InputSpecs for model.save(path, training=False) (the export needs input shapes)",
                "build the model as Model(net, inputs=[sampan.InputSpec([None, 1, 28, 28], 'float32', 'image')]), "
                "pass save(path, training=False, input_spec=[...]), or run fit/predict first to infer them"))
        warnings.warn(f"Model was built without `inputs`: exporting {path!r} with the input spec inferred from the "
                      f"first batch seen: {[s.to_dict() for s in self._seen_inputs]} (batch dimension dynamic). "
                      f"Pass Model(inputs=[sampan.InputSpec(...)]) to choose it.", UserWarning, stacklevel=3)
        return self._seen_inputs

    # ------------------------------------------------------------------ checkpoints
    def save(self, path: str | os.PathLike, training: bool = True, **export_kwargs: Any) -> Path:
        """Writes a full training checkpoint (or, with ``training=False``, an inference export).

        The checkpoint holds weights, optimizer, gradient scaler, callbacks' state
        (LR scheduler, early stopping), epoch, step and RNG states, written to a
        temporary file and renamed, on rank 0 only. ``training=False`` calls
        ``sampan.jit.save(network, path, input_spec=inputs)``.

        Returns:
            The file written (``path`` plus ``.pt`` when it has no suffix).
        """
        if not isinstance(path, (str, os.PathLike)) or not str(path).strip() or str(path).endswith(("/", os.sep)):
            raise ValueError(bad_argument("path", path, "a file prefix such as 'output/lenet' (not empty, "
                                          "not a folder)", "write model.save('output/lenet', training=False)"))
        if not training:
            from sampan import jit

            specs = self._export_specs(path, export_kwargs.pop("input_spec", None))
            target = jit.save(self.network, path, input_spec=specs, **export_kwargs)
            self._keep_export_with_run(Path(target))
            return target
        target = ckpt.checkpoint_file(path)
        if self._strategy.is_main:
            payload = {
                "model": self.network.state_dict(),
                "optimizer": self._optimizer.state_dict() if self._optimizer is not None else None,
                "optimizer_class": type(self._optimizer).__name__ if self._optimizer is not None else None,
                "precision": self._precision.state_dict(),
                "callbacks": [(type(c).__name__, c.state_dict()) for c in self._callbacks],
                "epoch": self.epoch,
                "global_step": self.global_step,
                "rng": ckpt.rng_state(),
            }
            static = self._static_forward()
            if static is not None and static.train_choice is not None:  # a resumed run takes the same path
                payload["static_training"] = dataclasses.asdict(static.train_choice)
            ckpt.save_checkpoint(target, payload)
        self._strategy.barrier()
        return target

    def _keep_export_with_run(self, target: Path) -> None:
        """An export of a model whose last ``fit`` was recorded goes into that run's ``exports/`` artifacts."""
        run_id = next((c.run_id for c in self._callbacks if getattr(c, "run_id", None)), None)
        if run_id is None:
            return
        from sampan.experiments import log_artifact

        for file in (target, target.with_suffix(".meta.json")):
            if file.is_file():
                try:
                    log_artifact(file, run_id=run_id)
                except Exception as exc:  # the export itself is written; a store problem must not undo it
                    warnings.warn(f"The export {file} is written, but could not be kept with run {run_id}: "
                                  f"{first_line(exc)}", RuntimeWarning, stacklevel=3)

    def load(self, path: str | os.PathLike, skip_mismatch: bool = False, reset_optimizer: bool = False,
             _restore_rng: bool = False, _payload: dict | None = None) -> "Model":
        """Loads a checkpoint written by :meth:`save` (``torch.load(weights_only=True)``).

        The saved optimizer state is checked against the prepared optimizer first (class, settings,
        parameter groups): a checkpoint of another optimizer raises ``CheckpointError`` saying what
        differs, instead of silently replacing its settings.

        Args:
            path: the checkpoint (``.pt`` suffix optional).
            skip_mismatch: load only the parameters whose names and shapes match, instead of raising.
            reset_optimizer: keep the current optimizer state (load the weights only).

        Example:
            >>> model.load("checkpoints/final", reset_optimizer=True)  # doctest: +SKIP
        """
        if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
            raise ValueError(bad_argument("path", path, "the path of a checkpoint written by model.save()",
                                          "write model.load('checkpoints/final')"))
        payload = _payload if _payload is not None else ckpt.load_checkpoint(path, map_location=self.device)
        target = str(ckpt.checkpoint_file(path))
        load_optimizer = self._optimizer is not None and payload.get("optimizer") and not reset_optimizer
        if load_optimizer:  # checked before anything is loaded, so an error leaves the model as it was
            skipped = ckpt.load_weights(self.network, payload["model"], path=target, skip_mismatch=skip_mismatch,
                                        check_only=True)
            if skipped:  # the saved moments belong to the skipped shapes: the next step would fail on them
                warnings.warn(f"model.load({target!r}, skip_mismatch=True) skipped {len(skipped)} entries "
                              f"({skipped[:5]}), so the checkpoint's optimizer state is not loaded: the optimizer "
                              f"starts fresh. Pass reset_optimizer=True to say so and silence this.",
                              UserWarning, stacklevel=2)
                load_optimizer = False
        if load_optimizer:
            _guards.check_optimizer_state(self._optimizer, payload["optimizer"], payload.get("optimizer_class"),
                                          path=target)
        ckpt.load_weights(self.network, payload["model"], path=target, skip_mismatch=skip_mismatch)
        if load_optimizer:
            try:
                self._optimizer.load_state_dict(payload["optimizer"])
            except (ValueError, KeyError) as exc:
                raise SampanError(f"The optimizer state in {target} does not fit the prepared optimizer: {exc}. "
                                  f"HINT: pass reset_optimizer=True to keep the current optimizer state.") from exc
        from sampan.jit.training import align_optimizer_state, fuse_optimizer

        static = self._static_forward()
        if static is not None:
            if load_optimizer and static.training_passes:  # the checkpoint's settings came with its state: fused
                fuse_optimizer(self._optimizer)  # again, as prepare(to_static=True) set it
            if payload.get("static_training"):
                static.set_train_choice(payload["static_training"], self.network)  # and its layout
        # The saved moments keep the layout of the weights they were saved with (NCHW or channels-last), which need
        # not be the weights' layout now; a fused optimizer walks both as flat memory and would mix them silently.
        align_optimizer_state(self._optimizer)
        self._precision.load_state_dict(payload.get("precision") or {})
        self.epoch = int(payload.get("epoch", 0))
        self.global_step = int(payload.get("global_step", 0))
        self._apply_callback_states(payload.get("callbacks") or [])
        if _restore_rng and payload.get("rng"):
            ckpt.set_rng_state(payload["rng"])
        return self

    def _apply_callback_states(self, states: list) -> None:
        """The i-th saved state of a callback class goes to the i-th callback of that class."""
        remaining: dict[str, list] = {}
        for name, state in states:
            remaining.setdefault(name, []).append(state)
        for cb in self._callbacks:
            queue = remaining.get(type(cb).__name__)
            if queue:
                cb.load_state_dict(queue.pop(0))

    # ------------------------------------------------------------------ misc
    def _static_forward(self) -> Any:
        """The ``StaticFunction`` that runs the training network's forward, or None: ``prepare(to_static=True)``
        compiles the network as wrapped (DDP's wrapper), ``to_static(network)`` or ``@to_static`` on its class's
        ``forward`` the network itself."""
        from sampan.jit.to_static import static_forward

        net = self._train_net
        if net is None:
            return None
        return static_forward(net) or static_forward(self._strategy.unwrap(net))

    def summary(self, input_size: Any = None, dtype: Any = None, *, dtypes: Any = None) -> dict:
        """Layers, output shapes, parameters and FLOPs (``paddle.Model.summary``; see :func:`sampan.summary`)."""
        from sampan.hapi.summary import summary

        if input_size is None and self.inputs is None:
            raise ValueError(bad_argument("input_size", None, "a shape such as (1, 1, 28, 28)",
                                          "pass input_size, or give Model(inputs=[InputSpec(...)])"))
        return summary(self.network, input_size, dtype=dtype, dtypes=dtypes, input_spec=self.inputs)

    def parameters(self, *args, **kwargs) -> list[torch.nn.Parameter]:
        """The network's parameters as a list (``paddle.Model.parameters``), so ``params[0]`` works."""
        return list(self.network.parameters(*args, **kwargs))

    def __repr__(self) -> str:
        return f"Model({type(self.network).__name__}, prepared={self._prepared}, epoch={self.epoch})"


class _FirstInputs:
    """The forward pre-hook through which a Model without ``inputs`` records the first batch's input specs
    (:meth:`Model._remember_inputs`); it removes itself then.

    Until that batch the hook sits in the network's hooks, which ``torch.save(model.network, ...)`` and
    ``copy.deepcopy(network)`` take along: it holds the Model weakly (a saved network must not carry the Model, its
    optimizer and data) and is pickled or copied as :func:`_no_input_hook`, where a closure failed with "Can't
    pickle local object"."""

    def __init__(self, model: Model):
        import weakref

        self._model = weakref.ref(model)

    def __call__(self, _module: torch.nn.Module, args: tuple) -> None:
        from sampan.hapi.summary import running

        model = self._model()
        if model is None or model._input_hook is None or running():  # summary's example input is not data
            return
        model._input_hook.remove()
        model._input_hook = None
        if args and all(isinstance(a, torch.Tensor) for a in args):
            model._seen_inputs = [InputSpec.from_tensor(a, name=f"input_{i}") for i, a in enumerate(args)]

    def __reduce__(self) -> tuple:
        return _spent_input_hook, ()  # a copy or a saved network gets the no-op hook


def _spent_input_hook() -> Callable:
    return _no_input_hook


def _no_input_hook(_module: torch.nn.Module, _args: tuple) -> None:
    """What a network saved or copied while a Model waited for its first batch keeps of :class:`_FirstInputs`:
    nothing (the Model records its inputs from its own network)."""


def _paddle_amp(amp: Any, amp_configs: Any) -> Any:
    """``prepare(amp_configs=...)`` as Paddle spells it; level ``"O0"`` means no mixed precision."""
    if amp_configs is not None:
        if amp is not None:
            raise ValueError(bad_argument("amp_configs", amp_configs, "None when amp is given (they are one setting)",
                                          "pass only amp=..."))
        amp = amp_configs
    level = amp.get("level") if isinstance(amp, dict) else amp
    return None if isinstance(level, str) and level.upper() == "O0" else amp  # the default dtype is bfloat16


def _batch_sizes(batch_size: Any) -> tuple[int, int]:
    """``32`` -> ``(32, 32)``; ``(64, 256)`` -> train and eval batch sizes, as ``paddle.Model.fit`` takes them."""
    if isinstance(batch_size, (tuple, list)):
        if len(batch_size) != 2:
            raise ValueError(bad_argument("batch_size", batch_size, "an int or (train_batch_size, eval_batch_size)",
                                          "write batch_size=(64, 256)"))
        return check_int("batch_size", batch_size[0]), check_int("batch_size", batch_size[1])
    return check_int("batch_size", batch_size), batch_size


def _make_precision(amp: Any, device: torch.device) -> PrecisionPlugin:
    if amp is None or amp is False:
        return PrecisionPlugin()
    from sampan.amp.plugin import make_precision

    return make_precision(amp, device)


def _make_strategy(strategy: Any) -> Strategy:
    if isinstance(strategy, Strategy):
        return strategy
    distributed = strategy is not None or int(os.environ.get("WORLD_SIZE", "1")) > 1
    if not distributed:
        return Strategy()
    from sampan.distributed.strategy import make_strategy  # loads torch.distributed only when distributed

    return make_strategy(strategy)
