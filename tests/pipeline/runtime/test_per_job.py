"""``PerJobFn``: several jobs' DoFns in one ParDo, each seeing only its own elements, side input
values and bundle lifecycle; counts and rejects keyed by job; counters in per-job namespaces.
Real pipelines on the DirectRunner (in-memory and two worker processes)."""

from __future__ import annotations

import json

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter

from pipeline.files.artifacts import WriteJobRejects
from pipeline.runtime.beam_options import make_pipeline_options
from pipeline.runtime.counters import REJECTS_TAG, STATS_TAG, CountingDoFn, MergeCounts
from pipeline.runtime.local_runner import start
from pipeline.runtime.per_job import PerJobFn, job_namespace
from transforms.rejects import Reject

MODES = ["--direct_running_mode=in_memory", "--direct_running_mode=multi_processing"]


class ScaleFn(CountingDoFn):
    """x → x * factor; counts its elements; rejects negatives."""

    def __init__(self, factor: int) -> None:
        self.factor = factor
        self.set_up = 0

    def setup(self) -> None:
        self.set_up += 1

    def process(self, x: int):
        if x < 0:
            self.stats["rejected"] += 1
            yield self.reject(Reject.of("negative", f"value {x}", str(x)))
            return
        self.stats["seen"] += 1
        yield x * self.factor


class SideSumFn(beam.DoFn):
    """x → (x, sum of the side values, how many side lists it has been given)."""

    def __init__(self) -> None:
        self.lists: set[int] = set()

    def process(self, x: int, side: list[int]):
        self.lists.add(id(side))
        yield x, sum(side), len(self.lists)


def append_to(path):
    """A function that appends its argument to ``path`` as one JSON line."""

    def append(x) -> None:
        with open(path, "a") as f:
            f.write(json.dumps(x) + "\n")

    return append


def lines(path) -> list:
    return sorted(json.loads(x) for x in path.read_text().splitlines())


def run(build, mode: str = MODES[0]):
    p = beam.Pipeline(options=make_pipeline_options([mode]))
    build(p)
    result = start(p)
    result.wait_until_finish()
    return result


@pytest.mark.parametrize("mode", MODES)
def test_each_job_runs_its_own_fn_with_keyed_outputs_counts_and_counters(tmp_path, mode):
    jobs = {0: ScaleFn(10), 1: ScaleFn(100)}
    elements = [(0, 1), (1, 2), (0, 3), (1, -4), (1, 5)]

    def build(p):
        out = (
            p
            | beam.Create(elements)
            | beam.ParDo(PerJobFn(jobs, {0: "Job0", 1: "Job1"})).with_outputs(
                STATS_TAG, REJECTS_TAG, main="main"
            )
        )
        out.main | "Main" >> beam.Map(append_to(tmp_path / "main"))
        (
            out[STATS_TAG]
            | beam.CombinePerKey(MergeCounts())
            | "Stats" >> beam.Map(append_to(tmp_path / "stats"))
        )
        outputs = {0: str(tmp_path / "a"), 1: str(tmp_path / "b")}
        out[REJECTS_TAG] | "Rejects" >> WriteJobRejects(outputs)

    result = run(build, mode)
    assert lines(tmp_path / "main") == [[0, 10], [0, 30], [1, 200], [1, 500]]
    assert lines(tmp_path / "stats") == [[0, {"seen": 2}], [1, {"rejected": 1, "seen": 2}]]
    assert (tmp_path / "a" / "rejects.jsonl").read_text() == ""  # a job without rejects
    (reject,) = [json.loads(x) for x in (tmp_path / "b" / "rejects.jsonl").read_text().splitlines()]
    assert reject["reason"] == "negative"
    for label, seen in (("Job0", 2), ("Job1", 2)):
        query = result.metrics().query(MetricsFilter().with_namespace(job_namespace(label)))
        counts = {c.key.metric.name: c.committed for c in query["counters"]}
        assert counts["seen"] == seen
    rejected = result.metrics().query(MetricsFilter().with_namespace(job_namespace("Job1")))
    assert {c.key.metric.name: c.committed for c in rejected["counters"]}["rejected"] == 1


def test_keyed_side_input_gives_each_job_only_its_values_as_one_list(tmp_path):
    def build(p):
        side = p | "Side" >> beam.Create([(0, 1), (1, 10), (0, 2), (1, 20), (1, 30)])
        (
            p
            | "Main" >> beam.Create([(0, "a"), (1, "b"), (0, "c"), (1, "d")])
            | beam.ParDo(
                PerJobFn({0: SideSumFn(), 1: SideSumFn()}, {0: "A", 1: "B"}, keyed_side_input=True),
                beam.pvalue.AsList(side),
            )
            | beam.Map(append_to(tmp_path / "out"))
        )

    run(build)
    out = lines(tmp_path / "out")
    # Each job's fn sees the same list object on every call (one bundle here): its count stays 1.
    assert out == [[0, ["a", 3, 1]], [0, ["c", 3, 1]], [1, ["b", 60, 1]], [1, ["d", 60, 1]]]


def test_a_job_without_a_label_is_refused():
    with pytest.raises(ValueError, match="no label for jobs \\[1\\]"):
        PerJobFn({0: ScaleFn(1), 1: ScaleFn(2)}, {0: "Job0"})


def test_lifecycle_reaches_every_job_fn():
    fn = PerJobFn({0: ScaleFn(1), 1: ScaleFn(2)}, {0: "Job0", 1: "Job1"})
    fn.setup()
    fn.start_bundle()
    assert list(fn.process((1, 4))) == [(1, 8)]
    (stats,) = list(fn.finish_bundle())
    assert stats.tag == STATS_TAG and stats.value.value == (1, {"seen": 1})
    assert [f.set_up for f in fn.fns.values()] == [1, 1]
    assert fn.fns[0].counter_namespace == job_namespace("Job0")
