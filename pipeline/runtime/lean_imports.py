"""Beam's import without the cloud and database clients a local job never calls.

``import apache_beam`` imports, at its own import, the client libraries of Google Cloud Storage
(for ``gs://``), Amazon S3, BigQuery, Pub/Sub, the Dataflow API (with apitools and httplib2) and
MongoDB: ~0.5 s of its ~1.2 s on a 2-core VM, in the launcher, in the workers' zygote and in every
new worker process, before any work starts.
``skip_unused_clients()``, called before Beam's first import in a process, keeps them out:

- **BigQuery, Pub/Sub, MongoDB** are not imported (``apache_beam.io`` guards them: it carries on
  without them, as on a machine without the ``gcp`` extra). bertprep calls none of them.
- **The Dataflow API client** (``google.cloud.dataflow``) and **apitools** (the older Google API
  client, with oauth2client and pyasn1) are not imported unless ``dataflow_client`` is true: only
  the Dataflow runner and BigQuery call them, in the launcher of a job run with ``--runner
  DataflowRunner``. Beam's retry filters (``apache_beam.utils.retry``) then know neither apitools'
  ``HttpError`` nor ``GoogleAPICallError`` and retry every error not marked permanent; only the
  skipped clients raise those (Cloud Storage retries by its own client's policy).
- **httplib2** (with pyparsing) is imported lazily (``importlib.util.LazyLoader``): Beam's
  stager imports it for downloading artifacts to stage for a remote runner, which a local job
  never does; the module runs on its first attribute access (for a ``gs://`` path, while the
  real Cloud Storage file system is imported, under the lock below: Python 3.11's LazyLoader
  has no lock of its own).
- **beartype** (~0.1 s), which only Beam's type-hint module imports, and which it calls only to
  compare two plain classes: that module runs with beartype stood in for, and the real one is
  imported on the first such comparison (``pipeline.runtime.deferred_beartype``).
- **Google Cloud Storage and Amazon S3** are imported on first use: ``gs://`` and ``s3://``
  paths keep working. A stand-in file system for the scheme takes the real one's place in Beam's
  registry (under the same import path, e.g. ``apache_beam.io.gcp.gcsfilesystem.GCSFileSystem``);
  the first time Beam asks it for a path, it imports the real one and hands the path to it; from
  then on Beam's list of file systems (``FileSystem.get_all_subclasses``, wrapped) leaves the
  stand-in out, and waits while another thread imports a real one.

In a process that has already imported Beam it does nothing (there is nothing left to save, and
the modules already loaded stay as they are). ``BERTPREP_ALL_CLIENTS=1`` turns it off.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import sys
import threading
from types import ModuleType

from pipeline.runtime import deferred_beartype

ALL_CLIENTS_ENV = "BERTPREP_ALL_CLIENTS"
"""``1``: import every client Beam imports (this module does nothing)."""

SKIPPED = (
    "apache_beam.io.gcp.bigquery",  # apache_beam.io's guarded group: BigQuery, Pub/Sub, xlang IO
    "pymongo",
    "bson",
)
"""Modules refused (ModuleNotFoundError), with their submodules."""

WORKER_DATAFLOW_CLIENT_ENV = "BERTPREP_WORKER_DATAFLOW_CLIENT"
"""``1``: a worker keeps the Dataflow API client (Beam imports it when installed)."""
DATAFLOW_CLIENT = ("google.cloud.dataflow", "google.cloud.dataflow_v1beta3", "apitools")
"""Refused unless ``dataflow_client``: the Dataflow API client, and apitools (the older Google API
client the Dataflow runner and BigQuery use)."""
LAZY = ("httplib2",)
"""Modules whose code runs on their first attribute access, not at their import."""
_WRAPPED_LOADERS = {
    **{name: importlib.util.LazyLoader for name in LAZY},
    deferred_beartype.IMPORTER: deferred_beartype.ImportWithoutBeartype,
}
"""Modules loaded by a wrapper around their own loader: ``LAZY``'s run on first use; Beam's
type-hint module runs with beartype stood in for (the wrapper runs it as it is when beartype is
imported already)."""
DEFERRED_FILESYSTEMS = {
    "apache_beam.io.gcp.gcsfilesystem": ("GCSFileSystem", "gs"),
    "apache_beam.io.aws.s3filesystem": ("S3FileSystem", "s3"),
}
"""Beam's file systems imported on first use: module → (class, scheme)."""
_REQUIRED = {"apache_beam.io.gcp.gcsfilesystem": "google.cloud.storage"}
"""What a deferred file system's import needs installed (Beam's ``gcp`` extra): without it no
stand-in is made, and Beam's own import fails and leaves the scheme out, as it always has (a
``gs://`` path then gets Beam's "pip install apache-beam[gcp]" error)."""
_MUTED_LOGGERS = ("apache_beam.io.mongodbio",)
"""Loggers that warn at import that a skipped client is missing (it is, on purpose): muted."""


