"""Keeping Beam's and TensorFlow's start-up chatter off a user's terminal (``--verbose`` keeps it).

- ``quiet_subprocesses()``: for the processes bertprep starts (Beam's multi-process SDK workers
  inherit the launcher's environment and stderr): ``BERTPREP_QUIET=1``, ``pipeline/runtime/worker_site``
  first on PYTHONPATH (its ``sitecustomize`` keeps their stderr logging to errors) and
  ``TF_CPP_MIN_LOG_LEVEL=3`` unless already set (hides "failed call to cuInit", an error line on
  any machine without a GPU).
- ``import_tensorflow()``: imports TensorFlow; when quiet, with file descriptor 2 sent to a
  temporary file meanwhile, because its C++ start-up lines (absl's "All log messages before
  absl::InitializeLog()", "Could not find cuda drivers") ignore every log level setting. They are
  written out after all if the import fails.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

QUIET_ENV = "BERTPREP_QUIET"
WORKER_SITE = str(Path(__file__).resolve().parent / "worker_site")


def quiet_subprocesses() -> None:
    """Sets the environment the processes started from now on inherit (see the module doc)."""
    os.environ[QUIET_ENV] = "1"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    use_worker_site()


def use_worker_site() -> None:
    """Puts ``pipeline/runtime/worker_site`` first on the PYTHONPATH of the processes started from now on
    (quiet or not, its ``sitecustomize`` also ends finished Beam workers without teardown)."""
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if WORKER_SITE not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([WORKER_SITE, *paths])


def is_quiet() -> bool:
    return bool(os.environ.get(QUIET_ENV))


@contextlib.contextmanager
def stderr_silenced() -> Iterator[None]:
    """File descriptor 2 goes to a temporary file inside the block; replayed if it raises."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            sink.seek(0)
            os.write(2, sink.read())
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def import_tensorflow() -> ModuleType:
    """``import tensorflow``, its start-up lines silenced when quiet (``BERTPREP_QUIET``)."""
    if "tensorflow" in sys.modules or not is_quiet():
        import tensorflow

        return tensorflow
    with stderr_silenced():
        import tensorflow
    return tensorflow
