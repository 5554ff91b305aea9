"""Real shards for the trainer tests (made once by the instance stage) and one shared training run.

The model is BERT-Tiny shrunk further (1 layer, hidden 64) so that a few hundred CPU steps take
seconds; everything else (vocabulary of the sample, heads, optimizer, loop) is the real thing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SEQ = 64
PREDICTIONS = 10
SMALL = {
    "num_layers": 1,
    "hidden_dim": 64,
    "num_heads": 2,
    "intermediate_dim": 128,
    "max_position_embeddings": SEQ,
}
"""ModelConfig overrides on top of the ``tiny`` preset."""


@pytest.fixture(scope="session")
def shards(tmp_path_factory, sample_corpus_files, sample_vocab_path) -> Path:
    """Train shards: seq 64, 10 predictions, 2 shards, dupe factor 1 (with manifest.json)."""
    from tests.pipeline.jobs.test_instances import run_job

    tmp = tmp_path_factory.mktemp("trainer-shards")
    inputs = [str(sample_corpus_files[0].parent / "*.txt")]
    _, out = run_job(
        tmp,
        inputs,
        sample_vocab_path,
        max_seq_length=SEQ,
        max_predictions_per_seq=PREDICTIONS,
        num_shards=2,
        dupe_factor=1,
        seed=11,
    )
    return out


def small_config(shards: Path, out: Path, **changes):
    """A TrainConfig for the shrunk tiny model on the test shards."""
    from trainer.run_config import TrainConfig

    settings = dict(
        data=[str(shards)],
        out=str(out),
        model="tiny",
        model_overrides=dict(SMALL),
        batch_size=16,
        steps=300,
        learning_rate=2e-3,
        warmup_steps=20,
        log_every=1,
        checkpoint_every=100,
        progress=False,
        deterministic=True,
        seed=3,
    )
    settings.update(changes)
    return TrainConfig(**settings)


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, shards):
    """300 steps of the small model with a final evaluation over every record; (config, result)."""
    from trainer.training import train

    out = tmp_path_factory.mktemp("trained") / "run"
    config = small_config(shards, out, eval_data=[str(shards)], eval_batches=None)
    messages: list[str] = []
    result = train(config, log=messages.append)
    return config, result, messages


PACK = 3
"""Instances per packed row in the packed test shards."""
PACKED_SEQ, PACKED_PREDICTIONS = 128, 20
"""The packed test shards' sizes: at 128 the sample's instances share rows (1.6 per row; at 64
they are mostly too long to)."""
PACKED_SMALL = {**SMALL, "max_position_embeddings": PACKED_SEQ}


def _packed_run(tmp_path_factory, sample_corpus_files, sample_vocab_path, name, **changes):
    from tests.pipeline.jobs.test_instances import run_job

    tmp = tmp_path_factory.mktemp(name)
    inputs = [str(sample_corpus_files[0].parent / "*.txt")]
    _, out = run_job(
        tmp,
        inputs,
        sample_vocab_path,
        max_seq_length=PACKED_SEQ,
        max_predictions_per_seq=PACKED_PREDICTIONS,
        num_shards=2,
        dupe_factor=1,
        seed=11,
        short_seq_prob=1.0,  # short instances, so that many rows hold two or three
        pack_instances=PACK,
        **changes,
    )
    return out


@pytest.fixture(scope="session")
def packed_shards(tmp_path_factory, sample_corpus_files, sample_vocab_path) -> Path:
    """Packed static shards from the instance stage (``--pack-instances 3``), seq 128."""
    return _packed_run(tmp_path_factory, sample_corpus_files, sample_vocab_path, "packed-shards")


@pytest.fixture(scope="session")
def packed_dynamic_shards(tmp_path_factory, sample_corpus_files, sample_vocab_path) -> Path:
    """Packed unmasked shards (``--masking dynamic --pack-instances 3``), seq 128."""
    return _packed_run(
        tmp_path_factory,
        sample_corpus_files,
        sample_vocab_path,
        "packed-dynamic-shards",
        masking="dynamic",
    )