def _matches(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


class _Finder(importlib.abc.MetaPathFinder):
    """Refuses the skipped modules; gives a stand-in for each of ``DEFERRED_FILESYSTEMS`` until
    the real one is asked for."""

    def __init__(self, refused: tuple[str, ...]) -> None:
        self.refused = refused
        self.real_wanted: set[str] = set()

    def find_spec(self, name, path=None, target=None):
        if _matches(name, self.refused):
            raise ModuleNotFoundError(f"{name} is not loaded by bertprep (lean_imports)", name=name)
        wrap = _WRAPPED_LOADERS.get(name)
        if wrap is not None:
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is not None and spec.loader is not None:
                spec.loader = wrap(spec.loader)
            return spec
        if name in DEFERRED_FILESYSTEMS and name not in self.real_wanted:
            required = _REQUIRED.get(name)
            if required is None or _installed(required):
                return importlib.machinery.ModuleSpec(name, _StandInLoader())
        return None


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # a parent package missing
        return False


class _StandInLoader(importlib.abc.Loader):
    def create_module(self, spec):
        return None

    def exec_module(self, module: ModuleType) -> None:
        class_name, scheme = DEFERRED_FILESYSTEMS[module.__name__]
        setattr(module, class_name, _stand_in_class(module.__name__, class_name, scheme))


_real: dict[str, type] = {}
"""The real file system classes imported so far, by module."""
_real_lock = threading.RLock()
"""Held while a real file system is imported, and while Beam lists its file systems."""
_finder: _Finder | None = None
_listing_wrapped = False


def _load_real(module_name: str) -> type:
    """The real file system class of ``module_name``, imported now (once per process)."""
    with _real_lock:
        if module_name not in _real:
            if _finder is not None:
                _finder.real_wanted.add(module_name)
            stand_in = sys.modules.pop(module_name, None)
            try:
                module = importlib.import_module(module_name)
            except BaseException:
                if stand_in is not None:
                    sys.modules[module_name] = stand_in
                raise
            _real[module_name] = getattr(module, DEFERRED_FILESYSTEMS[module_name][0])
        return _real[module_name]


def _list_without_replaced_stand_ins(original):
    """``FileSystem.get_all_subclasses`` (how Beam finds the file system of a path) without the
    stand-ins whose real file system is loaded: a scheme then has exactly one file system. It
    waits while another thread imports a real one (half defined, it would be a second)."""

    def get_all_subclasses(cls):
        with _real_lock:
            found = original.__func__(cls)
            return [c for c in found if getattr(c, "_stands_in_for", None) not in _real]

    return classmethod(get_all_subclasses)


def _stand_in_class(module_name: str, class_name: str, scheme: str) -> type:
    global _listing_wrapped
    from apache_beam.io.filesystem import FileSystem

    with _real_lock:
        if not _listing_wrapped:
            FileSystem.get_all_subclasses = _list_without_replaced_stand_ins(
                FileSystem.get_all_subclasses
            )
            _listing_wrapped = True

    class StandIn(FileSystem):
        """Stands in for one of Beam's file systems until a path of its scheme is used
        (``pipeline.runtime.lean_imports``)."""

        _stands_in_for = module_name

        @classmethod
        def scheme(cls) -> str:
            return scheme

        def __new__(cls, pipeline_options=None):
            return _load_real(module_name)(pipeline_options=pipeline_options)

    StandIn.__module__ = module_name
    StandIn.__name__ = StandIn.__qualname__ = class_name
    return StandIn


def skip_unused_clients(dataflow_client: bool = False) -> bool:
    """Installs the skipping described in the module doc, for the rest of this process and the
    processes it forks; True when installed, False when Beam was already imported, it is turned
    off, or it is installed already."""
    global _finder
    if _finder is not None or "apache_beam" in sys.modules or os.environ.get(ALL_CLIENTS_ENV):
        return False
    for name in _MUTED_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    _finder = _Finder(SKIPPED + (() if dataflow_client else DATAFLOW_CLIENT))
    sys.meta_path.insert(0, _finder)
    return True


def skip_unused_clients_in_worker() -> bool:
    """``skip_unused_clients`` for a Beam SDK worker (or the zygote that forks them): the Dataflow
    API client kept only with ``BERTPREP_WORKER_DATAFLOW_CLIENT`` set."""
    return skip_unused_clients(dataflow_client=bool(os.environ.get(WORKER_DATAFLOW_CLIENT_ENV)))


def runner_named(argv: list[str]) -> bool:
    """True when the command line names a Beam runner (``--runner X`` or ``--runner=X``): the
    launcher then keeps every client, since another runner may call them."""
    return any(a == "--runner" or a.startswith("--runner=") for a in argv)
