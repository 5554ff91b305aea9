"""The runner bertprep uses for ``--runner DaskRunner``: Beam's Dask runner, translated so that
it gives the DirectRunner's results for bertprep's batch pipelines.

Beam 2.77's ``apache_beam.runners.dask.DaskRunner`` turns each primitive into a ``dask.bag``
operation, but (found by running each construct on a ``dask.distributed`` cluster of 2 worker
processes) it computes only the last bag of the graph, so any other branch silently never runs;
it puts a ParDo's tagged outputs and main output into one bag, so every consumer sees every
output; it drops what a DoFn emits in ``finish_bundle`` (``combiners.Top`` returns ``[]``; every
bertprep count is emitted there); it cannot read a ``beam.io.Read`` source (``ReadFromParquet``
fails); it recomputes a side input inside every task that reads it; it puts every ``Create``
of up to 128 elements in one partition and leaves ``Reshuffle`` a no-op, so one task does the
whole job; and ``result.metrics()`` raises. This module keeps Beam's Dask options
(``--dask_client_address`` and the rest) and its ``Create``/``Reshuffle``/``Flatten`` overrides,
and translates the graph itself:

- every PCollection is its own bag: a ParDo's bag holds ``(tag, value)`` pairs and each output
  PCollection selects its tag; ``finish_bundle`` outputs are kept;
- the job computes every ParDo (its counters) and every PCollection nothing reads, in one
  ``client.compute``, so each task runs once and no branch is skipped;
- a side input is one dask task whose result every reader depends on (computed once);
- ``Create``, ``Reshuffle`` and ``GroupByKey`` spread elements over ``--dask_npartitions``
  partitions (default: 4 per worker thread of the cluster);
- each bundle (one partition) runs with a Beam metrics container; ``result.metrics()`` returns
  the counters of every task that succeeded (a retried task counts once).

Limits, refused with an error naming the transform: windows other than the global window,
splittable, stateful and timer DoFns, unbounded sources, primitives without a translation. Each
partition is one Beam bundle: the DoFn is unpickled, set up and torn down per partition.
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import os
import threading
from typing import Any

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.internal import pickler
from apache_beam.io.iobase import SourceBase
from apache_beam.metrics.execution import MetricsContainer, MetricUpdates
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.pipeline import AppliedPTransform, PipelineVisitor, PTransformOverride
from apache_beam.runners.common import Receiver
from apache_beam.runners.dask.dask_runner import DaskOptions
from apache_beam.runners.dask.overrides import _Create, _Flatten, _Read, _Reshuffle, dask_overrides
from apache_beam.runners.direct.direct_metrics import DirectMetrics
from apache_beam.runners.runner import PipelineResult, PipelineRunner, PipelineState
from apache_beam.transforms.window import GlobalWindow, GlobalWindows
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from pipeline.runtime.quiet import is_quiet
from transforms.errors import UserError

RUNNER = f"{__name__}.DaskRunner"
"""The ``--runner`` value ``pipeline.runtime.beam_options`` gives a job that asked for Dask."""

PARTITIONS_PER_THREAD = 4
"""Default partitions per worker thread that Create, Reshuffle and GroupByKey spread over."""

READ_BUNDLE_BYTES = 64 << 20
"""Desired bytes per split of a ``beam.io.Read`` source (one partition each)."""

_METRICS = "__bertprep_dask_metrics__"
"""The tag of the one (tag, MetricUpdates) pair each bundle adds to its ParDo's bag."""

_GLOBAL = (GlobalWindow(),)


class DaskTranslationError(UserError, ValueError):
    """A pipeline uses a construct bertprep's Dask translation does not support."""


SHARED_PATHS = (
    "on a cluster of several machines every path the job reads or writes (inputs, stage "
    "outputs, spills, progress, the launcher's temporary files) must be on a filesystem every "
    "machine mounts at the same path, or in a bucket (gs://...)"
)


class SharedPathError(UserError, OSError):
    """A worker cannot see a path the launcher wrote or sees: the path is not shared."""


class WorkerFileNotFoundError(FileNotFoundError):
    """A file a task needed was missing on its worker; says which worker, and where it ran."""

    def __str__(self) -> str:
        return self.strerror


def _missing_on_worker(e: FileNotFoundError, label: str) -> WorkerFileNotFoundError:
    import socket

    where = f"{socket.gethostname()} (pid {os.getpid()}, working directory {os.getcwd()})"
    message = f"{label}: no such file on the worker at {where}: {e.filename}"
    return WorkerFileNotFoundError(e.errno, message, e.filename)


def explain_missing(e: WorkerFileNotFoundError) -> Exception:
    """A worker's missing file as the launcher sees it: a ``SharedPathError`` when the
    launcher sees the path (it is not shared), else the worker's error unchanged."""
    if e.filename and os.path.exists(e.filename):
        return SharedPathError(
            f"{e}; the launcher sees {e.filename}, the worker does not: {SHARED_PATHS}"
        )
    return e


