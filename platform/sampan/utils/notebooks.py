"""``execute_notebook``: papermill's, with a kernel that dies while starting started again.

jupyter_client picks a kernel's five ports in the parent process (it binds, reads the port, lets go) and the kernel
binds them a moment later. Another process starting a kernel or a server in that moment can take one of them: the
kernel exits with ``ZMQError: Address already in use`` before it ever answers, and papermill raises
``RuntimeError: Kernel died before replying to kernel_info``. Nothing of the notebook has run then, so starting the
kernel again (with new ports) is safe; a kernel that dies at every start is reported after ``attempts`` tries.

``guard_async_sends`` mends a lost reply in jupyter_client's asyncio clients (which papermill and Voilà run on), and
``VOILA_BOOT`` runs Voilà with it.

Every kernel Sampan starts talks over encrypted channels (``KERNEL_ENCRYPTION``, ``encryption_args``,
``EncryptedKernelManager``): a kernel's five ZMQ sockets listen on 127.0.0.1, and without encryption any process on
the machine that finds the iopub port can subscribe to it and read every output (a ZMQ PUB socket asks no key; the
connection file's key only signs messages, which stops forged requests, not reading).
"""
from __future__ import annotations

import functools
import keyword
import logging
import runpy
import sys
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

from sampan.errors import SampanError, bad_argument
from sampan.utils.imports import require

_log = logging.getLogger("sampan.notebooks")

KERNEL_START_ATTEMPTS = 3
# jupyter_client's transport_encryption for the kernels Sampan starts: "auto" gives CurveZMQ keys (made for each
# kernel, written only into its connection file, which its owner alone can read) to every kernel whose spec declares
# `supported_encryption: ["curve"]`: sampan's own spec and ipykernel's python3 (ipykernel >= 7.3) do. A kernel
# that does not (another language's) still starts, unencrypted; "required" refuses it (the hub's live service).
KERNEL_ENCRYPTION = "auto"
T = TypeVar("T")
# `python -c VOILA_BOOT ARGS...` runs `voila ARGS...` with guard_async_sends; the server loads no torch (its kernels
# import what their notebooks need)
VOILA_BOOT = "import sys; from sampan.utils.notebooks import run_voila; run_voila(sys.argv[1:])"
# the fix for a parameter name papermill cannot write safely (here and in path.yaml's parameters)
PARAMETER_NAME_HINT = "parameter names must be Python identifiers such as QUICK or SEED"


class KernelNotFoundError(SampanError, LookupError):
    """A notebook names a Jupyter kernel that is not installed; the message says how to install it."""


def missing_kernel(needed_by: str, name: str, installed: Any) -> KernelNotFoundError:
    """The error for a notebook (``needed_by``: "Lesson 'x'", "The notebook y.ipynb") whose kernel is not installed.

    Example:
        >>> from sampan.utils.notebooks import missing_kernel
        >>> str(missing_kernel("Lesson 'a'", "old", {"python3": ""}))  # doctest: +ELLIPSIS
        "Lesson 'a' needs the Jupyter kernel 'old', which is not installed here (installed: python3). HINT: ..."
    """
    how = ("run `sampan kernel install` (it installs the 'Sampan (Python 3)' kernel into this environment)"
           if name == "sampan" else f"install the {name!r} kernel, or pass --kernel with an installed one")
    return KernelNotFoundError(f"{needed_by} needs the Jupyter kernel {name!r}, which is not installed here "
                               f"(installed: {', '.join(sorted(installed)) or 'none'}). HINT: {how}, then run again.")


def check_kernels(notebooks: Iterable[tuple[str, Any]], kernel: str | None, *, argument: str, fix: str) -> None:
    """Refuses, before anything runs, a kernel that is not installed (papermill would fail on every notebook):
    ``kernel`` when given (named as ``argument``, with ``fix``), else each notebook's own (``(needed_by, path)``).

    Raises:
        KernelNotFoundError: naming the installed kernels and how to get the missing one.
    """
    import nbformat
    from jupyter_client.kernelspec import find_kernel_specs

    installed = find_kernel_specs()
    if kernel is not None and kernel not in installed:
        raise KernelNotFoundError(bad_argument(argument, kernel, "an installed Jupyter kernel "
                                               f"({', '.join(sorted(installed)) or 'none'})", fix))
    for needed_by, notebook in notebooks:
        name = kernel or nbformat.read(str(notebook), as_version=4).metadata.get("kernelspec", {}).get("name")
        if name and name not in installed:
            raise missing_kernel(needed_by, name, installed)


def is_parameter_name(name: Any) -> bool:
    """Whether papermill can set ``name``: it writes ``f"{name} = {value}"`` into the notebook, escaping the value
    but pasting the name as it is, so a name that is not a Python identifier (or is a keyword) is code it would run.

    Example:
        >>> from sampan.utils.notebooks import is_parameter_name
        >>> is_parameter_name("QUICK"), is_parameter_name("__import__('os').system('id'); x"), is_parameter_name("if")
        (True, False, False)
    """
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)


