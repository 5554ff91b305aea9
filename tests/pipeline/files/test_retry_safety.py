"""Retry safety of every DoFn that writes files (issue 12).

A retrying runner (Dataflow) may run a bundle twice on the same input: one attempt after another
(a worker died), or both at once (a backup task). Each file-writing DoFn is driven here as a
runner drives it — the real DoFn, pickled and unpickled as a worker receives it, ``setup``,
``start_bundle``, ``process`` with its side inputs, ``finish_bundle`` — on inputs that the real
upstream DoFns made from the embedded sample. For each one:

- two attempts in sequence, interleaved (A starts, B runs fully, A finishes) and in parallel
  threads leave exactly the files of a single attempt, byte for byte, and no temporary file;
- an attempt killed mid-write (a real write failure: the process's file-size limit makes a write
  past it fail, as a full disk or a worker dying mid-write leaves a truncated file) leaves
  nothing the next stage's file matcher picks up but complete files, and a retry the full
  result; a late attempt dying after another one finished does not damage the finished files.
"""

from __future__ import annotations

import heapq
import json
import lzma
import resource
import shutil
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.internal import pickler
from apache_beam.pvalue import TaggedOutput
from apache_beam.utils.windowed_value import WindowedValue

from pipeline import clean_stages
from pipeline.files.artifacts import (
    RejectsPart,
    matching_paths,
    merge_reject_parts,
    parquet_rows,
    read_json,
    read_parquet,
    write_bytes_atomically,
    write_json,
)
from pipeline.files.input_files import expand_inputs
from pipeline.files.punkt_files import load_punkt_parameters_from
from pipeline.files.shard_writer import WriteShardFn
from pipeline.files.source_readers import SourceReader, WorkUnit
from pipeline.files.token_files import INDEX_SUFFIX, data_path_of
from pipeline.jobs.clean import SOURCES, CleanJobConfig, work_units
from pipeline.jobs.instances import InstancesJobConfig, token_tables
from pipeline.jobs.split import SplitFileFn
from pipeline.jobs.vocab import _keyed_sentences, _read_lines, _write_lines
from pipeline.runtime.counters import MergeCounts
from pipeline.steps.bert_text_source import TokenizeBertTextFn
from pipeline.steps.instance_creation import (
    BucketSlicesFn,
    CreateInstancesFn,
    ExpandDupePassesFn,
    bucket_count,
)
from pipeline.steps.tokenize_documents import load_documents
from pipeline.steps.tokenize_files import TokenizeFileFn
from shards.files import ShardPathError
from shards.resolve import expand_shard_paths
from tokenizer.vocab import Vocab
from transforms.duplicate_keys import chunk_of, row_of
from transforms.punkt_tables import PunktTables

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "sample"
SEED = 12345
PARTIAL = ".partial-"


# --- driving a DoFn as a runner does -------------------------------------------------------------


class Attempt:
    """One attempt at a bundle of ``elements``: ``setup`` (on a fresh copy of ``fn``, pickled and
    unpickled as a worker receives it) and ``start_bundle`` done; ``process`` runs lazily.

    ``reuse=True`` runs the bundle on ``fn`` itself, as a runner that keeps a DoFn instance after a
    failed bundle does (no second ``setup``)."""

    def __init__(self, fn: beam.DoFn, elements: list, side: tuple = (), reuse: bool = False):
        self.fn = fn if reuse else pickler.loads(pickler.dumps(fn))
        if not reuse:
            self.fn.setup()
        self.fn.start_bundle()
        self.main: list = []
        self.tagged: dict[str, list] = {}
        self._elements = iter(elements)
        self._side = side
        self._current: Iterator = iter(())

    def advance(self) -> Attempt:
        """Runs the bundle to its next output (a generator ``process`` pauses there) or through
        its next element (a ``process`` that returns): an attempt started, not finished."""
        while True:
            for out in self._current:
                self._take(out)
                return self
            element = next(self._elements, _DONE)
            if element is _DONE:
                return self
            started = self.fn.process(element, *self._side)
            self._current = iter(started or [])
            if not isinstance(started, Iterator):
                for out in self._current:
                    self._take(out)
                return self

    def finish(self) -> Attempt:
        for out in self._current:
            self._take(out)
        for element in self._elements:
            for out in self.fn.process(element, *self._side) or []:
                self._take(out)
        for out in self.fn.finish_bundle() or []:
            self._take(out)
        self.fn.teardown()
        return self

    @property
    def stats(self) -> list[dict]:
        """The counts the bundle emitted (finish_bundle's ``stats`` output)."""
        return self.tagged.get("stats", [])

    def _take(self, out) -> None:
        if isinstance(out, TaggedOutput):
            value = out.value.value if isinstance(out.value, WindowedValue) else out.value
            self.tagged.setdefault(out.tag, []).append(value)
        else:
            self.main.append(out.value if isinstance(out, WindowedValue) else out)


