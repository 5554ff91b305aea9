"""Beam SDK workers forked from one warm process instead of started from scratch.

Beam's multi-process DirectRunner starts every SDK worker of every pipeline as a new Python
process (``python -m apache_beam.runners.worker.sdk_worker_main``): each one imports Beam, numpy,
pyarrow, numba and bertprep's modules and loads the compiled kernels before its first bundle,
about 1.5 s of CPU per worker per pipeline here, three pipelines per ``bertprep run``. The
*zygote* does that once: a process the launcher starts (``pipeline.runtime.local_runner.Zygote``)
that imports all of it (no thread, no gRPC channel, nothing run) and then forks one child per
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
import sys
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
    with contextlib.suppress(Exception):
        from transforms.kernel_cache import warm

        warm()  # every compiled kernel loaded from numba's cache once, for all children


def _run_child(request: dict) -> None:
    """In the forked child: become the worker the runner asked for, then exit."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
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
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _send(conn: socket.socket, message: dict) -> None:
    with contextlib.suppress(OSError):
        conn.sendall((json.dumps(message) + "\n").encode())


def _read_request(conn: socket.socket) -> dict | None:
    credentials = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", credentials)
    if uid != os.getuid():
        return None
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(1 << 16)
        if not chunk:
            return None
        data += chunk
    return json.loads(data)


def serve(path: str, ready_fd: int) -> None:
    """Warms up, listens on ``path``, writes ``ready`` to ``ready_fd``, then forks a worker per
    request until standard input closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
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
