"""Beam's DoFn state/timer introspection, once per DoFn object instead of at every ask.

``apache_beam.transforms.userstate.get_dofn_specs`` walks every method of a DoFn and builds an
``inspect.Signature`` for each (``dir`` + ``MethodWrapper``), and Beam asks it again and again for
the same DoFn: when the ParDo is applied, when its type hints are checked, when the pipeline is
translated, when a worker builds its bundle processor (``is_stateful_dofn``,
``validate_stateful_dofn``, ``to_runner_api_parameter``: about 6 times per ParDo). The phases'
pipeline has ~160 ParDos, so the launcher spent ~1 s of its start in it before a worker could
begin (measured 2026-12-04, benchmarks/RESULTS.md). The answer depends only on the DoFn's methods
and their default arguments, which do not change once the DoFn is built, so ``install()``
remembers it per DoFn object (by identity, dropped with the object); every caller still gets its
own copy of the two sets.
"""

from __future__ import annotations

import weakref

_answers: dict[int, tuple[weakref.ref, tuple[frozenset, frozenset]]] = {}
_installed = False


def _remembering(original):
    def get_dofn_specs(dofn):
        key = id(dofn)
        entry = _answers.get(key)
        if entry is not None and entry[0]() is dofn:
            states, timers = entry[1]
            return set(states), set(timers)
        states, timers = original(dofn)
        try:
            ref = weakref.ref(dofn, lambda _, key=key: _answers.pop(key, None))
        except TypeError:  # not weakly referenceable: not remembered
            return states, timers
        _answers[key] = (ref, (frozenset(states), frozenset(timers)))
        return set(states), set(timers)

    get_dofn_specs.__wrapped__ = original
    get_dofn_specs.__doc__ = original.__doc__
    return get_dofn_specs


def install() -> None:
    """Makes ``userstate.get_dofn_specs`` (and so ``is_stateful_dofn`` and
    ``validate_stateful_dofn``, which call it) remember its answer per DoFn. Idempotent."""
    global _installed
    if _installed:
        return
    from apache_beam.transforms import userstate

    userstate.get_dofn_specs = _remembering(userstate.get_dofn_specs)
    _installed = True
