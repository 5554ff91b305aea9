"""Beam SDK workers forked from one warm process instead of started from scratch.

Beam's multi-process DirectRunner starts every SDK worker of every pipeline as a new Python
process (``python -m apache_beam.runners.worker.sdk_worker_main``): each one imports Beam, numpy,
pyarrow, numba and bertprep's modules and loads the compiled kernels before its first bundle,
about 1.5 s of CPU per worker per pipeline here, three pipelines per ``bertprep run``. The
*zygote* does that once: a process the launcher starts (``Zygote`` below; the CLI starts it
before it imports Beam itself, ``pipeline.cli``) that imports all of it (no thread, no gRPC channel, nothing run) and then forks one child per
worker the runner asks for. A child takes the environment and working directory the runner
would have given a new process, runs the worker start-up hooks (``worker_site/sitecustomize``)
and then Beam's ``sdk_worker_main``: the same worker, minus the imports.

Protocol (a Unix socket in a private directory, one connection per worker, peers of another
user refused): the launcher sends one JSON line ``{"env": {...}, "cwd": "...", "modules":
[...]}``; the zygote imports ``modules`` itself (the pipeline's DoFn modules: once, for every
later child), forks, answers ``{"pid": N}``, and ``{"status": S}`` when the child ends
(``os.waitstatus_to_exitcode``: -N for a signal, like ``Popen.returncode``). It ignores SIGINT
(Ctrl-C reaches the whole process group; the workers handle it themselves) and exits when its
standard input, a pipe from the launcher, closes: a launcher that dies takes it along.

``Zygote`` is the launcher's side (standard library only, so the CLI can start it before it
imports Beam itself); ``serve`` is the zygote's.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import select
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import traceback

WARM_MODULES = (
    "apache_beam.runners.worker.sdk_worker_main",
    "apache_beam.runners.worker.bundle_processor",
    "apache_beam.runners.worker.operations",
    "apache_beam.io.filesystems",
    "apache_beam.io.localfilesystem",
    "apache_beam.transforms.combiners",
    "numpy",
    "pyarrow",
    "pyarrow.parquet",
    "pyarrow.compute",
)
"""What every worker imports anyway, before any pipeline's own modules."""


KERNELS_ENV = "BERTPREP_ZYGOTE_KERNELS"
"""The zygote's own setting (never a worker's): the compiled-kernel groups it loads before its
first fork, comma-separated (``transforms.kernel_cache.KERNEL_GROUPS``; empty: none). Unset: all.
A worker that needs a kernel the zygote did not load loads it itself from numba's cache."""

MODULES_ENV = "BERTPREP_ZYGOTE_MODULES"
"""The zygote's own setting (never a worker's): modules its command's workers import while they
run, not at their DoFns' import (e.g. ``transforms.sentences``, which imports NLTK, ~0.4 s),
comma-separated; the zygote imports them while the launcher still builds its pipeline."""

FORKED_WORKERS_ENV = "BERTPREP_FORKED_WORKERS"
"""``0`` turns the zygote off: every worker is then a new process, as Beam starts them."""
_SAME_FOR_ZYGOTE = (
    "PYTHONPATH",
    "PYTHONHASHSEED",
    "BERTPREP_WORKER_DATAFLOW_CLIENT",
    "ARROW_DEFAULT_MEMORY_POOL",
    "BERTPREP_GC_THRESHOLDS",
    "BERTPREP_ALL_CLIENTS",
)
"""Environment variables that act when a process starts: a worker whose environment differs
from the zygote's in one of them is started as a new process instead."""
_READY_TIMEOUT_S = 120.0