_DONE = object()


def run(fn: beam.DoFn, elements: list, side: tuple = ()) -> Attempt:
    return Attempt(fn, elements, side).finish()


@contextmanager
def file_size_limit(limit: int):
    """No file this process writes can grow past ``limit`` bytes: the write that would fails
    with EFBIG and leaves the file cut there, as a full disk or a worker dying mid-write does."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def partials(directory: Path) -> list[str]:
    """Temporary files (uncommitted attempts) under ``directory``."""
    return sorted(str(p.relative_to(directory)) for p in directory.rglob(f"*{PARTIAL}*"))


# --- the real upstream stages, run once on the embedded sample ------------------------------------


@dataclass
class Upstream:
    """Every stage's real inputs and outputs on the sample (each DoFn run once, in order)."""

    root: Path
    units: list[tuple]
    exact_groups: dict[int, list[bytes]]
    exact_drops: list[tuple]
    band_pairs: list[bytes]
    joined: dict[tuple[int, int], dict]
    punkt_samples: list[tuple[int, int]]
    tables: object
    settings: object
    token_tables: object
    vocab: Vocab
    slices: dict[int, list] = field(default_factory=dict)
    tasks: list[tuple] = field(default_factory=list)
    spills: list = field(default_factory=list)
    text_files: list = field(default_factory=list)

    @property
    def staging(self) -> Path:
        return self.root / "staging"

    @property
    def clean(self) -> Path:
        return self.root / "clean"

    @property
    def split(self) -> Path:
        return self.root / "split"

    @property
    def tokens(self) -> Path:
        return self.root / "tokens"


def write_duplicates(path: Path) -> Path:
    """A JSONL corpus of sample book passages, some repeated exactly and some with one word
    changed, so both duplicate stages have something to drop (the sample has no duplicates)."""
    words = (SAMPLE / "books" / "sample-book-1.txt").read_text(encoding="utf-8").split()
    passages = [" ".join(words[i : i + 300]) for i in range(0, 1800, 300)]
    near = [p.replace(" the ", " a ", 1) for p in passages[3:]]
    texts = passages + passages[:3] + near
    path.parent.mkdir(parents=True)
    path.write_text(
        "".join(
            json.dumps({"title": f"passage {i}", "text": t}) + "\n" for i, t in enumerate(texts)
        )
    )
    return path


def stage_documents_fn(staging: Path) -> clean_stages.StageDocumentsFn:
    reader = SourceReader("text", "title", False)
    return clean_stages.StageDocumentsFn(reader, str(staging), 20, "near", SEED, 24, 16 << 20)