def check_parameters(parameters: Any) -> None:
    """Refuses ``parameters`` for papermill unless it is a mapping whose names are all :func:`is_parameter_name`.

    Raises:
        ValueError: naming ``parameters``, the first bad name and the fix.
    """
    if not isinstance(parameters, Mapping):
        raise ValueError(bad_argument("parameters", parameters, "a dict of parameter names to values",
                                      "pass parameters={'QUICK': True}, or leave it out"))
    for name in parameters:
        if not is_parameter_name(name):
            raise ValueError(f"Expected every name in `parameters` to be a Python identifier (papermill writes "
                             f"`NAME = value` into the notebook's code). Received: {name!r}, which would run as code "
                             f"in the kernel; nothing ran. HINT: {PARAMETER_NAME_HINT}.")


class KernelStartError(RuntimeError):
    """The notebook's kernel died or stayed silent before it answered, at every one of the tries; no cell ran."""


def died_while_starting(exc: BaseException) -> bool:
    """Whether ``exc`` is nbclient's "the kernel process ended before it answered" (raised only at start-up)."""
    return isinstance(exc, RuntimeError) and "Kernel died before replying to kernel_info" in str(exc)


def silent_while_starting(exc: BaseException) -> bool:
    """Whether ``exc`` is jupyter_client's "the kernel never answered within the start timeout" (raised only at
    start-up; nbclient has already stopped that kernel)."""
    return isinstance(exc, RuntimeError) and str(exc).startswith("Kernel didn't respond in ")


def guard_async_sends() -> None:
    """Makes jupyter_client's ``Session.send`` wake whoever awaits the same asyncio socket (idempotent).

    ``Session.send`` writes to a ``zmq.asyncio`` socket through a blocking shadow of it. The blocking send
    processes the socket's pending commands, and with them the edge-triggered ``zmq.FD`` signal that pyzmq's pending
    ``poll``/``recv`` on that socket waits for: a message that arrived just then stays unread for ever. nbclient
    does exactly that: its ``Output`` widget sends ``comm_msg`` on the shell channel while it awaits the cell's
    ``execute_reply``, and a reply that arrives during that send is never seen: a Voilà page says "Running ..." for
    ever (its kernel idle), a papermill run waits for ever. After each such send this has pyzmq look at the
    socket's events again, as its own asyncio ``send`` does.

    Example:
        >>> from sampan.utils.notebooks import guard_async_sends
        >>> guard_async_sends()  # doctest: +SKIP
    """
    import zmq
    import zmq.asyncio
    from jupyter_client.session import Session

    def waking(send):
        @functools.wraps(send)
        def send_and_wake(self, stream, *args, **kwargs):
            sent = send(self, stream, *args, **kwargs)
            if isinstance(stream, zmq.asyncio.Socket) and not stream.closed:
                try:
                    stream._schedule_remaining_events()  # pyzmq's own wake-up after a send (zmq/_future.py)
                except zmq.ZMQError:  # closed meanwhile: nobody is waiting
                    pass
            return sent

        send_and_wake.sampan_wakes = True
        return send_and_wake

    for name in ("send", "send_raw"):
        if not getattr(getattr(Session, name), "sampan_wakes", False):
            setattr(Session, name, waking(getattr(Session, name)))


def run_voila(args: Sequence[str]) -> None:
    """Runs Voilà in this process as ``voila ARGS...`` would, with :func:`guard_async_sends` (see ``VOILA_BOOT``)."""
    guard_async_sends()
    sys.argv = ["voila", *args]
    runpy.run_module("voila", run_name="__main__")


def encryption_args(policy: str = KERNEL_ENCRYPTION) -> list[str]:
    """The option that makes a Jupyter server (JupyterLab, Voilà, ``jupyterhub.singleuser``) encrypt the channels of
    the kernels it starts, under ``policy`` (``"auto"`` or ``"required"``: see ``KERNEL_ENCRYPTION``).

    Example:
        >>> from sampan.utils.notebooks import encryption_args
        >>> encryption_args()
        ['--KernelManager.transport_encryption=auto']
    """
    if policy not in ("auto", "required"):
        raise ValueError(bad_argument("policy", policy, "'auto' or 'required'",
                                      "pass 'auto' (every kernel whose spec declares CurveZMQ is encrypted) or "
                                      "'required' (a kernel that cannot be encrypted is refused)"))
    return [f"--KernelManager.transport_encryption={policy}"]


def __getattr__(name: str):
    if name == "EncryptedKernelManager":
        return _encrypted_manager_class()
    raise AttributeError(name)