def check_workers_see(client, directory: str) -> None:
    """Writes a marker file into the local ``directory`` and has every worker of ``client``'s
    cluster look for it; raises ``SharedPathError`` naming the workers that do not see it.
    Buckets (``gs://``...) are not checked."""
    import uuid

    if "://" in directory and not directory.startswith("file://"):
        return
    directory = directory.removeprefix("file://")
    os.makedirs(directory, exist_ok=True)
    marker = os.path.join(directory, f".bertprep-shared-{uuid.uuid4().hex[:12]}")
    with open(marker, "w") as f:
        f.write("written by the bertprep launcher to check that every worker sees this path\n")
    try:
        seen = client.run(os.path.exists, marker)
    finally:
        os.remove(marker)
    blind = sorted(worker for worker, ok in seen.items() if not ok)
    if blind:
        raise SharedPathError(
            f"{len(blind)} of {len(seen)} Dask workers ({', '.join(blind)}) do not see "
            f"{directory}, which the launcher wrote: {SHARED_PATHS}"
        )


class _GroupByKey(beam.PTransform):
    """GroupByKey as one primitive (the global window only): translated to a dask shuffle."""

    def expand(self, pcoll):
        return pvalue.PCollection.from_(pcoll)


class _GroupByKeyOverride(PTransformOverride):
    def matches(self, applied_ptransform: AppliedPTransform) -> bool:
        return applied_ptransform.transform.__class__ == beam.GroupByKey

    def get_replacement_transform_for_applied_ptransform(self, applied_ptransform):
        return _GroupByKey()


def _overrides() -> list[PTransformOverride]:
    """Beam's Dask overrides, except its GroupByKey (window reification, then a grouping whose
    values lose the windows the next step expects); ours groups in the global window."""
    kept = [o for o in dask_overrides() if type(o).__name__ != "GroupByKeyOverride"]
    return [_GroupByKeyOverride(), *kept]


class _Collect(Receiver):
    """A Beam receiver that appends ``(tag, value)`` to one list (values leave their window)."""

    def __init__(self, tag: str | None, sink: list) -> None:
        super().__init__()
        self.tag, self.sink = tag, sink

    def receive(self, windowed_value: WindowedValue) -> None:
        self.sink.append((self.tag, windowed_value.value))


class _Receivers(dict):
    def __init__(self, sink: list) -> None:
        super().__init__()
        self.sink = sink

    def __missing__(self, tag):
        receiver = self[tag] = _Collect(tag, self.sink)
        return receiver


@dataclasses.dataclass(frozen=True)
class _ParDoSpec:
    """What a worker needs to run one ParDo's bundle (the DoFn pickled by Beam's pickler)."""

    label: str
    fn: bytes
    args: tuple
    kwargs: dict
    side_views: tuple  # (view class, view options) per side input, in the transform's order


def _run_bundle(items, spec: _ParDoSpec, *side_values) -> list:
    """Runs one partition as one Beam bundle; returns its ``(tag, value)`` outputs and, last,
    ``(_METRICS, MetricUpdates)``."""
    from apache_beam.runners.common import DoFnContext, DoFnInvoker, DoFnSignature, _OutputHandler
    from apache_beam.runners.worker import statesampler
    from apache_beam.transforms.sideinputs import SideInputMap
    from apache_beam.utils.counters import CounterFactory

    fn = pickler.loads(spec.fn)
    sink: list = []
    receivers = _Receivers(sink)
    handler = _OutputHandler(
        window_fn=GlobalWindows(),
        main_receivers=receivers[None],
        tagged_receivers=receivers,
        per_element_output_counter=None,
        output_batch_converter=None,
        process_yields_batches=False,
        process_batch_yields_elements=False,
    )
    side_inputs = [
        SideInputMap(view, options, [WindowedValue(v, MIN_TIMESTAMP, _GLOBAL) for v in values])
        for (view, options), values in zip(spec.side_views, side_values, strict=True)
    ]
    previous = statesampler.get_current_tracker()
    sampler = statesampler.StateSampler("dask", CounterFactory())
    statesampler.set_current_tracker(sampler)
    container = MetricsContainer(spec.label)
    try:
        with sampler.scoped_state(spec.label, "process", metrics_container=container):
            invoker = DoFnInvoker.create_invoker(
                DoFnSignature(fn),
                handler,
                context=DoFnContext(spec.label, state=None),
                side_inputs=side_inputs,
                input_args=list(spec.args),
                input_kwargs=dict(spec.kwargs),
                user_state_context=None,
                bundle_finalizer_param=beam.DoFn.BundleFinalizerParam(),
            )
            invoker.invoke_setup()
            invoker.invoke_start_bundle()
            for item in items:
                invoker.invoke_process(WindowedValue(item, MIN_TIMESTAMP, _GLOBAL))
            invoker.invoke_finish_bundle()
            invoker.invoke_teardown()
    except FileNotFoundError as e:
        raise _missing_on_worker(e, spec.label) from e
    finally:
        statesampler.set_current_tracker(previous)
    sink.append((_METRICS, container.get_cumulative()))
    return sink