class Zygote:
    """The launcher's handle on its zygote process: one per launcher, started on first use (the
    CLI and ``pipeline.runtime.beam_options`` ask for it early) and killed when the launcher
    exits."""

    _instance: Zygote | None = None
    _lock = threading.Lock()

    def __init__(
        self, kernels: tuple[str, ...] | None = None, modules: tuple[str, ...] = ()
    ) -> None:
        self._dir = tempfile.mkdtemp(prefix="bertprep-zygote-")
        if len(self._dir) > 90:  # a Unix socket's path has room for ~107 bytes
            self._dir = tempfile.mkdtemp(prefix="bertprep-zygote-", dir="/tmp")
        self.path = os.path.join(self._dir, "socket")
        self.environment = {k: os.environ.get(k) for k in _SAME_FOR_ZYGOTE}
        ready_read, ready_write = os.pipe()
        env = dict(os.environ)
        if kernels is not None:
            env[KERNELS_ENV] = ",".join(kernels)
        if modules:
            env[MODULES_ENV] = ",".join(modules)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pipeline.runtime.worker_zygote", self.path, str(ready_write)],
            stdin=subprocess.PIPE,
            pass_fds=(ready_write,),
            env=env,
        )
        os.close(ready_write)
        self._ready = threading.Event()
        self._failed = False
        threading.Thread(
            target=self._wait_ready, args=(ready_read,), name="zygote-ready", daemon=True
        ).start()
        atexit.register(self.close)

    def _wait_ready(self, fd: int) -> None:
        with os.fdopen(fd, "rb") as f:
            self._failed = f.readline().strip() != b"ready"
        self._ready.set()

    @classmethod
    def get(
        cls, kernels: tuple[str, ...] | None = None, modules: tuple[str, ...] = ()
    ) -> Zygote | None:
        """The running zygote (started now if none, loading the kernel groups ``kernels``, all
        by default, and importing ``modules``), or None when turned off."""
        if os.environ.get(FORKED_WORKERS_ENV, "1") == "0":
            return None
        with cls._lock:
            if cls._instance is None or cls._instance.process.poll() is not None:
                cls._instance = cls(kernels, modules)
            return cls._instance

    def usable_for(self, env: dict, command_line: str) -> bool:
        """Waits for the warm-up; True when it succeeded and a worker started by
        ``command_line`` with ``env`` would be the process the zygote forks."""
        if command_line != default_worker_command():
            return False
        if not self._ready.wait(_READY_TIMEOUT_S) or self._failed:
            return False
        same = all(env.get(k) == v for k, v in self.environment.items())
        return same and self.process.poll() is None

    def fork_worker(self, env: dict, modules: list[str]) -> int:
        """Forks a worker with ``env`` (the zygote imports ``modules`` first); blocks until it
        ends and returns its exit status (-N: killed by signal N)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(self.path)
            request = {"env": env, "cwd": os.getcwd(), "modules": modules}
            conn.sendall((json.dumps(request) + "\n").encode())
            status = None
            for line in conn.makefile("rb"):
                status = json.loads(line).get("status", status)
        if status is None:  # the zygote died: so did its children
            raise RuntimeError(
                "Worker subprocess exited with return code -9 (its zygote process ended)"
            )
        return status

    def close(self) -> None:
        """Kills the zygote (its workers have ended with their pipelines)."""
        with contextlib.suppress(Exception):
            self.process.kill()
            self.process.wait(timeout=5)
        with contextlib.suppress(Exception):
            os.unlink(self.path)
        with contextlib.suppress(Exception):
            os.rmdir(self._dir)


def default_worker_command() -> str:
    """The shell command of a multi-process worker as Beam makes it, ``exec`` added: the only
    one the zygote stands in for (a worker given by ``--environment_config`` is started as is)."""
    return f"exec {sys.executable} -m apache_beam.runners.worker.sdk_worker_main"


def _launcher_gone() -> bool:
    readable, _, _ = select.select([sys.stdin], [], [], 0)
    return bool(readable) and not os.read(sys.stdin.fileno(), 4096)


def _import_quietly(names) -> None:
    """Imports ``names``; one that fails is left for the worker to import (and report) itself."""
    for name in names:
        if name in sys.modules:
            continue
        if _launcher_gone():
            os._exit(0)
        with contextlib.suppress(Exception):
            importlib.import_module(name)


def _warm() -> None:
    _import_quietly(WARM_MODULES)
    from pipeline.runtime.dofn_specs import install as remember_dofn_specs

    remember_dofn_specs()
    _import_quietly([m for m in os.environ.pop(MODULES_ENV, "").split(",") if m])
    groups = os.environ.pop(KERNELS_ENV, None)
    with contextlib.suppress(Exception):
        from transforms.kernel_cache import KERNEL_GROUPS, warm

        # the compiled kernels loaded from numba's cache once, for all children
        warm(KERNEL_GROUPS if groups is None else tuple(g for g in groups.split(",") if g))


# The zygote process itself: everything below runs there and in its children.


def _run_child(request: dict) -> None:
    """In the forked child: become the worker the runner asked for, then exit: after every
    ``atexit`` handler, without the interpreter's teardown (as ``worker_site/sitecustomize``
    ends a finished worker), or through the full teardown with ``BERTPREP_FULL_EXIT`` set."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a new process's (quiet: 130)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        site = sys.modules.get("sitecustomize")
        if site is not None and hasattr(site, "worker_started"):
            site.worker_started()
        from apache_beam.runners.worker import sdk_worker_main

        sys.argv = [sdk_worker_main.__file__]
        sdk_worker_main.main(sys.argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    if os.environ.get("BERTPREP_FULL_EXIT"):
        sys.exit(code)
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _send(conn: socket.socket, message: dict) -> None:
    with contextlib.suppress(OSError):
        conn.sendall((json.dumps(message) + "\n").encode())


_REQUEST_LIMIT = 64 << 20
"""Bytes of one request at most (an environment and a module list: a few kB in practice)."""


def _read_request(conn: socket.socket) -> dict | None:
    """The request on ``conn``, or None for a peer of another user, an empty, truncated,
    oversized or malformed request (the zygote then closes the connection and carries on)."""
    credentials = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", credentials)
    if uid != os.getuid():
        return None
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(1 << 16)
        if not chunk or len(data) + len(chunk) > _REQUEST_LIMIT:
            return None
        data += chunk
    try:
        request = json.loads(data)
    except ValueError:
        return None
    valid = (
        isinstance(request, dict)
        and isinstance(request.get("env"), dict)
        and isinstance(request.get("cwd"), str)
        and isinstance(request.get("modules", []), list)
    )
    return request if valid else None


def serve(path: str, ready_fd: int) -> None:
    """Warms up, listens on ``path``, writes ``ready`` to ``ready_fd``, then forks a worker per
    request until standard input closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from pipeline.runtime.collector import apply_from_environment

    with contextlib.suppress(ValueError):  # malformed: the CLI says so; the zygote carries on
        apply_from_environment()  # the launcher's thresholds, before the imports; children inherit
    from pipeline.runtime.lean_imports import skip_unused_clients_in_worker

    skip_unused_clients_in_worker()  # as in a new worker (worker_site/sitecustomize); inherited
    _warm()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    os.write(ready_fd, b"ready\n")
    os.close(ready_fd)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "launcher")
    children: dict[int, tuple[int, socket.socket]] = {}  # pidfd → (pid, connection)
    while True:
        for key, _ in selector.select():
            if key.data == "launcher":
                if not os.read(sys.stdin.fileno(), 4096):
                    os._exit(0)
            elif key.data == "accept":
                conn, _ = listener.accept()
                request = _read_request(conn)
                if request is None:
                    conn.close()
                    continue
                _import_quietly(request.get("modules", ()))
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    listener.close()
                    conn.close()
                    for _, other in children.values():
                        other.close()
                    _run_child(request)
                pidfd = os.pidfd_open(pid)
                children[pidfd] = (pid, conn)
                selector.register(pidfd, selectors.EVENT_READ, "child")
                _send(conn, {"pid": pid})
            else:
                pid, conn = children.pop(key.fd)
                selector.unregister(key.fd)
                os.close(key.fd)
                _, status = os.waitpid(pid, 0)
                _send(conn, {"status": os.waitstatus_to_exitcode(status)})
                conn.close()


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
