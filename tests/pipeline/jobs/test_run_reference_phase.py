"""``bertprep run`` with a ``compat: reference`` phase: the reference's instances of each side's
documents (one invocation per side, documents in key order), beside a native phase."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pipeline.jobs.instances import InstancesJobConfig
from pipeline.jobs.reference_compat import reference_settings
from pipeline.jobs.run_config import ConfigError
from pipeline.jobs.tokenize import INDEX_PATTERN
from pipeline.steps.reference_invocation import tokenized_documents
from tests.pipeline.jobs.test_run import run
from tokenizer.vocab import Vocab
from transforms.example_encoding import decode_example
from transforms.reference_instances import create_reference_instances, record_features
from transforms.reference_stream import stream_state
from transforms.reference_text import ReferenceDocumentBuilder
from transforms.tfrecord import iter_records


def test_reference_phase_is_the_kernels_on_the_documents_in_key_order(tmp_path):
    summary = run(tmp_path, "phases.1.compat=reference", mode="multi_processing")
    out = tmp_path / "out"
    phase = next(r for r in summary["phases"] if r["phase"] == "seq512")
    manifest = json.loads((out / "seq512" / "train" / "manifest.json").read_text())
    assert manifest["compat"] == "reference"
    assert phase["train"]["instances"] == manifest["totals"]["instances"] > 0
    assert len(manifest["shards"]) == 2  # the phase's num_shards: round-robin files

    index_files = sorted(str(p) for p in (out / "tokens" / "train").glob(INDEX_PATTERN))
    documents = tokenized_documents(tuple(index_files))
    assert [d.key for d in documents] == sorted(d.key for d in documents)
    assert [d.key for d in tokenized_documents(tuple(reversed(index_files)))] == [
        d.key for d in documents
    ]  # the files' order (how the stage cut them) does not matter
    builder = ReferenceDocumentBuilder(lambda texts: None)
    for d in documents:
        builder.add_document(d.ids, d.offsets)
    docs = builder.finish()
    vocab_path = out / "vocab" / "vocab.txt"
    vocab = Vocab.from_file(str(vocab_path))
    config = InstancesJobConfig(
        inputs=["-"],
        vocab=str(vocab_path),
        output="-",
        max_seq_length=512,
        max_predictions_per_seq=80,
        dupe_factor=2,
    )
    settings = reference_settings(config, vocab, vocab_path.read_bytes())
    instances = create_reference_instances(docs, settings, stream_state(12345))
    for k, shard in enumerate(manifest["shards"]):
        with (out / "seq512" / "train" / shard["file"]).open("rb") as f:
            records = [decode_example(r) for r in iter_records(f)]
        ints, floats = record_features(instances, instances.order[k::2], docs.ids, settings)
        assert len(records) == len(ints["input_ids"])
        for name, values in {**ints, **floats}.items():
            assert np.array_equal(np.array([r[name] for r in records]), values), name
    native = json.loads((out / "seq128" / "train" / "manifest.json").read_text())
    assert "compat" not in native


def test_reference_phase_refuses_per_file_invocations(tmp_path):
    with pytest.raises(ConfigError, match=r"phases\[0\]\.invocations per-file"):
        run(tmp_path, "phases.0.compat=reference", "phases.0.invocations=per-file")
