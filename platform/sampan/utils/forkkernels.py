"""Jupyter kernels forked from a server that imported their heavy modules once (``SAMPAN_FORK_KERNELS=1``).

A kernel that jupyter_client starts is a new interpreter: it imports ipykernel, IPython and zmq, and a lesson's
first cell imports numpy and torch, 2-3 CPU-seconds before any cell does work. A learning path, a sweep or the test
suite starts dozens of kernels. With ``SAMPAN_FORK_KERNELS=1`` in the environment,
:func:`sampan.utils.notebooks.execute_notebook` (the path runner, jobs, sweeps) starts them with
:class:`ForkServerKernelManager` instead. Its provisioner asks a fork server for each kernel. The server is a child
of the process that starts kernels, one per such process, and it ends with that process. It imports
:data:`PRELOAD` once, then forks one child per kernel. The child takes the kernel's command line, environment,
working folder and standard streams, and runs ``ipykernel_launcher`` as ``python -m`` would. It is a real ipykernel
on the same ports and protocol, which jupyter_client interrupts, restarts and shuts down as usual.

What a fresh interpreter would do differently, and how the child makes up for it:

- modules that read the environment when they are imported: torch reads its thread count when it first runs, in
  the child, from the kernel's ``OMP_NUM_THREADS``; matplotlib reads ``MPLBACKEND`` at import, so it is not
  preloaded. torch's compiler settings (``TORCHINDUCTOR_*``, ``TORCHDYNAMO_*``, ``TORCH_LOGS``) are read when
  torchvision imports them, in the server: they are those of the process that started the first kernel;
- random state: Python's ``random`` reseeds itself after a fork; the child reseeds numpy's global generator and
  torch's default generators from the system's entropy, as a new interpreter does;
- the time zone and the character type locale: the child reads the kernel's ``TZ`` (``time.tzset``) and
  ``LC_ALL`` / ``LC_CTYPE`` / ``LANG`` (``locale.setlocale(LC_CTYPE, "")``, as Python does at startup);
- string hashing: an interpreter fixes its hash seed when it starts, so a kernel is forked from a server started
  with the kernel's own ``PYTHONHASHSEED`` (one server per value: ``seed_everything`` sets it, and a kernel started
  after that hashes strings as a new interpreter with that seed would); kernels without one share their server's
  random seed;
- exit: ``atexit`` functions run when the kernel ends, as at an interpreter's exit;
- the kernel's parent is the server, so ``JPY_PARENT_PID`` names it, and the kernel's command line gets
  ``--IPKernelApp.parent_handle=<that pid>`` (ipykernel read the variable when the server imported it): a kernel
  ends when the server does, which ends when the process that started it does.

Not ``multiprocessing``'s forkserver, which :mod:`sampan.distributed.launcher` uses for training ranks: there is one
such server per process, with the preload list of whoever starts it first, and its children are
``multiprocessing.Process`` objects. The starting process joins those at exit, and their standard streams are the
server's. A kernel needs the starting process's streams at the moment it starts, a session of its own, and an exit
code that jupyter_client can poll as it polls ``Popen``'s.

Only a kernel spec whose command is ``<this Python> -m ipykernel_launcher ...`` is forked. Any other (another
Python, another language, extra interpreter flags) starts as jupyter_client always starts it, and the log says why.
"""
from __future__ import annotations

import atexit
import functools
import json
import locale
import logging
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from sampan.utils.imports import python_command

_log = logging.getLogger("sampan.forkkernels")

FORK_KERNELS_ENV = "SAMPAN_FORK_KERNELS"
PROVISIONER = "sampan-forkserver"  # its entry point (pyproject.toml, "jupyter_client.kernel_provisioners")
PRELOAD = ("zmq", "tornado", "IPython", "ipykernel.kernelapp", "ipykernel.ipkernel", "ipykernel.zmqshell",
           "numpy", "torch", "torchvision", "sampan", "sampan.hapi.model", "sampan.data", "sampan.metric",
           "sampan.callbacks")
_MAX_MESSAGE = 1 << 20  # a request: the command line, the environment and the folder, as JSON
_CODE = struct.Struct("i")


