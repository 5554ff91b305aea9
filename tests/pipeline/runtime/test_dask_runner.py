"""bertprep's Dask translation on a real ``dask.distributed`` cluster (2 worker processes): each
gap of Beam's own DaskRunner, run side by side with the DirectRunner."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import FixedWindows, GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from pipeline.runtime.beam_options import make_pipeline_options
from pipeline.runtime.dask_runner import RUNNER, DaskTranslationError
from transforms.errors import UserError

pytestmark = pytest.mark.xdist_group("dask")


def dask_options(cluster) -> list[str]:
    return ["--runner=DaskRunner", f"--dask_client_address={cluster.scheduler_address}"]


DIRECT = ["--direct_running_mode=in_memory"]


class Written(beam.DoFn):
    """Appends each element as a JSON line to ``path`` (a side effect the test reads back)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def process(self, element):
        with open(self.path, "a") as f:
            f.write(json.dumps(element) + "\n")
        yield element


def lines(path: Path) -> list:
    return (
        sorted(json.loads(line) for line in path.read_text().splitlines()) if path.exists() else []
    )


class Parity(beam.DoFn):
    """Even numbers on the main output, odd ones tagged; one count per bundle from finish_bundle."""

    def start_bundle(self) -> None:
        self.seen = 0

    def process(self, x):
        Metrics.counter("test", "seen").inc()
        self.seen += 1
        yield x if x % 2 == 0 else beam.pvalue.TaggedOutput("odd", x)

    def finish_bundle(self):
        yield beam.pvalue.TaggedOutput(
            "seen", WindowedValue(self.seen, MIN_TIMESTAMP, [GlobalWindow()])
        )


def branches(p: beam.Pipeline, out: Path) -> None:
    """Eight leaves, none feeding the last transform: each writes its own file."""
    nums = p | "Nums" >> beam.Create(list(range(40)))
    parts = nums | "Parity" >> beam.ParDo(Parity()).with_outputs("odd", "seen", main="even")
    parts.even | "Even" >> beam.ParDo(Written(out / "even"))
    parts.odd | "Odd" >> beam.ParDo(Written(out / "odd"))
    parts.seen | "Sum" >> beam.CombineGlobally(sum) | "Seen" >> beam.ParDo(Written(out / "seen"))
    nums | "Top" >> beam.combiners.Top.Smallest(3) | "WTop" >> beam.ParDo(Written(out / "top"))
    keyed = nums | "Key" >> beam.Map(lambda x: (f"k{x % 3}", x))
    (
        keyed
        | "Group" >> beam.GroupByKey()
        | "Sort" >> beam.MapTuple(lambda k, vs: [k, sorted(vs)])
        | "WGroup" >> beam.ParDo(Written(out / "group"))
    )
    ten = p | "Ten" >> beam.Create([10])
    (
        nums
        | "Add" >> beam.Map(lambda x, s: x + s, s=beam.pvalue.AsSingleton(ten))
        | "WAdd" >> beam.ParDo(Written(out / "side"))
    )
    empty = p | "Empty" >> beam.Create([])
    empty | "Count" >> beam.combiners.Count.Globally() | "WCount" >> beam.ParDo(Written(out / "n"))
    (
        ({"a": keyed, "b": p | "B" >> beam.Create([("k0", "b")])})
        | "Join" >> beam.CoGroupByKey()
        | "Shape" >> beam.MapTuple(lambda k, g: [k, len(g["a"]), list(g["b"])])
        | "WJoin" >> beam.ParDo(Written(out / "join"))
    )


def test_dask_runner_names_map_to_bertprep_translation():
    from apache_beam.options.pipeline_options import StandardOptions

    for name in ("DaskRunner", "apache_beam.runners.dask.dask_runner.DaskRunner"):
        options = make_pipeline_options([f"--runner={name}", "--dask_client_address=h:1"])
        assert options.view_as(StandardOptions).runner == RUNNER


