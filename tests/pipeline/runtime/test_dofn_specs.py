"""``pipeline.runtime.dofn_specs``: Beam's DoFn state/timer introspection asked once per DoFn
object, with the same answers (stateful DoFns included) and a fresh copy per caller."""

from __future__ import annotations

import gc

import apache_beam as beam
from apache_beam.coders import VarIntCoder
from apache_beam.transforms import userstate

from pipeline.runtime import dofn_specs


class Plain(beam.DoFn):
    def process(self, x):
        yield x


class Stateful(beam.DoFn):
    TOTAL = userstate.CombiningValueStateSpec("total", VarIntCoder(), sum)

    def process(self, kv, total=beam.DoFn.StateParam(TOTAL)):  # noqa: B008 (Beam's idiom)
        total.add(kv[1])
        yield kv


def test_answers_equal_beams_own_and_are_asked_once_per_dofn(monkeypatch):
    dofn_specs.install()
    original = userstate.get_dofn_specs.__wrapped__
    calls = []

    def counting(dofn):
        calls.append(dofn)
        return original(dofn)

    monkeypatch.setattr(
        userstate, "get_dofn_specs", dofn_specs._remembering(counting), raising=True
    )
    plain, stateful = Plain(), Stateful()
    for _ in range(5):
        assert userstate.get_dofn_specs(plain) == original(plain) == (set(), set())
        assert userstate.get_dofn_specs(stateful) == original(stateful)
        assert not userstate.is_stateful_dofn(plain)
        assert userstate.is_stateful_dofn(stateful)
        userstate.validate_stateful_dofn(stateful)
    assert {id(d) for d in calls} == {id(plain), id(stateful)}
    assert len(calls) == 2
    states, _ = userstate.get_dofn_specs(stateful)
    states.clear()  # a caller's copy: the remembered answer is untouched
    assert userstate.get_dofn_specs(stateful)[0] == original(stateful)[0] != set()


def test_a_dofn_is_forgotten_with_the_object():
    dofn_specs.install()
    dofn = Plain()
    userstate.get_dofn_specs(dofn)
    key = id(dofn)
    assert key in dofn_specs._answers
    del dofn
    gc.collect()
    assert key not in dofn_specs._answers


def test_install_is_idempotent():
    dofn_specs.install()
    first = userstate.get_dofn_specs
    dofn_specs.install()
    assert userstate.get_dofn_specs is first