@pytest.fixture(scope="module")
def up(tmp_path_factory) -> Upstream:
    """The clean stages wired as ``clean_job.build_pipeline`` wires them (its GroupByKey,
    CoGroupByKey and Top.Smallest done by hand), then split, tokenize and the pretokenized
    instance stages as ``instances_job`` wires them: each DoFn run once, in order."""
    root = tmp_path_factory.mktemp("upstream")
    staging, clean = root / "staging", root / "clean"
    config = CleanJobConfig(output=str(clean))
    inputs = {
        "wikipedia": [str(SAMPLE / "wiki" / "*.xml")],
        "books": [str(SAMPLE / "books" / "*.txt")],
        "jsonl": [str(write_duplicates(root / "inputs" / "duplicates.jsonl"))],
    }
    files = {kind: expand_inputs(patterns) for kind, patterns in inputs.items()}
    units = [(kind, u) for kind in SOURCES for u in work_units(kind, files.get(kind, []), config)]
    elements = [(i, kind, u) for i, (kind, u) in enumerate(units)]
    stage_fn = stage_documents_fn(staging)
    chunks, exact_groups, bands = [], {}, {}
    for element in elements:
        staged = run(stage_fn, [element])
        chunks += staged.main
        for partition, table in staged.tagged.get(clean_stages.EXACT_TAG, []):
            exact_groups.setdefault(partition, []).append(table)
        for band, chunk in staged.tagged.get(clean_stages.BANDS_TAG, []):
            bands.setdefault(band, []).append(chunk)
    exact_drops = []
    for partition in sorted(exact_groups):
        exact_drops += run(
            clean_stages.ExactDuplicatesFn(str(staging)), [(partition, exact_groups[partition])]
        ).main
    band_pairs = [
        b
        for band in sorted(bands)
        for b in run(clean_stages.BandCandidatesFn(str(staging)), [(band, bands[band])]).main
    ]
    near_drops = run(
        clean_stages.VerifyNearDuplicatesFn(str(staging), 0.8), [band_pairs], (exact_drops,)
    ).main
    joined = {c.key: {"chunk": [c], "drops": []} for c in chunks}
    for loc, _, _ in exact_drops + near_drops:
        joined[chunk_of(loc)]["drops"].append(row_of(loc))
    candidates = [
        c for item in joined.items() for c in clean_stages.punkt_sample_candidates(item, 2000)
    ]
    samples = heapq.nsmallest(2000, candidates, key=lambda kv: kv[0])
    tables = clean_stages.train_punkt(samples, str(staging), str(clean))
    for item in sorted(joined.items()):
        run(clean_stages.FinishChunkFn(str(staging), str(clean), 2000, True), [item], (tables,))
    for path in matching_paths(str(clean / "documents-*.parquet")):
        run(SplitFileFn(str(root / "split"), SEED, 0.1), [path])
    vocab = Vocab.from_file(SAMPLE / "vocab.txt")
    outputs = {side: str(root / "tokens" / side) for side in ("train", "eval")}
    for side in ("train", "eval"):
        for path in matching_paths(str(root / "split" / side / "documents-*.parquet")):
            run(TokenizeFileFn(vocab, True, outputs), [(side, path)])
    job = InstancesJobConfig(
        inputs=["-"], vocab=str(SAMPLE / "vocab.txt"), output="-", dupe_factor=2, num_shards=4
    )
    upstream = Upstream(
        root,
        elements,
        exact_groups,
        exact_drops,
        band_pairs,
        joined,
        samples,
        tables,
        job.settings(),
        token_tables(vocab, job),
        vocab,
    )
    indexes = matching_paths(str(root / "tokens" / "train" / f"tokens-*{INDEX_SUFFIX}"))
    buckets = bucket_count(sum(parquet_rows(p) for p in indexes), 64)
    for path in indexes:
        for bucket, table in run(BucketSlicesFn(SEED, buckets), [path]).main:
            upstream.slices.setdefault(bucket, []).append(table)
    spill = root / "spill"
    for bucket in sorted(upstream.slices):
        upstream.tasks += run(
            ExpandDupePassesFn(2, str(spill)), [(bucket, upstream.slices[bucket])]
        ).main
    for task in upstream.tasks:
        upstream.spills += run(
            CreateInstancesFn(job.settings(), upstream.token_tables, str(spill), 4), [task]
        ).main
    corpus = expand_inputs([str(SAMPLE / "corpus" / "part-000.txt")])
    upstream.text_files = corpus
    return upstream


# --- the cases: each file-writing DoFn on one real input ------------------------------------------


@dataclass
class Case:
    """A file-writing DoFn on a real input: ``make`` builds it for a work directory, ``reader``
    lists the files the next stage reads there (its own pattern or the attempt's references)."""

    name: str
    make: Callable[[Upstream, Path], beam.DoFn]
    elements: Callable[[Upstream], list]
    reader: Callable[[Path, Attempt | None], list[str]]
    side: Callable[[Upstream], tuple] = lambda up: ()
    prepare: Callable[[Upstream, Path], None] = lambda up, work: None
    unique_names: bool = False
    """Files under attempt-unique names (read only through the attempt's references)."""


def matcher(*patterns: str) -> Callable[[Path, Attempt | None], list[str]]:
    """The next stage's file matcher: everything matching ``patterns`` under the work dir."""
    return lambda work, _: [p for pattern in patterns for p in matching_paths(str(work / pattern))]


def token_files(work: Path, _: Attempt | None) -> list[str]:
    """What the instance phases read: each index and the data file it describes, and the rejects
    parts merged into rejects.jsonl."""
    indexes = matching_paths(str(work / "train" / f"tokens-*{INDEX_SUFFIX}"))
    rejects = matching_paths(str(work / "train" / ".rejects-*.jsonl"))
    return indexes + [data_path_of(p) for p in indexes] + rejects


