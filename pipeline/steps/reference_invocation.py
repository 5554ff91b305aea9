"""One invocation of google-research/bert's ``create_pretraining_data.py``, reproduced on a worker.

``RunReferenceInvocationFn`` takes a ``ReferenceInvocation`` (input files in reading order, output
file names) and does what the script does for it: reads and tokenizes every input
(``transforms.reference_text``), draws every instance from one ``random.Random(seed)`` stream
(``transforms.reference_instances``) and writes record ``g`` of the final shuffle into output
file ``g % files``, then records its summary in a resume marker (``marker_path``). With
``pretokenized`` the inputs are token files of ``bertprep run``'s
tokenize stage, their documents taken in key order (``tokenized_documents``). Each output file is streamed under a temporary name and committed when
complete, so a retried or killed invocation never leaves a partial file behind a final name. It
yields what it wrote (records, sha256 of each file's bytes, sizes, document counts).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipeline.files.artifacts import (
    commit,
    delete_exactly,
    naming,
    temporary_name,
    write_bytes_atomically,
)
from pipeline.files.token_files import TokenIndex
from pipeline.runtime.counters import NAMESPACE
from tokenizer.vocab import Vocab
from tokenizer.wordpiece import BertWordPieceTokenizer
from transforms.example_encoding import encode_examples
from transforms.reference_layout import ReferenceInstances, ReferenceSettings
from transforms.reference_text import ReferenceDocumentBuilder, ReferenceInputError
from transforms.tfrecord import frame_records
from transforms.token_documents import TokenizedDocument

RECORDS_PER_BATCH = 4096
"""Records encoded at once while an output file is written (memory: a few MB)."""


@dataclass(frozen=True)
class ReferenceInvocation:
    """One run of the reference script: its inputs (paths, in the order it reads them) and its
    ``--output_file`` list (file names inside the job's output directory)."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    fingerprint: str = ""
    """What the output depends on (settings, vocab, each input's size and time); the resume
    marker records it, so a marker is only trusted for the same invocation."""


RESUME_DIR = ".resume-compat"
"""Per-invocation markers, beside the outputs, until the job's manifest is written."""


def marker_path(output: str, name: str) -> str:
    return FileSystems.join(output, RESUME_DIR, f"{name}.json")


def tokenized_documents(index_paths: tuple[str, ...]) -> list[TokenizedDocument]:
    """Every document of the token files (``bertprep run``'s tokenize stage), sorted by key: an
    order that depends on the documents only, not on how the stage cut them into files."""
    documents = []
    for index_path in index_paths:
        index = TokenIndex.read(index_path)
        with FileSystems.open(index.data_path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            data = f.read()
        for key, offset, size, sentences in zip(
            index.keys,
            index.offsets.tolist(),
            index.sizes.tolist(),
            index.num_sentences.tolist(),
            strict=True,
        ):
            documents.append(
                TokenizedDocument.from_bytes(key, data[offset : offset + size], sentences)
            )
    documents.sort(key=lambda d: d.key)
    return documents


class RunReferenceInvocationFn(beam.DoFn):
    """ReferenceInvocation → its output files, written; yields a summary dict per invocation."""

    def __init__(
        self,
        vocab: Vocab,
        do_lower_case: bool,
        settings: ReferenceSettings,
        seed: int,
        output: str,
        pretokenized: bool = False,
    ) -> None:
        self._vocab = vocab
        self._do_lower_case = do_lower_case
        self._settings = settings
        self._seed = seed
        self._output = output
        self._pretokenized = pretokenized
        self._tokenizer: BertWordPieceTokenizer | None = None

    def setup(self) -> None:
        self._tokenizer = BertWordPieceTokenizer(self._vocab, self._do_lower_case)

    def process(self, invocation: ReferenceInvocation):
        started = time.monotonic()
        assert self._tokenizer is not None
        builder = ReferenceDocumentBuilder(self._tokenizer.encode_batch_flat)
        if self._pretokenized:
            for document in tokenized_documents(invocation.inputs):
                builder.add_document(document.ids, document.offsets)
        else:
            for path in invocation.inputs:
                with FileSystems.open(path, compression_type=CompressionTypes.AUTO) as stream:
                    builder.add_stream(stream, path)
        documents = builder.finish()
        if documents.documents == 0:  # fail now, not after every other invocation has run
            raise ReferenceInputError(
                f"invocation {invocation.name}: its input ({', '.join(invocation.inputs[:3])}"
                f"{' ...' if len(invocation.inputs) > 3 else ''}) holds no tokens, so it "
                "produced zero instances (the reference would write empty files without a word)"
            )
        read_seconds = time.monotonic() - started
        # the compiled kernels (numba) load on the workers only, not in the launcher
        from transforms.reference_instances import create_reference_instances
        from transforms.reference_stream import stream_state

        instances = create_reference_instances(documents, self._settings, stream_state(self._seed))
        outputs = [
            self._write(name, instances, documents.ids, k, len(invocation.outputs))
            for k, name in enumerate(invocation.outputs)
        ]
        beam.metrics.Metrics.counter(NAMESPACE, "reference_invocations").inc()
        beam.metrics.Metrics.counter(NAMESPACE, "instances").inc(len(instances))
        masked = instances.predictions.astype(np.int64)
        summary = {
            "name": invocation.name,
            "inputs": list(invocation.inputs),
            "lines": builder.lines,
            "documents": documents.documents,
            "sentences": documents.sentences,
            "tokens": int(len(documents.ids)),
            "instances": len(instances),
            "random_next": int(instances.random_next.sum()),
            "masked_lm_predictions": int(masked.sum()),
            "outputs": outputs,
            "read_seconds": round(read_seconds, 2),
            "seconds": round(time.monotonic() - started, 2),
        }
        # written after every output file is committed: a resumed job trusts it and skips this
        write_bytes_atomically(
            marker_path(self._output, invocation.name),
            json.dumps({"fingerprint": invocation.fingerprint, "result": summary}).encode(),
        )
        yield summary

    def _write(
        self, name: str, instances: ReferenceInstances, ids: np.ndarray, k: int, files: int
    ) -> dict:
        """Output file ``k`` of ``files``: records ``k, k + files, ...`` of the final order."""
        from transforms.reference_instances import record_features

        path = FileSystems.join(self._output, name)
        picks = instances.order[k::files]
        digest = hashlib.sha256()
        size = 0
        temp = temporary_name(path)
        try:
            with (
                naming(path),
                FileSystems.create(temp, compression_type=CompressionTypes.UNCOMPRESSED) as f,
            ):
                for start in range(0, len(picks), RECORDS_PER_BATCH):
                    ints, floats = record_features(
                        instances, picks[start : start + RECORDS_PER_BATCH], ids, self._settings
                    )
                    data = frame_records(encode_examples(ints, floats))
                    digest.update(data)
                    size += len(data)
                    f.write(data)
        except BaseException:
            if FileSystems.exists(temp):
                delete_exactly([temp])
            raise
        commit(temp, path)
        return {
            "file": name,
            "records": len(picks),
            "content_sha256": digest.hexdigest(),
            "bytes": size,
        }