@functools.cache  # made at first use: importing sampan does not import jupyter_client
def _encrypted_manager_class():
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    class EncryptedKernelManager(AsyncKernelManager):
        """``AsyncKernelManager`` with ``transport_encryption`` :data:`KERNEL_ENCRYPTION` unless configured: the
        manager of the kernels that :func:`execute_notebook` (``sampan path run``, the tests' lessons) starts."""

        @default("transport_encryption")
        def _sampan_encryption(self) -> str:
            return KERNEL_ENCRYPTION

    return EncryptedKernelManager


def execute_notebook(input_path: str, output_path: str, *, attempts: int = KERNEL_START_ATTEMPTS,
                     fork: bool = True, **kwargs: Any) -> Any:
    """``papermill.execute_notebook(input_path, output_path, **kwargs)``, starting the kernel up to ``attempts`` times.

    Example:
        >>> from sampan.utils.notebooks import execute_notebook
        >>> execute_notebook("lesson.ipynb", "out.ipynb", parameters={"EPOCHS": 1})  # doctest: +SKIP

    With ``SAMPAN_FORK_KERNELS=1`` in the environment, a kernel whose command allows it is forked from a server that
    imported torch and ipykernel once (:mod:`sampan.utils.forkkernels`), unless ``kernel_manager_class`` is given
    or ``fork=False``. Either way its channels are encrypted (:class:`EncryptedKernelManager`).

    Args:
        fork: ``True`` (the default) forks where ``$SAMPAN_FORK_KERNELS`` asks; ``False`` starts the kernel as a new
            interpreter whatever it says: a process that runs one notebook only (a job, a sweep worker with one
            trial, ``sampan path run`` of one lesson) would start the server for that one kernel, which costs more
            than it saves (a notebook that imports torch and sampan: 5.9-6.6 CPU-s and 6-7 s forked, 3.4-3.8 CPU-s
            and 3.4-3.8 s as a new interpreter).

    Raises:
        ValueError: a name in ``parameters`` that is not a Python identifier (:func:`is_parameter_name`: papermill
            would paste it into the notebook as code), or a bad ``fork``; before anything runs.
        KernelStartError: the kernel died, or stayed silent past ``start_timeout``, at every try (its spec or
            environment is broken).
    """
    if kwargs.get("parameters") is not None:
        check_parameters(kwargs["parameters"])
    if not isinstance(fork, bool):
        raise ValueError(bad_argument("fork", fork, "True or False",
                                      "pass fork=False to start the kernel as a new interpreter, or leave it out"))
    pm = require("papermill")
    from sampan.utils import forkkernels

    guard_async_sends()
    if "kernel_manager_class" not in kwargs:
        kwargs["kernel_manager_class"] = (forkkernels.ForkServerKernelManager if fork and forkkernels.enabled()
                                          else _encrypted_manager_class())
    return with_kernel_restarts(lambda: pm.execute_notebook(input_path, output_path, **kwargs), attempts=attempts,
                                what=str(input_path), kernel=kwargs.get("kernel_name"))


def with_kernel_restarts(run: Callable[[], T], *, attempts: int = KERNEL_START_ATTEMPTS, what: str = "the notebook",
                         kernel: str | None = None) -> T:
    """Calls ``run()`` (which starts a kernel and executes cells) again while its kernel dies, or stays silent past
    the start timeout, before answering.

    Example:
        >>> import nbformat
        >>> from nbclient import NotebookClient
        >>> from sampan.utils.notebooks import with_kernel_restarts
        >>> nb = nbformat.read("lesson.ipynb", as_version=4)  # doctest: +SKIP
        >>> with_kernel_restarts(lambda: NotebookClient(nb, kernel_name="python3").execute())  # doctest: +SKIP
    """
    if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 1:
        raise ValueError(f"Expected `attempts` to be a whole number of tries, at least 1. Received: attempts="
                         f"{attempts!r}. HINT: pass attempts=1 to start the kernel only once.")
    for attempt in range(1, attempts + 1):
        try:
            return run()
        except RuntimeError as exc:
            died = died_while_starting(exc)
            if not (died or silent_while_starting(exc)):
                raise
            if attempt == attempts:
                name = repr(kernel) if kernel else "of the notebook"
                what_happened = "died before it answered" if died else "never answered (and was stopped)"
                raise KernelStartError(
                    f"The kernel {name} {what_happened}, {attempts} times in a row, so no cell of {what} ran. "
                    f"HINT: `jupyter kernelspec list` shows where its spec is; check that the command in its "
                    f"kernel.json runs (a spec that points at a removed Python is the usual cause)"
                    f"{'' if died else ', and that the machine is not out of memory or CPU'}.") from exc
            why = ("died", "usually a port another process took in the meantime") if died else \
                ("did not answer", f"{exc}; usually a machine busy with other work")
            _log.warning("The kernel for %s %s while starting (try %d of %d; %s); starting another.",
                         what, why[0], attempt, attempts, why[1])
    raise AssertionError("unreachable")  # pragma: no cover