def shard_files(work: Path, _: Attempt | None) -> list[str]:
    """The shards the trainer and the shard tools find in the output directory."""
    try:
        return expand_shard_paths([str(work)])
    except ShardPathError:
        return []


def spilled_files(work: Path, attempt: Attempt | None) -> list[str]:
    """The spill files the bucket stage reads: those the attempt's references name."""
    return sorted({path for table in attempt.main for path in table.paths}) if attempt else []


def copy_staged_chunks(up: Upstream, work: Path) -> None:
    """The staged chunk files the near-duplicate check reads (it writes beside them)."""
    work.mkdir(parents=True, exist_ok=True)
    for path in up.staging.glob("chunk-*.parquet"):
        shutil.copy(path, work / path.name)


def biggest_exact_partition(up: Upstream) -> list:
    """The hash partition with the most exact duplicates."""
    from transforms import duplicate_keys as dk

    def duplicates(item) -> int:
        return len(dk.exact_duplicates(dk.ExactKeys.from_bytes(t) for t in item[1]))

    return sorted(sorted(up.exact_groups.items()), key=duplicates)[-2:]


CASES = [
    Case(
        "clean_stages.StageDocumentsFn",
        lambda up, work: stage_documents_fn(work),
        lambda up: [max(up.units, key=lambda e: Path(e[2].path).stat().st_size), up.units[-1]],
        matcher("chunk-*.parquet", "bands-*.u64", "rejects-*.jsonl"),
    ),
    Case(
        "clean_stages.StageDocumentsFn, finishing (no dedup, a pretrained splitter)",
        lambda up, work: clean_stages.StageDocumentsFn(
            SourceReader("text", "title", False),
            str(work),
            20,
            "none",
            None,
            24,
            16 << 20,
            finish=clean_stages.FinishSettings(str(work), 2000, True),
            tables=up.tables,
        ),
        lambda up: [max(up.units, key=lambda e: Path(e[2].path).stat().st_size), up.units[-1]],
        matcher("documents-*.parquet", "text/part-*.txt", "rejects-*.jsonl"),
    ),
    Case(
        "clean_stages.FinishChunkFn, pretrained tables given to it",
        lambda up, work: clean_stages.FinishChunkFn(
            str(up.staging), str(work), 2000, True, up.tables
        ),
        lambda up: sorted(up.joined.items())[-2:],
        matcher("documents-*.parquet", "text/part-*.txt"),
    ),
    Case(
        "clean_stages.ExactDuplicatesFn",
        lambda up, work: clean_stages.ExactDuplicatesFn(str(work)),
        biggest_exact_partition,
        matcher("rejects-*.jsonl"),
    ),
    Case(
        "clean_stages.VerifyNearDuplicatesFn",
        lambda up, work: clean_stages.VerifyNearDuplicatesFn(str(work), 0.8),
        lambda up: [up.band_pairs],
        matcher("rejects-*.jsonl"),
        side=lambda up: (up.exact_drops,),
        prepare=copy_staged_chunks,
    ),
    Case(
        "clean_stages.FinishChunkFn",
        lambda up, work: clean_stages.FinishChunkFn(str(up.staging), str(work), 2000, True),
        lambda up: sorted(up.joined.items())[-2:],
        matcher("documents-*.parquet", "text/part-*.txt"),
        side=lambda up: (up.tables,),
    ),
    Case(
        "SplitFileFn",
        lambda up, work: SplitFileFn(str(work), SEED, 0.1),
        lambda up: matching_paths(str(up.clean / "documents-*.parquet"))[:2],
        matcher("train/documents-*.parquet", "eval/documents-*.parquet"),
    ),
    Case(
        "TokenizeFileFn",
        lambda up, work: TokenizeFileFn(up.vocab, True, {"train": str(work / "train")}),
        lambda up: [
            ("train", p)
            for p in matching_paths(str(up.split / "train" / "documents-*.parquet"))[:2]
        ],
        token_files,
    ),
    Case(
        "TokenizeBertTextFn",
        lambda up, work: TokenizeBertTextFn(up.vocab, True, str(work), 2000, 10000),
        lambda up: up.text_files,
        spilled_files,
        unique_names=True,
    ),
    Case(
        "ExpandDupePassesFn",
        lambda up, work: ExpandDupePassesFn(2, str(work)),
        lambda up: sorted(up.slices.items()),
        matcher("bucket-*.refs"),
    ),
    Case(
        "CreateInstancesFn",
        lambda up, work: CreateInstancesFn(up.settings, up.token_tables, str(work), 4),
        lambda up: up.tasks[:2],
        matcher("task-*.spill"),
    ),
    Case(
        "WriteShardFn",
        lambda up, work: WriteShardFn(str(work), "instances", 4, "none", buffer_bytes=64 << 10),
        lambda up: [1, 2],
        shard_files,
        side=lambda up: (up.spills,),
    ),
]