def _select(pairs, tag):
    return [value for t, value in pairs if t == tag]


def _group(pairs) -> tuple[Any, list]:
    key, items = pairs
    return key, [value for _, value in items]


def _read_splits(splits) -> list:
    out: list = []
    for split in splits:
        tracker = split.source.get_range_tracker(split.start_position, split.stop_position)
        out.extend(split.source.read(tracker))
    return out


def _concat(*parts) -> list:
    return [item for part in parts for item in part]


class _Translation(PipelineVisitor):
    """Builds one dask bag per PCollection, and the list of what the job must compute."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.bags: dict[pvalue.PCollection, Any] = {}
        self.side_values: dict[pvalue.PCollection, Any] = {}
        self.metrics: list = []  # one bag of MetricUpdates per ParDo
        self.consumed: set[pvalue.PCollection] = set()

    def targets(self) -> tuple[list, list]:
        """(metrics bags, counts of the PCollections nothing reads)."""
        leaves = [bag.count() for pc, bag in self.bags.items() if pc not in self.consumed]
        return self.metrics, leaves

    def _side(self, pcoll: pvalue.PCollection):
        """The side input's elements as one task, shared by every reader."""
        if pcoll not in self.side_values:
            import dask

            parts = self.bags[pcoll].to_delayed(optimize_graph=False)
            self.side_values[pcoll] = dask.delayed(_concat, pure=True)(*parts)
        return self.side_values[pcoll]

    def _spread(self, bag):
        return (
            bag.repartition(npartitions=self.partitions)
            if bag.npartitions < self.partitions
            else bag
        )

    def visit_transform(self, node: AppliedPTransform) -> None:
        import dask.bag as db

        transform = node.transform
        main = [i for i in node.inputs if isinstance(i, pvalue.PCollection)]
        self.consumed.update(main)
        self.consumed.update(si.pvalue for si in node.side_inputs)
        inputs = [self.bags[i] for i in main]
        outputs = dict(node.outputs)
        label = node.full_label

        if isinstance(transform, _Create):
            items = list(transform.values)
            bag = db.from_sequence(items, npartitions=max(1, min(len(items), self.partitions)))
        elif isinstance(transform, beam.Impulse):
            bag = db.from_sequence([b""], npartitions=1)
        elif isinstance(transform, _Read):
            bag = self._read(transform.source, label)
        elif isinstance(transform, _Reshuffle):
            bag = self._spread(inputs[0])
        elif isinstance(transform, _Flatten):
            bag = db.concat(inputs) if inputs else db.from_sequence([], npartitions=1)
        elif isinstance(transform, _GroupByKey):
            (source,) = inputs
            npartitions = max(source.npartitions, self.partitions)
            bag = source.groupby(lambda kv: kv[0], npartitions=npartitions, shuffle="tasks").map(
                _group
            )
        elif isinstance(transform, beam.WindowInto):
            if not isinstance(transform.get_windowing(None).windowfn, GlobalWindows):
                raise DaskTranslationError(f"{label}: only the global window runs on Dask")
            bag = inputs[0]
        elif isinstance(transform, beam.ParDo):
            self._pardo(node, inputs[0], outputs)
            return
        else:
            raise DaskTranslationError(
                f"{label}: bertprep's Dask runner has no translation for {type(transform).__name__}"
            )
        (pcoll,) = outputs.values()
        self.bags[pcoll] = bag

    def _read(self, source: SourceBase, label: str):
        import dask.bag as db

        if not source.is_bounded():
            raise DaskTranslationError(f"{label}: unbounded sources do not run on Dask")
        splits = list(source.split(desired_bundle_size=READ_BUNDLE_BYTES))
        bag = db.from_sequence(splits or [], npartitions=max(1, min(len(splits), self.partitions)))
        return bag.map_partitions(_read_splits)

    def _pardo(self, node: AppliedPTransform, source, outputs: dict) -> None:
        from apache_beam.runners.common import DoFnSignature

        transform = node.transform
        signature = DoFnSignature(transform.fn)
        if signature.is_splittable_dofn() or signature.is_stateful_dofn():
            raise DaskTranslationError(
                f"{node.full_label}: splittable and stateful DoFns do not run on Dask"
            )
        spec = _ParDoSpec(
            label=node.full_label,
            fn=pickler.dumps(transform.fn),
            args=tuple(transform.args),
            kwargs=dict(transform.kwargs),
            side_views=tuple((type(si), si._view_options()) for si in node.side_inputs),
        )
        sides = [self._side(si.pvalue) for si in node.side_inputs]
        pairs = source.map_partitions(_run_bundle, spec, *sides)
        for tag, pcoll in outputs.items():
            self.bags[pcoll] = pairs.map_partitions(_select, tag)
        self.metrics.append(pairs.map_partitions(_select, _METRICS))


