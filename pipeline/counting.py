"""A DoFn base that counts outcomes per bundle and emits them once, as Beam counters and as a
``stats`` output that the job merges exactly into its manifest."""

from __future__ import annotations

from collections import Counter

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from pipeline.progress import ProgressReporter
from pipeline.stats import STATS_TAG, report
from transforms.rejects import Reject


class CountingDoFn(beam.DoFn):
    """Subclasses add to ``self.stats`` and yield ``self.reject(r)`` for dead-letter records;
    those given a ``progress`` reporter add to it what they consume (flushed per bundle)."""

    progress: ProgressReporter | None = None

    def start_bundle(self) -> None:
        self.stats: Counter[str] = Counter()

    def finish_bundle(self):
        if self.progress is not None:
            self.progress.flush()
        if self.stats:
            report(self.stats)
            yield beam.pvalue.TaggedOutput(
                STATS_TAG,
                WindowedValue(dict(self.stats), MIN_TIMESTAMP, [GlobalWindow()]),
            )
        self.stats = Counter()

    @staticmethod
    def reject(r: Reject) -> beam.pvalue.TaggedOutput:
        from pipeline.stats import REJECTS_TAG

        return beam.pvalue.TaggedOutput(REJECTS_TAG, r.to_json())