def enabled(environ: dict | None = None) -> bool:
    """Whether ``SAMPAN_FORK_KERNELS`` asks for forked kernels (``1``, ``true``, ``yes`` or ``on``), on Linux (the
    server passes file descriptors over a ``SOCK_SEQPACKET`` socket pair; elsewhere kernels start as usual)."""
    value = (os.environ if environ is None else environ).get(FORK_KERNELS_ENV, "")
    return sys.platform.startswith("linux") and value.strip().lower() in ("1", "true", "yes", "on")


def why_not_forked(cmd: list[str]) -> str | None:
    """Why a kernel command cannot be forked from this Python's server, or None when it can."""
    if len(cmd) < 3 or cmd[1:3] != ["-m", "ipykernel_launcher"]:
        return f"its command is not `<python> -m ipykernel_launcher ...`: {cmd[:3]}"
    try:
        same = os.path.samefile(os.path.expanduser(cmd[0]), sys.executable)
    except OSError:
        same = False
    if not same and os.path.realpath(cmd[0]) != os.path.realpath(sys.executable):
        return f"it runs another Python ({cmd[0]}) than this process ({sys.executable})"
    return None


def _hash_seed(env: dict[str, str]) -> str | None:
    """``PYTHONHASHSEED`` as an interpreter reads it: None for a random seed (unset, empty or ``random``); a
    ValueError for a value no interpreter would start with (it would end the fork server at its start)."""
    value = env.get("PYTHONHASHSEED", "").strip()
    if value in ("", "random"):
        return None
    if not value.isdigit() or int(value) > 2**32 - 1:
        from sampan.errors import bad_argument

        raise ValueError(bad_argument("PYTHONHASHSEED", value, "'random' or an int from 0 to 4294967295",
                                      "unset it, or seed_everything(seed) with a seed in that range"))
    return str(int(value))


# ---------------------------------------------------------------------------------------------------------------
# The server: its own process, started by _Client with one end of a socket pair.

