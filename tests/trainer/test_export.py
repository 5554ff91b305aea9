"""The exported encoder loads with Keras and keras-hub and gives the trained model's outputs."""

from __future__ import annotations

from pathlib import Path

import keras
import keras_hub
import numpy as np
import pytest

from trainer.checkpointing import restore_model
from trainer.model_presets import ModelConfig
from trainer.pretraining_model import build_pretraining_model
from trainer.run_config import read_record

pytestmark = pytest.mark.xdist_group("trained_run")  # one 300-step run, set up once


def _features(seq: int = 32) -> dict:
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 4000, (2, seq)).astype("int32")
    mask = np.ones((2, seq), "int32")
    mask[1, 20:] = 0
    segments = np.zeros((2, seq), "int32")
    segments[:, 16:] = 1
    return {"token_ids": ids, "segment_ids": segments, "padding_mask": mask}


def test_saved_encoder_loads_and_matches_the_checkpoint(trained_run):
    config, result, _ = trained_run
    out = Path(config.out)
    assert result.encoder == {"keras": f"{out}/encoder.keras", "preset": f"{out}/encoder"}
    # The reference: the trained weights as restored from the final checkpoint.
    model_config = ModelConfig.from_dict(read_record(str(out))["model"])
    reference = build_pretraining_model(model_config)
    restore_model(reference.model, str(out))
    x = _features()
    expected = reference.backbone(x, training=False)

    loaded = keras.saving.load_model(out / "encoder.keras")
    assert isinstance(loaded, keras_hub.models.BertBackbone)
    got = loaded(x, training=False)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(got[key], expected[key], atol=1e-5)

    from_preset = keras_hub.models.BertBackbone.from_preset(str(out / "encoder"))
    np.testing.assert_allclose(
        from_preset(x)["pooled_output"], expected["pooled_output"], atol=1e-5
    )
    assert from_preset.max_sequence_length == 64 and from_preset.vocabulary_size == 4000
    # The tokenizer ships with the preset (the shards' vocabulary, lowercasing).
    tokenizer = keras_hub.models.BertTokenizer.from_preset(str(out / "encoder"))
    assert tokenizer.vocabulary_size() == 4000
    assert (out / "encoder" / "assets" / "tokenizer" / "vocabulary.txt").exists()
