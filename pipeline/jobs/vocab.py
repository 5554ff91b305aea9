"""The vocabulary job: cleaned documents → a WordPiece ``vocab.txt`` in Google's layout.

Beam draws two deterministic samples of sentences from the cleaned Parquet documents: a training
sample (the ``sample_sentences`` sentences with the smallest keyed hash) and a held-out sample
from documents set aside by a keyed hash (about ``heldout_per_mille``/1000 of them), so no
held-out sentence is trained on. Neither corpus is ever loaded whole: each sample is bounded by
its size. The trainer then runs where the job was launched (``tokenizer.vocab_training``), with
the normalization and pre-tokenization the instance stage uses.

Output: ``vocab.txt``, ``tokenizer.json`` (HF tokenizers), ``vocab_report.json``, ``manifest.json``
(written last).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from pipeline.files.artifacts import parquet_rows, write_bytes_atomically
from pipeline.files.input_files import expand_inputs
from pipeline.jobs.scaffold import prepare_output, write_manifest
from pipeline.runtime.local_runner import start as start_pipeline
from pipeline.runtime.progress import ProgressMonitor, ProgressReporter, progress_dir
from transforms.errors import UserError
from transforms.seeding import DEFAULT_SEED, stable_hash64

MANIFEST_FORMAT = "bertprep.vocab/1"
_SAMPLES = ".samples"


class VocabJobError(UserError, ValueError):
    """The vocabulary cannot be trained as asked; the message says why."""


@dataclass(frozen=True)
class VocabJobConfig:
    """Every setting of the vocabulary job (the manifest records all of them)."""

    input: str
    output: str
    vocab_size: int = 30522
    do_lower_case: bool = True
    sample_sentences: int = 1_000_000
    heldout_sentences: int = 20_000
    heldout_per_mille: int = 20
    min_frequency: int = 2
    reserved_unused: int = 994
    limit_alphabet: int = 1000
    seed: int = DEFAULT_SEED
    compare_vocab: str | None = None
    exclude_eval_fraction: float = 0.0
    """Documents the split stage holds out (same seed) are neither trained on nor reported on."""


def _parquet_pattern(path: str) -> str:
    if path.endswith(".parquet") or "*" in path:
        return path
    return FileSystems.join(path, "documents-*.parquet")


def _keyed_sentences(row: dict, seed: int, per_mille: int, exclude_eval: float = 0.0):
    from pipeline.jobs.split import is_eval

    if exclude_eval and is_eval(seed, row["doc_id"], exclude_eval):
        return
    heldout = stable_hash64(seed, "heldout", row["doc_id"]) % 1000 < per_mille
    for i, sentence in enumerate(row["sentences"] or []):
        if sentence:
            yield heldout, (stable_hash64(seed, "sample", row["doc_id"], i), sentence)


class KeySentencesFn(beam.DoFn):
    """A document row → its (heldout, (key, sentence)) pairs (``_keyed_sentences``); adds one
    to ``progress`` per document read, held out by the split or not (flushed per bundle)."""

    def __init__(
        self,
        seed: int,
        per_mille: int,
        exclude_eval: float,
        progress: ProgressReporter | None = None,
    ) -> None:
        self._args = (seed, per_mille, exclude_eval)
        self._progress = progress

    def process(self, row: dict):
        yield from _keyed_sentences(row, *self._args)
        if self._progress is not None:
            self._progress.add(1)

    def finish_bundle(self) -> None:
        if self._progress is not None:
            self._progress.flush()


def _write_lines(path: str, keyed: list[tuple[int, str]]) -> None:
    text = "".join(s.replace("\n", " ") + "\n" for _, s in sorted(keyed))
    _write_text(path, text)


def build_pipeline(
    p: beam.Pipeline, config: VocabJobConfig, pattern: str, watch: str | None = None
) -> None:
    """Adds the two sampling branches to ``p``; each writes one text file of sentences. With
    ``watch`` (a progress directory) the readers report the documents they read there."""
    samples = FileSystems.join(config.output, _SAMPLES)
    seed, per_mille = config.seed, config.heldout_per_mille
    keyed = (
        p
        | "ReadDocuments" >> beam.io.ReadFromParquet(pattern, columns=["doc_id", "sentences"])
        | "KeySentences"
        >> beam.ParDo(
            KeySentencesFn(
                seed,
                per_mille,
                config.exclude_eval_fraction,
                ProgressReporter(watch) if watch else None,
            )
        )
    )
    for name, heldout, size in (
        ("train", False, config.sample_sentences),
        ("heldout", True, config.heldout_sentences),
    ):
        path = FileSystems.join(samples, f"{name}.txt")
        (
            keyed
            | f"Only{name}" >> beam.Filter(lambda kv, h=heldout: kv[0] == h)
            | f"Values{name}" >> beam.Map(lambda kv: kv[1])
            | f"Smallest{name}" >> beam.combiners.Top.Smallest(size, key=lambda kv: kv[0])
            | f"Write{name}" >> beam.Map(lambda items, path=path: _write_lines(path, items))
        )


def _read_lines(path: str) -> list[str]:
    if not FileSystems.exists(path):
        return []
    with FileSystems.open(path) as f:
        return f.read().decode("utf-8").splitlines()


def _write_text(path: str, text: str) -> None:
    """Writes through a temporary name: a retried or a late attempt of the sampling step (or a
    killed run) never leaves a cut-short file under ``path``."""
    write_bytes_atomically(path, text.encode("utf-8"))


def run_vocab_job(
    config: VocabJobConfig,
    pipeline_options: PipelineOptions,
    progress: Callable[[str], None] = print,
) -> dict:
    """Samples, trains, reports; returns the manifest (also written to ``output/manifest.json``).

    While the sample is drawn, a ``vocab: N of M documents`` progress line (on a terminal;
    otherwise ``progress`` receives it periodically).

    Raises VocabJobError for an empty corpus, a vocab size too small for the specials and the
    alphabet, or too little text for the requested size.
    """
    from tokenizer.vocab import Vocab
    from tokenizer.vocab_report import vocab_figures, vocab_overlap
    from tokenizer.vocab_training import train_wordpiece_vocab
    from tokenizer.wordpiece import BERT_NORMALIZATION_VERSION, build_bert_tokenizer

    if config.vocab_size < 30:
        raise VocabJobError(f"--vocab-size {config.vocab_size} is too small for a BERT vocab")
    pattern = _parquet_pattern(config.input)
    files = expand_inputs([pattern])
    prepare_output(config.output, ("vocab.txt", "tokenizer.json", "vocab_report.json"), [_SAMPLES])
    started = time.monotonic()
    job_started = started
    watch = progress_dir(config.output)
    total = sum(parquet_rows(f.path) for f in files)
    p = beam.Pipeline(options=pipeline_options)
    build_pipeline(p, config, pattern, watch)
    with ProgressMonitor(watch, "vocab", total, "documents", progress) as monitor:
        result = start_pipeline(p)
        monitor.follow(result)
        result.wait_until_finish()
    sampling_s = time.monotonic() - started
    samples = FileSystems.join(config.output, _SAMPLES)
    train = _read_lines(FileSystems.join(samples, "train.txt"))
    heldout = _read_lines(FileSystems.join(samples, "heldout.txt"))
    if not train:
        raise VocabJobError(f"the corpus at {config.input} holds no sentences to train on")
    progress(
        f"sampled {len(train):,} sentences to train on and {len(heldout):,} for the vocab "
        f"report (its own {config.heldout_per_mille / 10:g}% sample of documents) in "
        f"{sampling_s:.1f} s; training..."
    )

    started = time.monotonic()
    try:
        tokens = train_wordpiece_vocab(
            train,
            vocab_size=config.vocab_size,
            do_lower_case=config.do_lower_case,
            min_frequency=config.min_frequency,
            limit_alphabet=config.limit_alphabet,
            reserved_unused=config.reserved_unused,
        )
    except ValueError as e:
        raise VocabJobError(str(e)) from e
    training_s = time.monotonic() - started
    vocab_text = "\n".join(tokens) + "\n"
    vocab = Vocab.from_bytes(vocab_text.encode("utf-8"))
    _write_text(FileSystems.join(config.output, "vocab.txt"), vocab_text)
    _write_text(
        FileSystems.join(config.output, "tokenizer.json"),
        build_bert_tokenizer(vocab, config.do_lower_case).to_str(pretty=True),
    )

    report: dict = {
        "heldout": vocab_figures(vocab, config.do_lower_case, heldout) if heldout else None,
        "training_sample": {
            "alphabet_coverage": vocab_figures(vocab, config.do_lower_case, train[:20000])[
                "alphabet_coverage"
            ]
        },
    }
    warnings = []
    coverage = (report["heldout"] or {}).get("alphabet_coverage")
    if coverage is not None and coverage < 0.999:
        warnings.append(
            f"{100 * (1 - coverage):.2f}% of held-out characters are not in the vocabulary "
            f"(alphabet limit {config.limit_alphabet}): text in those scripts becomes [UNK]"
        )
    if not heldout:
        warnings.append(
            "the vocab report has no [UNK] rate or fertility: its own "
            f"{config.heldout_per_mille / 10:g}% sample of documents (kept out of vocab training; "
            "not the eval split) is empty in a corpus this small"
        )
    if config.compare_vocab:
        other = Vocab.from_file(config.compare_vocab)
        report["compare"] = {
            "vocab": config.compare_vocab,
            "heldout": vocab_figures(other, config.do_lower_case, heldout) if heldout else None,
            "overlap": vocab_overlap(vocab, other),
        }
    report["warnings"] = warnings
    _write_text(
        FileSystems.join(config.output, "vocab_report.json"), json.dumps(report, indent=2) + "\n"
    )
    for w in warnings:
        progress(f"warning: {w}")

    manifest = {
        "config": asdict(config),
        "inputs": [f.fingerprint() for f in files],
        "vocab": {"sha256": vocab.sha256, "size": len(vocab)},
        "tokenizer": {
            "do_lower_case": config.do_lower_case,
            "normalization": BERT_NORMALIZATION_VERSION,
        },
        "samples": {"train_sentences": len(train), "heldout_sentences": len(heldout)},
        "step_seconds": {"sampling": round(sampling_s, 2), "training": round(training_s, 2)},
    }
    manifest = write_manifest(
        config.output, MANIFEST_FORMAT, manifest, time.monotonic() - job_started
    )
    return manifest | {"report": report}
