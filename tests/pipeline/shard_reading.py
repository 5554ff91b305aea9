"""Test helper: read instance shards back with tf.data and google-research/bert's feature spec."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from transforms.features import FEATURES


def read_shards(
    files: list[Path], max_seq_length: int, max_predictions_per_seq: int, compression: str = ""
) -> dict[str, np.ndarray]:
    """All records of ``files`` (in file order) parsed by TensorFlow, as feature → (N, len) array."""
    import tensorflow as tf

    spec = {
        f.name: tf.io.FixedLenFeature(
            [f.length(max_seq_length, max_predictions_per_seq)],
            tf.int64 if f.dtype == "int64" else tf.float32,
        )
        for f in FEATURES
    }
    ds = tf.data.TFRecordDataset([str(f) for f in files], compression_type=compression)
    ds = ds.map(lambda r: tf.io.parse_single_example(r, spec)).batch(4096)
    parts: dict[str, list[np.ndarray]] = {f.name: [] for f in FEATURES}
    for batch in ds:
        for name, value in batch.items():
            parts[name].append(value.numpy())
    return {
        name: np.concatenate(v)
        if v
        else np.zeros(
            (
                0,
                FEATURES[[f.name for f in FEATURES].index(name)].length(
                    max_seq_length, max_predictions_per_seq
                ),
            )
        )
        for name, v in parts.items()
    }
