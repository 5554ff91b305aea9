"""Several jobs' DoFns as one ParDo: elements carry their job's index, each runs in its own DoFn.

The instance phases of ``bertprep run`` are several jobs (seq128/seq512 × train/eval) in one
pipeline. As separate branches, the runner took each branch's stages one at a time, each with its
own start-up and barrier; with ``PerJobFn`` every job shares one stage per step, so all their
work is one pool for the workers. A job's DoFn sees exactly its own elements and side input
values, so what it writes is the same; its lifecycle calls (``setup``, ``start_bundle``,
``finish_bundle``, ``teardown``) come with every bundle of the shared stage, also one that holds
none of its elements (the DoFns here do nothing then: counts are emitted only when non-empty).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import apache_beam as beam
from apache_beam.utils.windowed_value import WindowedValue

from pipeline.runtime.counters import NAMESPACE


def job_namespace(label: str) -> str:
    """The Beam counter namespace of one job's counts in a shared stage (``bertprep:Job0``)."""
    return f"{NAMESPACE}:{label}"


def _keyed(job: int, output: Any) -> Any:
    """``output`` (a value, a ``WindowedValue`` or a ``TaggedOutput`` of either) with its value
    replaced by ``(job, value)``."""
    if isinstance(output, beam.pvalue.TaggedOutput):
        return beam.pvalue.TaggedOutput(output.tag, _keyed(job, output.value))
    if isinstance(output, WindowedValue):
        return output.with_value((job, output.value))
    return (job, output)


class PerJobFn(beam.DoFn):
    """``(job, element)`` → ``(job, output)`` for every output of ``fns[job].process(element)``.

    Tagged outputs (stats, rejects) are keyed the same way, and so is what each DoFn emits in
    ``finish_bundle``. ``CountingDoFn`` counters go to ``job_namespace(labels[job])``, so each
    job's totals can be read back apart (as do those of any DoFn with a ``counter_namespace``). With ``keyed_side_input``, the side input is a list of
    ``(job, value)`` and each DoFn gets the list of its own job's values (built once per side
    input, the same list object every call, as a DoFn caching on it expects).
    """

    def __init__(
        self,
        fns: Mapping[int, beam.DoFn],
        labels: Mapping[int, str],
        keyed_side_input: bool = False,
    ) -> None:
        if set(fns) - set(labels):
            raise ValueError(f"no label for jobs {sorted(set(fns) - set(labels))}")
        self.fns = dict(fns)
        for job, fn in self.fns.items():
            if hasattr(fn, "counter_namespace"):  # CountingDoFn and others
                fn.counter_namespace = job_namespace(labels[job])
        self._keyed_side_input = keyed_side_input
        self._side_source: object = None
        self._side: dict[int, list] = {}

    def setup(self) -> None:
        for fn in self.fns.values():
            fn.setup()

    def start_bundle(self) -> None:
        for fn in self.fns.values():
            fn.start_bundle()

    def process(self, element: tuple[int, Any], side: list | None = None):
        job, value = element
        fn = self.fns[job]
        if self._keyed_side_input:
            outputs = fn.process(value, self._side_of(job, side))
        else:
            outputs = fn.process(value)
        for output in outputs or ():
            yield _keyed(job, output)

    def finish_bundle(self):
        for job, fn in self.fns.items():
            for output in fn.finish_bundle() or ():
                yield _keyed(job, output)

    def teardown(self) -> None:
        for fn in self.fns.values():
            fn.teardown()

    def _side_of(self, job: int, side: Iterable[tuple[int, Any]] | None) -> list:
        if side is None:
            raise ValueError("PerJobFn(keyed_side_input=True) needs a side input")
        if self._side_source is not side:  # held, so its id cannot pass to another list
            grouped: dict[int, list] = {j: [] for j in self.fns}
            for j, value in side:
                grouped[j].append(value)
            self._side, self._side_source = grouped, side
        return self._side[job]