class DaskPipelineResult(PipelineResult):
    """A running job's futures; ``wait_until_finish`` gathers them and merges the counters."""

    def __init__(self, futures: list) -> None:
        super().__init__(PipelineState.RUNNING)
        self._futures = futures
        self._metrics = DirectMetrics()

    def wait_until_finish(self, duration=None) -> str:
        from distributed import wait

        if self.state != PipelineState.RUNNING:
            return self.state
        try:
            wait(self._futures, timeout=None if duration is None else duration / 1000)
            for future in self._futures:
                found = future.result()
                if isinstance(found, list):  # a metrics bag: MetricUpdates per bundle
                    for bundle, updates in enumerate(found):
                        if isinstance(updates, MetricUpdates):
                            self._metrics.commit_logical((future.key, bundle), updates)
        except WorkerFileNotFoundError as e:
            self._state = PipelineState.FAILED
            raise explain_missing(e) from e
        except BaseException:
            self._state = PipelineState.FAILED
            raise
        self._state = PipelineState.DONE
        return self._state

    def cancel(self) -> str:
        for future in self._futures:
            future.cancel()
        self._state = PipelineState.CANCELLED
        return self._state

    def metrics(self) -> DirectMetrics:
        """The counters (and other metrics) of every task that succeeded, once the job is done."""
        return self._metrics


_clients: dict[str, Any] = {}
_clients_lock = threading.Lock()


def dask_client(address: str | None = None, **kwargs):
    """The process's client of the cluster at ``address`` (one per address, reused by every
    pipeline of a job). Without an address: a local cluster of one single-threaded worker
    process per CPU, started once and closed when the process exits."""
    from distributed import Client, LocalCluster

    key = address or kwargs.get("scheduler_file") or ""
    if is_quiet():  # distributed's INFO lines (workers starting, connections) unless --verbose
        logging.getLogger("distributed").setLevel(logging.WARNING)
    with _clients_lock:
        client = _clients.get(key)
        if client is not None and client.status == "running":
            return client
        if key:
            client, cluster = Client(address, **kwargs), None
        else:
            cluster = LocalCluster(
                n_workers=os.cpu_count() or 1,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.WARNING,
            )
            client = Client(cluster, **kwargs)
        atexit.register(_close, client, cluster)
        _clients[key] = client
        return client


def close_clients() -> None:
    """Closes every client ``dask_client`` opened (and the local cluster it started)."""
    with _clients_lock:
        for client in _clients.values():
            _close(client, None)
        _clients.clear()


def _close(client, cluster) -> None:
    """Closes the client, then the local cluster, without the connection-closed tracebacks
    ``distributed`` logs while its own processes stop."""
    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    client.close()
    cluster = cluster or getattr(client, "cluster", None)
    if cluster is not None:
        cluster.close()


def cluster_threads(client) -> int:
    """Worker threads of the cluster now (at least 1)."""
    return max(1, sum(client.nthreads().values()))


def client_for(options: PipelineOptions):
    """The client of the cluster ``options`` name (``--dask_client_address`` and the rest)."""
    dask_options = options.view_as(DaskOptions).get_all_options(
        drop_default=True, current_only=True
    )
    DaskOptions._extract_bag_kwargs(dask_options)
    address = dask_options.pop("address", None)
    return dask_client(address, **dask_options)


def check_cluster_sees(options: PipelineOptions, directory: str) -> None:
    """``check_workers_see`` on the cluster ``options`` name: before a job's first pipeline."""
    check_workers_see(client_for(options), directory)


class DaskRunner(PipelineRunner):
    """Runs a batch pipeline on a ``dask.distributed`` cluster (see the module docstring)."""

    def run_pipeline(self, pipeline, options: PipelineOptions) -> DaskPipelineResult:
        dask_options = options.view_as(DaskOptions).get_all_options(
            drop_default=True, current_only=True
        )
        bag_kwargs = DaskOptions._extract_bag_kwargs(dask_options)
        client = client_for(options)
        partitions = bag_kwargs.get("npartitions") or PARTITIONS_PER_THREAD * cluster_threads(
            client
        )
        pipeline.replace_all(_overrides())
        translation = _Translation(partitions)
        pipeline.visit(translation)
        metrics, leaves = translation.targets()
        futures = client.compute([*metrics, *leaves])
        return DaskPipelineResult(futures)
