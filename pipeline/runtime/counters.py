"""Outcome counts: Beam counters for monitoring, an exact merged Counter for manifests, and the
DoFn base (``CountingDoFn``) that counts per bundle and emits them once as a ``stats`` output."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from pipeline.runtime.progress import ProgressReporter
from transforms.rejects import Reject

STATS_TAG = "stats"
REJECTS_TAG = "rejects"
NAMESPACE = "bertprep"


def report(stats: Counter[str], namespace: str = NAMESPACE) -> None:
    """Adds ``stats`` to the Beam counters of the same names in ``namespace``."""
    for name, value in stats.items():
        if value:
            Metrics.counter(namespace, name).inc(value)


class MergeCounts(beam.CombineFn):
    """Sums Counters (as plain dicts) into one dict with sorted keys."""

    def create_accumulator(self) -> Counter[str]:
        return Counter()

    def add_input(self, acc: Counter[str], item: dict[str, int]) -> Counter[str]:
        acc.update(item)
        return acc

    def merge_accumulators(self, accs: Iterable[Counter[str]]) -> Counter[str]:
        out: Counter[str] = Counter()
        for a in accs:
            out.update(a)
        return out

    def extract_output(self, acc: Counter[str]) -> dict[str, int]:
        return {k: int(acc[k]) for k in sorted(acc)}


def in_global_window(value):
    """``value`` as an element of the global window: what a ``finish_bundle`` must emit (it has
    no input element whose window the output could take)."""
    return WindowedValue(value, MIN_TIMESTAMP, [GlobalWindow()])


class CountingDoFn(beam.DoFn):
    """Subclasses add to ``self.stats`` and yield ``self.reject(r)`` for dead-letter records;
    those given a ``progress`` reporter add to it what they consume (flushed per bundle)."""

    progress: ProgressReporter | None = None
    counter_namespace: str = NAMESPACE
    """Where ``finish_bundle`` reports the Beam counters (one job's namespace in a shared stage,
    ``pipeline.runtime.per_job``)."""

    def start_bundle(self) -> None:
        self.stats: Counter[str] = Counter()

    def finish_bundle(self):
        if self.progress is not None:
            self.progress.flush()
        if self.stats:
            report(self.stats, self.counter_namespace)
            yield beam.pvalue.TaggedOutput(STATS_TAG, in_global_window(dict(self.stats)))
        self.stats = Counter()

    @staticmethod
    def reject(r: Reject) -> beam.pvalue.TaggedOutput:
        return beam.pvalue.TaggedOutput(REJECTS_TAG, r.to_json())
