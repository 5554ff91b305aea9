"""Beam's ``PipelineOptions.view_as``, one view per options object and class instead of one per
call.

Every ``view_as`` builds a new options object, and with it an ``argparse`` parser of every
option the class knows, then parses the flags again (~0.7 ms here); Beam asks for views at every
transform it applies (``TypeOptions`` in ``Pipeline._apply_internal`` and
``_infer_result_type``): ~840 parsers for the phases' pipeline, on the launcher's path before a
worker can start (measured 2026-12-04, benchmarks/RESULTS.md). A view holds nothing of its own:
it reads and writes the ``_all_options`` of the object it was asked from, so the same view
serves every later ask with the same class, as long as that object still has the same flags
and options (checked at each ask; a replaced one gets a new view).
"""

from __future__ import annotations

import weakref

_views: dict[tuple[int, type], tuple[weakref.ref, object, object, object]] = {}
_installed = False


def _remembering(original):
    def view_as(self, cls):
        key = (id(self), cls)
        entry = _views.get(key)
        if (
            entry is not None
            and entry[0]() is self
            and entry[1] is self._flags
            and entry[2] is self._all_options
        ):
            return entry[3]
        view = original(self, cls)
        try:
            ref = weakref.ref(self, lambda _, key=key: _views.pop(key, None))
        except TypeError:
            return view
        _views[key] = (ref, self._flags, self._all_options, view)
        return view

    view_as.__wrapped__ = original
    view_as.__doc__ = original.__doc__
    return view_as


def install() -> None:
    """Makes ``PipelineOptions.view_as`` (every subclass inherits it) remember its views.
    Idempotent."""
    global _installed
    if _installed:
        return
    from apache_beam.options.pipeline_options import PipelineOptions

    PipelineOptions.view_as = _remembering(PipelineOptions.view_as)
    _installed = True