def serve(fd: int) -> None:
    """The fork server's loop: imports :data:`PRELOAD`, then forks a kernel for each request on the socket ``fd``
    and reports each kernel's exit code on the status socket that came with its request. Ends when the other end
    of ``fd`` closes (the process that started the server has ended)."""
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - a module that cannot be preloaded is imported by the kernel itself
            _log.warning("fork server: could not preload %s (%s)", name, exc)
    conn = socket.socket(fileno=fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake select (the wakeup fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt meant for the starting process is not for us
    status: dict[int, int] = {}  # kernel pid -> its status socket's fd
    while True:
        readable, _, _ = select.select([conn, wake_r], [], [])
        if wake_r in readable:
            os.read(wake_r, 4096)
        _reap(status)
        if conn in readable:
            try:
                message, fds, _, _ = socket.recv_fds(conn, _MAX_MESSAGE, 4)
            except InterruptedError:
                continue
            if not message:  # the starting process has ended: so do we (the kernels see their parent change)
                return
            request = json.loads(message)
            try:
                pid = os.fork()
            except OSError as exc:
                for fd in fds:
                    os.close(fd)
                conn.send(json.dumps({"error": f"fork failed: {exc}"}).encode())
                continue
            if pid == 0:
                _run_kernel(request, fds, close=[conn.fileno(), wake_r, wake_w, *status.values()])
            for fd in fds[:3]:
                os.close(fd)
            status[pid] = fds[3]
            conn.send(json.dumps({"pid": pid}).encode())


def _reap(status: dict[int, int]) -> None:
    while status:
        try:
            pid, raw = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = status.pop(pid, None)
        if fd is not None:
            try:
                os.write(fd, _CODE.pack(os.waitstatus_to_exitcode(raw)))  # -N: killed by signal N, as Popen says
            except OSError:
                pass  # nobody waits for this kernel any more
            os.close(fd)


def _run_kernel(request: dict, fds: list[int], close: list[int]) -> None:
    """In the forked child: becomes the kernel process and never returns."""
    code = 1
    try:
        os.setsid()  # its own process group, as jupyter_client's launcher starts kernels (interrupts go to the group)
        signal.set_wakeup_fd(-1)
        for fd in close:
            os.close(fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
            os.close(fd)
        os.close(fds[3])
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        _fresh_process_state()
        import runpy

        argv = request["argv"]
        # run_module puts the module's file in sys.argv[0], as `python -m` does. ipykernel read JPY_PARENT_PID when
        # the server imported it: the parent it must watch is given on the command line instead
        sys.argv = [argv[0], *argv[3:], *_parent_flag(request["env"])]
        try:
            runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
        finally:
            atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001 - reported on the kernel's stderr; the exit code says it failed
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def _parent_flag(env: dict[str, str]) -> list[str]:
    parent = env.get("JPY_PARENT_PID", "")
    return [f"--IPKernelApp.parent_handle={parent}"] if parent.isdigit() else []


def _fresh_process_state() -> None:
    """What a new interpreter would have read or drawn on its own (module docstring)."""
    time.tzset()  # TZ, read by the time module when it was imported (in the server)
    try:
        locale.setlocale(locale.LC_CTYPE, "")  # as Python's startup does, from LC_ALL / LC_CTYPE / LANG
    except locale.Error:
        pass  # a locale the system does not have: a new interpreter keeps "C" too
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()  # from the OS's entropy, as at numpy's import
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.seed()  # a new interpreter's default generators start from a random seed too
        threads = os.environ.get("OMP_NUM_THREADS", "")
        if threads.isdigit() and int(threads) > 0:
            torch.set_num_threads(int(threads))


# ---------------------------------------------------------------------------------------------------------------
# The starting process's side.

class ForkedKernel:
    """A kernel forked by the server, with the part of ``subprocess.Popen``'s interface jupyter_client uses."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int, status: socket.socket):
        self.pid = pid
        self.returncode: int | None = None
        self._status = status

    def poll(self) -> int | None:
        if self.returncode is None and self._status is not None:
            try:
                data = self._status.recv(_CODE.size, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return None
            self._status.close()
            self._status = None
            if len(data) == _CODE.size:
                self.returncode = _CODE.unpack(data)[0]
        if self.returncode is None and self._status is None:
            # the server ended before the kernel (which then ends too: its parent changed)
            self.returncode = _ended(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"forked kernel {self.pid}", timeout)
            step = 0.1 if left is None else min(left, 0.1)
            if self._status is not None:
                select.select([self._status], [], [], step)
            else:
                time.sleep(step)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _ended(pid: int) -> int | None:
    """None while ``pid`` runs; else its exit code when this process could collect it (an orphaned kernel is
    re-parented to us when we are a child subreaper), else ``-SIGKILL``: the code went with its parent.

    A zombie has ended: it passes ``os.kill(pid, 0)`` until its new parent collects it, which a subreaper that does
    not know it (``tini -s``, a container's PID 1) may never do."""
    try:
        reaped, raw = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child (the usual case: the server's)
        reaped, raw = 0, 0
    if reaped == pid:
        return os.waitstatus_to_exitcode(raw)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return -signal.SIGKILL
    except PermissionError:
        return None
    return -signal.SIGKILL if _zombie(pid) else None


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[:1] == ["Z"]


class _Client:
    """One of this process's fork servers, for kernels whose hash seed is ``hash_seed`` (None: random): started
    at the first such kernel, ended by closing our end of its socket."""

    def __init__(self, hash_seed: str | None):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.owner = os.getpid()
        self.lock = threading.Lock()
        # python_command: the server imports zmq, numpy, torch... from site-packages, never from this process's
        # folder, where another user may have left a module (`cd /tmp`, a class's shared folder). Not with -P: the
        # kernels forked from the server would keep the flag, and IPython then leaves their notebook's folder off
        # sys.path; without it each kernel gets that folder from IPython, as a kernel started anew does
        code = f"from sampan.utils.forkkernels import serve; serve({theirs.fileno()})"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
        if hash_seed is not None:
            env["PYTHONHASHSEED"] = hash_seed
        self.hash_seed = hash_seed
        self.process = subprocess.Popen(python_command("-c", code, safe_path_flag=False), pass_fds=[theirs.fileno()],
                                        stdin=subprocess.DEVNULL, env=env)
        theirs.close()
        self.conn = ours
        atexit.register(self.close)

    def close(self) -> None:
        """Ends the server (it sees our end of the socket close); kernels it forked end when they notice."""
        if os.getpid() != self.owner:
            return
        self.conn.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def start(self, argv: list[str], env: dict[str, str], cwd: str, streams: tuple) -> ForkedKernel:
        status, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = {**env, "JPY_PARENT_PID": str(self.process.pid)}
        request = json.dumps({"argv": argv, "env": env, "cwd": cwd}).encode()
        try:
            with self.lock:
                socket.send_fds(self.conn, [request], [*streams, theirs.fileno()])
                reply = self.conn.recv(_MAX_MESSAGE)
        except OSError:  # the server has ended (at its start, or since): said below with its exit code
            reply = b""
        theirs.close()
        answer = json.loads(reply) if reply else {"error": f"it ended (exit code {self.process.poll()})"}
        if "error" in answer:
            status.close()
            raise RuntimeError(f"The kernel fork server (pid {self.process.pid}) could not start the kernel: "
                               f"{answer['error']}. HINT: its own errors are on this process's stderr; unset "
                               f"{FORK_KERNELS_ENV} to start kernels as new interpreters.")
        return ForkedKernel(answer["pid"], status)


_CLIENTS: dict[str | None, _Client] = {}  # by hash seed


def _client(hash_seed: str | None) -> _Client:
    client = _CLIENTS.get(hash_seed)
    if client is None or client.owner != os.getpid() or client.process.poll() is not None:
        client = _CLIENTS[hash_seed] = _Client(hash_seed)
    return client


def _stream(value: Any, default: int) -> int:
    """The file descriptor a kernel's standard stream gets (``launch_kernel``'s stdout / stderr argument)."""
    if value is None:
        return default
    if value == subprocess.DEVNULL:
        return os.open(os.devnull, os.O_RDWR)
    return value if isinstance(value, int) else value.fileno()


def launch(cmd: list[str], env: dict[str, str] | None = None, cwd: str | None = None, stdout: Any = None,
           stderr: Any = None) -> ForkedKernel:
    """Forks a kernel for ``cmd`` (``<this Python> -m ipykernel_launcher ...``) from this process's fork server."""
    why = why_not_forked(cmd)
    if why:
        raise ValueError(f"Expected a kernel command `<this Python> -m ipykernel_launcher ...`. Received: cmd={cmd!r} "
                         f"({why}). HINT: start it with jupyter_client's launch_kernel instead.")
    return _fork(cmd, env, cwd, stdout, stderr)


def _fork(cmd: list[str], env: dict[str, str] | None, cwd: str | None, stdout: Any, stderr: Any) -> ForkedKernel:
    devnull = os.open(os.devnull, os.O_RDONLY)
    opened = []
    try:
        out, err = _stream(stdout, 1), _stream(stderr, 2)
        opened = [fd for fd, given in ((out, stdout), (err, stderr)) if given == subprocess.DEVNULL]
        env = dict(os.environ if env is None else env)
        return _client(_hash_seed(env)).start(list(cmd), env, str(cwd or os.getcwd()), (devnull, out, err))
    finally:
        for fd in (devnull, *opened):
            os.close(fd)


@functools.cache  # one class, made at first use: jupyter_client is not needed to import sampan
def _provisioner_class():
    from jupyter_client.provisioning import LocalProvisioner

    class ForkServerProvisioner(LocalProvisioner):
        """jupyter_client's local provisioner, with the kernel forked from the fork server when its command
        allows (:func:`why_not_forked`); otherwise it starts the kernel as the local provisioner does."""

        async def launch_kernel(self, cmd: list[str], **kwargs: Any):
            why = why_not_forked(cmd)
            if why:
                _log.info("Starting the kernel as a new interpreter, not forked: %s.", why)
                return await super().launch_kernel(cmd, **kwargs)
            self.process = _fork(cmd, kwargs.get("env"), kwargs.get("cwd"), kwargs.get("stdout"), kwargs.get("stderr"))
            self.pid = self.pgid = self.process.pid  # the child calls setsid(): it leads its own group
            self.cwd = kwargs.get("cwd", Path.cwd())
            return self.connection_info

    return ForkServerProvisioner


def __getattr__(name: str):
    if name == "ForkServerProvisioner":
        return _provisioner_class()
    if name == "ForkServerKernelManager":
        return _manager_class()
    raise AttributeError(name)


@functools.cache
def _manager_class():
    from sampan.utils.notebooks import EncryptedKernelManager

    class ForkServerKernelManager(EncryptedKernelManager):
        """:class:`sampan.utils.notebooks.EncryptedKernelManager` whose kernels come from the fork server
        (:data:`PROVISIONER`), unless the kernel spec names a provisioner of its own."""

        @property
        def kernel_spec(self):
            spec = EncryptedKernelManager.kernel_spec.fget(self)
            if spec is not None and "kernel_provisioner" not in spec.metadata:
                spec.metadata["kernel_provisioner"] = {"provisioner_name": PROVISIONER, "config": {}}
            return spec

    return ForkServerKernelManager