def test_every_branch_tagged_and_finish_bundle_outputs_as_on_the_direct_runner(
    tmp_path, dask_cluster
):
    results = {}
    for name, args in (("direct", DIRECT), ("dask", dask_options(dask_cluster))):
        out = tmp_path / name
        out.mkdir()
        p = beam.Pipeline(options=make_pipeline_options(args))
        branches(p, out)
        result = p.run()
        result.wait_until_finish()
        counters = result.metrics().query()["counters"]
        results[name] = (
            {f.name: lines(f) for f in sorted(out.iterdir())},
            sum(c.committed for c in counters if c.key.metric.name == "seen"),
        )
    files, seen = results["dask"]
    assert results["dask"] == results["direct"]
    assert set(files) == {"even", "odd", "seen", "top", "group", "side", "n", "join"}
    assert files["even"] == list(range(0, 40, 2)) and files["odd"] == list(range(1, 40, 2))
    assert files["seen"] == [40] and seen == 40  # finish_bundle outputs and counters, all bundles
    assert files["top"] == [[0, 1, 2]] and files["n"] == [0]
    assert files["group"] == [[f"k{r}", list(range(r, 40, 3))] for r in range(3)]
    assert files["join"] == [["k0", 14, ["b"]], ["k1", 13, []], ["k2", 13, []]]


def test_a_side_input_is_computed_once_for_all_its_readers(tmp_path, dask_cluster):
    p = beam.Pipeline(options=make_pipeline_options(dask_options(dask_cluster)))
    side = p | "Side" >> beam.Create([1, 2, 3]) | "Made" >> beam.ParDo(Written(tmp_path / "made"))
    nums = p | "Nums" >> beam.Create(list(range(64)))
    for name in ("A", "B"):
        (
            nums
            | f"Spread{name}" >> beam.Reshuffle()
            | f"Use{name}" >> beam.Map(lambda x, s: x + sum(s), s=beam.pvalue.AsList(side))
            | f"W{name}" >> beam.ParDo(Written(tmp_path / name))
        )
    p.run().wait_until_finish()
    assert lines(tmp_path / "made") == [1, 2, 3]
    assert lines(tmp_path / "A") == lines(tmp_path / "B") == [x + 6 for x in range(64)]


def test_create_and_reshuffle_spread_work_over_every_worker(tmp_path, dask_cluster):
    def slow_pid(x):
        time.sleep(0.05)
        return os.getpid()

    p = beam.Pipeline(options=make_pipeline_options(dask_options(dask_cluster)))
    (
        p
        | beam.Create(["one task"])
        | "FanOut" >> beam.FlatMap(lambda _: range(32))
        | beam.Reshuffle()
        | beam.Map(slow_pid)
        | beam.ParDo(Written(tmp_path / "pids"))
    )
    p.run().wait_until_finish()
    pids = lines(tmp_path / "pids")
    assert len(pids) == 32 and len(set(pids)) == 2


def test_a_read_source_reads_every_row(tmp_path, dask_cluster):
    pq.write_table(pa.table({"x": list(range(1000))}), tmp_path / "t.parquet", row_group_size=100)
    p = beam.Pipeline(options=make_pipeline_options(dask_options(dask_cluster)))
    (
        p
        | beam.io.ReadFromParquet(str(tmp_path / "t.parquet"))
        | beam.Map(lambda row: row["x"])
        | beam.ParDo(Written(tmp_path / "rows"))
    )
    p.run().wait_until_finish()
    assert lines(tmp_path / "rows") == list(range(1000))


class Refused(UserError, ValueError):
    pass


def test_a_worker_error_reaches_the_launcher_as_itself(dask_cluster):
    def fail(x):
        raise Refused(f"bad input {x}")

    p = beam.Pipeline(options=make_pipeline_options(dask_options(dask_cluster)))
    p | beam.Create([7]) | beam.Map(fail)
    result = p.run()
    with pytest.raises(Refused, match="bad input 7"):
        result.wait_until_finish()
    assert result.state == "FAILED"


class Stateful(beam.DoFn):
    COUNT = beam.transforms.userstate.CombiningValueStateSpec("n", sum)

    def process(self, kv, n=beam.DoFn.StateParam(COUNT)):  # noqa: B008 (Beam's own idiom)
        yield kv


@pytest.mark.parametrize("construct", ["window", "state"])
def test_constructs_without_a_translation_are_refused_by_name(dask_cluster, construct):
    p = beam.Pipeline(options=make_pipeline_options(dask_options(dask_cluster)))
    nums = p | beam.Create([("a", 1)])
    if construct == "window":
        nums | "Windows" >> beam.WindowInto(FixedWindows(60))
    else:
        nums | "Counted" >> beam.ParDo(Stateful())
    with pytest.raises(DaskTranslationError, match="Windows|Counted"):
        p.run()