def seen(case: Case, work: Path, attempt: Attempt | None) -> dict[str, bytes]:
    """What the next stage reads after ``attempt``: file name → bytes (attempt-unique names
    replaced by their order, so two attempts' files compare)."""
    paths = case.reader(work, attempt)
    if case.unique_names:
        return {f"file-{i}": Path(p).read_bytes() for i, p in enumerate(paths)}
    return {str(Path(p).relative_to(work)): Path(p).read_bytes() for p in paths}


def committed(work: Path) -> dict[str, bytes]:
    """Every file under ``work`` but temporaries."""
    return {
        str(p.relative_to(work)): p.read_bytes()
        for p in sorted(work.rglob("*"))
        if p.is_file() and PARTIAL not in p.name
    }


def fresh(case: Case, up: Upstream, work: Path) -> tuple[beam.DoFn, list, tuple]:
    case.prepare(up, work)
    return case.make(up, work), case.elements(up), case.side(up)


@dataclass(frozen=True)
class Result:
    """A single attempt's result: what the next stage reads, every file written, the counts."""

    seen: dict[str, bytes]
    files: dict[str, bytes]
    stats: list[dict]


@pytest.fixture(scope="module")
def single(up, tmp_path_factory) -> dict[str, Result]:
    """Each case's single attempt."""
    out = {}
    for case in CASES:
        work = tmp_path_factory.mktemp("single")
        fn, elements, side = fresh(case, up, work)
        attempt = run(fn, elements, side)
        out[case.name] = Result(seen(case, work, attempt), committed(work), attempt.stats)
        assert out[case.name].seen, f"{case.name} wrote nothing to check"
        assert not partials(work)
    return out


def assert_like_single(case: Case, work: Path, attempt: Attempt, single: dict[str, Result]):
    """The next stage finds exactly the single attempt's files, and the attempt counted what
    the single attempt counted."""
    expected = single[case.name]
    assert seen(case, work, attempt) == expected.seen
    assert attempt.stats == expected.stats
    if case.unique_names:
        # The attempt's references name only its own complete file; another attempt's file is
        # read by nobody (the job deletes the spill directory at its end).
        refs = [ref for table in attempt.main for ref in table.refs()]
        decoded = {d.key: d.sentences() for d in load_documents(refs)}
        assert len(decoded) == len(refs) > 0
    else:
        assert committed(work) == expected.files


ids = [c.name for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_two_attempts_in_sequence_leave_the_single_attempts_files(case, up, single, tmp_path):
    fn, elements, side = fresh(case, up, tmp_path)
    run(fn, elements, side)
    retry = run(fn, elements, side)
    assert_like_single(case, tmp_path, retry, single)
    assert not partials(tmp_path)


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_interleaved_attempts_leave_the_single_attempts_files(case, up, single, tmp_path):
    """Attempt A starts (to its first output, or through its first element), B runs fully,
    then A finishes."""
    fn, elements, side = fresh(case, up, tmp_path)
    a = Attempt(fn, elements, side).advance()
    b = run(fn, elements, side)
    assert_like_single(case, tmp_path, b, single)
    a.finish()
    assert_like_single(case, tmp_path, b, single)
    assert_like_single(case, tmp_path, a, single)
    assert not partials(tmp_path)


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_parallel_attempts_both_succeed_with_the_single_attempts_files(case, up, single, tmp_path):
    """A backup task: two attempts at once, in threads."""
    fn, elements, side = fresh(case, up, tmp_path)
    results: list[Attempt] = []
    errors: list[BaseException] = []

    def attempt() -> None:
        try:
            results.append(run(fn, elements, side))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=attempt) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 2
    for result in results:
        assert_like_single(case, tmp_path, result, single)
    assert not partials(tmp_path)


