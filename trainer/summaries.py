"""TensorBoard scalars written with TensorFlow's core summary ops.

``tf.summary.scalar`` needs the ``tensorboard`` package at *write* time; this writes the same
events (the ``scalars`` plugin's metadata) without it, so training hosts need TensorBoard only to
view the logs.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.core.framework import summary_pb2

_SCALAR = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
    data_class=summary_pb2.DATA_CLASS_SCALAR,
)


class ScalarWriter:
    """Writes named scalars at a step into one TensorBoard run directory."""

    def __init__(self, logdir: str):
        self.logdir = logdir
        self._writer = tf.summary.create_file_writer(logdir)

    def write(self, step: int, values: dict[str, float]) -> None:
        with self._writer.as_default(step=step):
            for name, value in values.items():
                tf.summary.write(name, tf.constant(float(value), tf.float32), metadata=_SCALAR)
        self._writer.flush()


def read_scalars(logdir: str) -> dict[str, list[tuple[int, float]]]:
    """Scalars in a run directory's event files, by name: ``[(step, value), ...]`` (for tests)."""
    found: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(tf.io.gfile.glob(f"{logdir.rstrip('/')}/events.out.tfevents.*")):
        for raw in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(raw.numpy())
            for value in event.summary.value:
                number = float(tf.make_ndarray(value.tensor))
                found.setdefault(value.tag, []).append((int(event.step), number))
    return found
