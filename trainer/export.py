"""The trained encoder in forms Keras and keras-hub load for fine-tuning.

- ``OUT/encoder.keras``: ``keras.saving.load_model(path)`` (with ``keras_hub`` importable) gives the
  ``BertBackbone``.
- ``OUT/encoder/``: a keras-hub preset directory (config, weights, and the WordPiece tokenizer when
  the vocabulary is known), so ``keras_hub.models.BertBackbone.from_preset(dir)`` or
  ``keras_hub.models.BertTextClassifier.from_preset(dir, num_classes=N)`` work offline. Pass the
  classifier's preprocessor a ``sequence_length`` within ``max_position_embeddings``.

Both hold float32 weights whatever the training precision.
"""

from __future__ import annotations

import os
import tempfile

import keras
import tensorflow as tf

ENCODER_FILE = "encoder.keras"
PRESET_DIR = "encoder"


def float32_copy(backbone: keras.Model) -> keras.Model:
    """The backbone rebuilt with a float32 policy and the same weights."""
    config = backbone.get_config()
    config["dtype"] = "float32"
    copy = type(backbone).from_config(config)
    copy.set_weights(backbone.get_weights())
    return copy


def _copy_tree(local: str, dest: str) -> None:
    for root, _, files in os.walk(local):
        rel = os.path.relpath(root, local)
        target = dest if rel == "." else f"{dest}/{rel.replace(os.sep, '/')}"
        tf.io.gfile.makedirs(target)
        for name in files:
            tf.io.gfile.copy(os.path.join(root, name), f"{target}/{name}", overwrite=True)


def export_encoder(
    backbone: keras.Model, out: str, vocab_path: str | None = None, lowercase: bool = True
) -> dict[str, str]:
    """Writes ``OUT/encoder.keras`` and the preset ``OUT/encoder/``; returns their paths."""
    import keras_hub

    encoder = float32_copy(backbone)
    out = out.rstrip("/")
    with tempfile.TemporaryDirectory() as tmp:
        encoder.save(os.path.join(tmp, ENCODER_FILE))
        preset = os.path.join(tmp, PRESET_DIR)
        encoder.save_to_preset(preset)
        if vocab_path:
            tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocab_path, lowercase=lowercase)
            tokenizer.save_to_preset(preset)
        tf.io.gfile.makedirs(out)
        if tf.io.gfile.exists(f"{out}/{PRESET_DIR}"):
            tf.io.gfile.rmtree(f"{out}/{PRESET_DIR}")
        tf.io.gfile.copy(os.path.join(tmp, ENCODER_FILE), f"{out}/{ENCODER_FILE}", overwrite=True)
        _copy_tree(preset, f"{out}/{PRESET_DIR}")
    return {"keras": f"{out}/{ENCODER_FILE}", "preset": f"{out}/{PRESET_DIR}"}
