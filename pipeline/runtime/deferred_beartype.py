"""Beam's type-hint module imported without beartype; beartype imported on its first use.

``apache_beam.typehints.typehints`` imports ``is_subhint`` and ``BeartypeDoorException`` from
beartype at its own import (~0.1 s of a 2-core VM's ~0.55 s lean ``import apache_beam``, in the
launcher and in the workers' zygote). It calls ``is_subhint`` only to compare two plain classes
while checking type hints, which bertprep's pipelines never reach.

``ImportWithoutBeartype`` wraps the loader of that one module (``pipeline.runtime.lean_imports``
installs it): while the module runs, ``beartype``, ``beartype.door`` and ``beartype.roar`` are
stand-ins, and they are taken out of ``sys.modules`` as soon as it has run, so any later import
of beartype, by anyone, is the real one. The module keeps two stand-in names:

- ``is_subhint`` imports the real ``beartype.door`` on its first call and returns what the real
  function returns; the real ``BeartypeDoorException`` (and its subclasses) it raises again as
- ``BeartypeDoorException``, the stand-in class, which is what Beam's ``except`` names: Beam
  then answers False, as it does with beartype imported up front.

Any other attribute asked of a stand-in module (should some other module import beartype while
Beam's runs) is the real module's attribute, imported then.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import sys
from types import ModuleType

IMPORTER = "apache_beam.typehints.typehints"
"""The module imported with beartype stood in for."""
STAND_IN_NAMES = ("beartype", "beartype.door", "beartype.roar")
"""The modules stood in for while ``IMPORTER`` runs."""


class BeartypeDoorException(Exception):
    """Stands in for ``beartype.roar.BeartypeDoorException``: raised by ``is_subhint`` where the
    real function raises that exception (or a subclass), with the real one as its cause."""


def _real(name: str) -> ModuleType:
    """The real module ``name`` (stand-ins left in ``sys.modules`` are dropped first: every one of
    them, so later imports of the others are real too)."""
    for stand_in in STAND_IN_NAMES:
        module = sys.modules.get(stand_in)
        if getattr(module, "_bertprep_stand_in", False):
            with contextlib.suppress(KeyError):  # another thread may have dropped it
                if sys.modules[stand_in] is module:
                    del sys.modules[stand_in]
    return importlib.import_module(name)


def is_subhint(subhint: object, superhint: object) -> bool:
    """``beartype.door.is_subhint``, imported on the first call."""
    door = _real("beartype.door")
    roar = importlib.import_module("beartype.roar")  # real: ``_real`` dropped every stand-in
    try:
        return door.is_subhint(subhint, superhint)
    except roar.BeartypeDoorException as error:
        raise BeartypeDoorException(str(error)) from error


_IMPORT_ATTRIBUTES = frozenset({"__path__", "__file__", "__cached__", "__builtins__"})


class _StandInModule(ModuleType):
    _bertprep_stand_in = True

    def __getattr__(self, attribute: str):
        if attribute in _IMPORT_ATTRIBUTES:  # asked by the import system: not the real module's
            raise AttributeError(attribute)
        return getattr(_real(self.__name__), attribute)


def _stand_ins() -> dict[str, ModuleType]:
    modules = {name: _StandInModule(name) for name in STAND_IN_NAMES}
    modules["beartype"].__path__ = []  # a package: ``import beartype.door`` finds the stand-in
    modules["beartype"].door = modules["beartype.door"]
    modules["beartype"].roar = modules["beartype.roar"]
    modules["beartype.door"].is_subhint = is_subhint
    modules["beartype.roar"].BeartypeDoorException = BeartypeDoorException
    return modules


class ImportWithoutBeartype(importlib.abc.Loader):
    """Runs ``loader``'s module with beartype stood in for (see the module doc), unless beartype
    is imported already."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        if "beartype" in sys.modules:
            self._loader.exec_module(module)
            return
        stand_ins = _stand_ins()
        sys.modules.update(stand_ins)
        try:
            self._loader.exec_module(module)
        finally:
            for name, stand_in in stand_ins.items():
                if sys.modules.get(name) is stand_in:
                    del sys.modules[name]

    def __getattr__(self, attribute: str):  # get_source, get_code, ...: the real loader's
        if attribute == "_loader":
            raise AttributeError(attribute)
        return getattr(self._loader, attribute)