def kill_limit(files: dict[str, bytes]) -> int:
    """A file-size limit that cuts the biggest of ``files`` in half."""
    return max(1, max(len(b) for b in files.values()) // 2)


@pytest.mark.parametrize("reuse", [False, True], ids=["fresh-instance", "same-instance"])
@pytest.mark.parametrize("case", CASES, ids=ids)
def test_an_attempt_killed_mid_write_then_a_retry(case, reuse, up, single, tmp_path):
    """The killed attempt leaves the next stage nothing but complete files of the result (and
    emits no counts); the retry — on a new DoFn instance or on the same one, as runners do —
    leaves exactly the single attempt's files and counts."""
    fn, elements, side = fresh(case, up, tmp_path)
    expected = single[case.name]
    killed = Attempt(fn, elements, side)
    with file_size_limit(kill_limit(expected.seen)), pytest.raises(OSError):
        killed.finish()
    assert not killed.stats
    found = seen(case, tmp_path, None)
    assert all(expected.seen.get(name) == data for name, data in found.items()), sorted(found)
    assert found != expected.seen  # the kill cut something short
    retry = Attempt(killed.fn if reuse else fn, elements, side, reuse=reuse).finish()
    assert_like_single(case, tmp_path, retry, single)


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_a_late_attempt_dying_mid_write_leaves_the_finished_files(case, up, single, tmp_path):
    """B finished (and the runner took its output); a zombie attempt A then dies mid-write."""
    fn, elements, side = fresh(case, up, tmp_path)
    finished = run(fn, elements, side)
    with file_size_limit(kill_limit(single[case.name].seen)), pytest.raises(OSError):
        run(fn, elements, side)
    assert_like_single(case, tmp_path, finished, single)


# --- writers run inside beam.Map steps ------------------------------------------------------------


def test_the_punkt_writer_retried_then_a_late_attempt_killed(up, tmp_path):
    """``clean_stages.train_punkt`` (the clean job's TrainPunkt step) on the real sample: a retry rewrites
    the same four files; a late attempt dying mid-write leaves them whole."""
    output = tmp_path / "clean"
    tables = clean_stages.train_punkt(up.punkt_samples, str(up.staging), str(output))
    files = committed(output)
    assert sorted(files) == sorted(f"punkt/{p.name}" for p in (up.clean / "punkt").iterdir())
    clean_stages.train_punkt(up.punkt_samples, str(up.staging), str(output))
    assert committed(output) == files and not partials(output)
    with file_size_limit(kill_limit(files)), pytest.raises(OSError):
        clean_stages.train_punkt(up.punkt_samples, str(up.staging), str(output))
    assert committed(output) == files
    assert PunktTables.from_parameters(load_punkt_parameters_from(output / "punkt")) == tables


def vocab_sample(up: Upstream) -> list[tuple[int, str]]:
    """What the vocab job's WriteTrain step receives: the smallest keyed training sentences."""
    rows = [
        row
        for path in matching_paths(str(up.clean / "documents-*.parquet"))
        for row in read_parquet(path, ["doc_id", "sentences"]).to_pylist()
    ]
    keyed = [kv for row in rows for heldout, kv in _keyed_sentences(row, SEED, 20) if not heldout]
    return heapq.nsmallest(2000, keyed, key=lambda kv: kv[0])


def map_writers(up: Upstream, single: dict[str, Result]) -> dict[str, tuple[Callable, Callable]]:
    """The files that ``beam.Map`` steps write, each on its real input, and how they are read:
    the vocab job's samples (vocab.txt and its reports go through the same ``_write_text``),
    and the result file that the clean, split, tokenize and instances jobs' last step writes
    (``write_json`` of the merged counts)."""
    items = vocab_sample(up)
    merge = MergeCounts()
    acc = merge.create_accumulator()
    for result in single.values():
        for stats in result.stats:
            acc = merge.add_input(acc, stats)
    totals = merge.extract_output(acc)
    lines = [s for _, s in sorted(items)]
    return {
        ".samples/train.txt": (lambda path: _write_lines(path, items), lambda path: lines),
        ".pipeline-result.json": (lambda path: write_json(path, totals), lambda path: totals),
    }


@pytest.mark.parametrize("name", [".samples/train.txt", ".pipeline-result.json"])
def test_files_of_map_steps_survive_a_retry_and_a_late_attempt_killed(name, up, single, tmp_path):
    write, expected_content = map_writers(up, single)[name]
    read = _read_lines if name.endswith(".txt") else read_json
    path = tmp_path / name
    write(str(path))
    expected = path.read_bytes()
    assert read(str(path)) == expected_content(path)
    write(str(path))
    assert path.read_bytes() == expected and not partials(tmp_path)
    with file_size_limit(len(expected) // 2), pytest.raises(OSError):
        write(str(path))
    assert path.read_bytes() == expected
    assert not partials(tmp_path)  # a failed write removes its temporary file


def test_parallel_commits_of_one_file_never_fail_nor_hide_it(tmp_path):
    """Backup attempts committing the same file at once: each commit succeeds, and a reader
    polling the file meanwhile always finds it whole (a delete-then-rename commit fails one
    attempt and leaves the file missing for a moment)."""
    path = tmp_path / "rejects-1-000.jsonl"
    reject = {"reason": "dropped_duplicate_exact", "id": "jsonl/x/1", "excerpt": "same as 0"}
    write_bytes_atomically(str(path), b"x" * 4096)
    errors: list[BaseException] = []
    done = threading.Event()

    def commit_many(part: bool) -> None:
        try:
            for _ in range(150):
                if part:
                    rejects = RejectsPart(str(path))
                    for _ in range(64):
                        rejects.write(reject)
                    rejects.close()
                else:
                    write_bytes_atomically(str(path), expected)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def read_meanwhile() -> None:
        while not done.is_set():
            try:
                assert path.read_bytes() in (expected, b"x" * 4096)
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)
                return

    single = tmp_path / "single.jsonl"
    rejects = RejectsPart(str(single))
    for _ in range(64):
        rejects.write(reject)
    rejects.close()
    expected = single.read_bytes()
    reader = threading.Thread(target=read_meanwhile)
    writers = [threading.Thread(target=commit_many, args=(part,)) for part in (True, False)]
    reader.start()
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    done.set()
    reader.join()
    assert not errors, errors[:3]
    assert path.read_bytes() == expected and not partials(tmp_path)
    assert merge_reject_parts(str(tmp_path / "rejects-*.jsonl"), str(tmp_path / "all")) == 64


def test_damage_in_an_input_is_still_a_reject_and_its_retry_identical(tmp_path):
    """A cut-short input keeps the documents before the damage and counts ``truncated_file`` (the
    reader's reject; other read errors end the unit as ``unreadable_file`` in clean_stages.StageDocumentsFn,
    and a failing write fails the attempt, see above); a retry rewrites the same files."""
    text = " ".join(f"Entry {i} of the harbour log tells of fog and ships." for i in range(30))
    lines = "".join(json.dumps({"title": f"t{i}", "text": f"{text} {i}"}) + "\n" for i in range(99))
    data = lzma.compress(lines.encode("utf-8"))
    (tmp_path / "cut.jsonl.xz").write_bytes(data[: len(data) * 2 // 3])
    element = (0, "jsonl", WorkUnit(str(tmp_path / "cut.jsonl.xz"), "cut.jsonl.xz"))
    staging = tmp_path / "staging"
    first = run(stage_documents_fn(staging), [element])
    files = committed(staging)
    (stats,) = first.stats
    assert stats["jsonl.truncated_file"] == 1 and 0 < stats["jsonl.documents"] < 99
    assert sum(c.documents for c in first.main) == stats["jsonl.documents"]
    assert "truncated_file" in (staging / "rejects-0-00000.jsonl").read_text()
    retry = run(stage_documents_fn(staging), [element])
    assert committed(staging) == files and retry.stats == first.stats and not partials(staging)


def test_an_input_that_cannot_be_decompressed_is_an_unreadable_file_reject(tmp_path):
    (tmp_path / "not-gzip.jsonl.gz").write_bytes(b"this was never gzip data\n" * 10)
    element = (0, "jsonl", WorkUnit(str(tmp_path / "not-gzip.jsonl.gz"), "not-gzip.jsonl.gz"))
    staging = tmp_path / "staging"
    (stats,) = run(stage_documents_fn(staging), [element]).stats
    assert stats["jsonl.unreadable_file"] == 1 and stats.get("jsonl.documents", 0) == 0
    assert "unreadable_file" in (staging / "rejects-0-00000.jsonl").read_text()
