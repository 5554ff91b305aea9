"""Packages whose ``__init__`` runs only when something asks the package itself for a name.

``import nltk.tokenize.punkt`` runs ``nltk/__init__.py`` first, and that imports nearly all of
NLTK (parsers, corpora readers, translation metrics, ...): ~0.15 s of the ~0.25 s it takes on a
2-core VM, in the workers' zygote of every command that splits sentences. Punkt itself needs
none of it. A package loaded by ``DeferredInitLoader`` (``pipeline.runtime.lean_imports`` uses it
for ``DEFERRED_INIT``) is a module with the package's ``__path__`` and spec, so its submodules
import as usual, and with its ``__init__`` code not yet run. The first attribute asked of it that
is not there and is not a submodule (a function defined in ``__init__``, ``__all__``,
``__version__``, ...) runs that code, in the same module object, and the answer is what the real
package gives: nothing changes but when the code runs. A submodule asked of it before then
(``from nltk import redos``) is imported, as ``from ... import`` does with any package.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import threading
from types import ModuleType

_IMPORT_ATTRIBUTES = frozenset({"__path__", "__file__", "__cached__", "__builtins__"})
"""Asked by the import system itself: never a reason to run the package's code."""
_lock = threading.RLock()


class _DeferredPackage(ModuleType):
    """A package whose ``__init__`` code runs on the first attribute it lacks."""

    def __getattr__(self, attribute: str):
        if attribute in _IMPORT_ATTRIBUTES or attribute.startswith("_bertprep_"):
            raise AttributeError(attribute)
        with _lock:
            loader = self.__dict__.get("_bertprep_pending")
            if loader is not None and not attribute.startswith("__"):
                submodule = f"{self.__name__}.{attribute}"
                if importlib.util.find_spec(submodule) is not None:  # ``from nltk import redos``
                    return importlib.import_module(submodule)
            if loader is not None:
                del self._bertprep_pending  # no second run, also while this one is running
                loader.exec_module(self)
        try:
            return self.__dict__[attribute]
        except KeyError:
            raise AttributeError(
                f"module {self.__name__!r} has no attribute {attribute!r}"
            ) from None


class DeferredInitLoader(importlib.abc.Loader):
    """Loads a package as a ``_DeferredPackage`` whose code ``loader`` runs later."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec):
        return _DeferredPackage(spec.name)

    def exec_module(self, module: ModuleType) -> None:
        module._bertprep_pending = self._loader

    def __getattr__(self, attribute: str):  # get_source, get_code, ...: the real loader's
        if attribute == "_loader":
            raise AttributeError(attribute)
        return getattr(self._loader, attribute)


def init_pending(module: ModuleType) -> bool:
    """Whether ``module`` is a deferred package whose ``__init__`` has not run yet."""
    return "_bertprep_pending" in module.__dict__
