"""Outcome counts: Beam counters for monitoring, and an exact merged Counter for manifests."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import apache_beam as beam
from apache_beam.metrics import Metrics

STATS_TAG = "stats"
REJECTS_TAG = "rejects"
NAMESPACE = "bertprep"


def report(stats: Counter[str]) -> None:
    """Adds ``stats`` to the Beam counters of the same names."""
    for name, value in stats.items():
        if value:
            Metrics.counter(NAMESPACE, name).inc(value)


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
