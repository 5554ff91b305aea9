"""Training on unmasked shards (masks drawn in tf.data) and on packed sentences without NSP: the
model has no NSP head where the records have no labels, the loss falls in every mode, and kinds
that do not fit fail before step one."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from tests.trainer.conftest import PREDICTIONS, SEQ, SMALL, small_config
from trainer.input_pipeline import ConfigMismatchError, ShardConfigError, resolve_shards
from trainer.model_presets import get_preset
from trainer.pretraining_model import build_pretraining_model, loss_sums

MODES = [
    ("dynamic", "sentence-pairs"),
    ("dynamic", "full-sentences"),
    ("dynamic", "doc-sentences"),
    ("static", "full-sentences"),
]


@pytest.fixture(scope="module")
def kind_shards(tmp_path_factory, sample_corpus_files, sample_vocab_path):
    from tests.pipeline.jobs.test_instances import run_job

    tmp = tmp_path_factory.mktemp("kind-shards")
    inputs = [str(sample_corpus_files[0].parent / "*.txt")]
    out = {}
    for masking, mode in MODES:
        _, out[(masking, mode)] = run_job(
            tmp,
            inputs,
            sample_vocab_path,
            name=f"{masking}-{mode}",
            max_seq_length=SEQ,
            max_predictions_per_seq=PREDICTIONS,
            num_shards=2,
            dupe_factor=1,
            seed=11,
            masking=masking,
            input_mode=mode,
        )
    return out


def test_model_without_nsp_head():
    model = get_preset("tiny").with_(**SMALL, vocabulary_size=300, dropout=0.0)
    built = build_pretraining_model(model, nsp=False)
    assert "nsp_head" not in [layer.name for layer in built.model.layers]
    x = {
        "token_ids": np.full((2, 8), 7, "int32"),
        "segment_ids": np.zeros((2, 8), "int32"),
        "padding_mask": np.ones((2, 8), "int32"),
        "mask_positions": np.array([[1, 2], [3, 4]], "int32"),
    }
    out = built.model(x)
    assert set(out) == {"mlm_logits"}
    sums = loss_sums(
        out,
        {"masked_lm_ids": np.array([[5, 6], [7, 8]]), "masked_lm_weights": np.ones((2, 2))},
    )
    assert float(sums["nsp_loss_sum"]) == 0.0 and float(sums["examples"]) == 2.0
    assert float(sums["mlm_loss_sum"]) > 0


@pytest.mark.parametrize("kind", MODES, ids=lambda k: "-".join(k))
def test_shards_resolve_to_their_kind(kind_shards, kind):
    info = resolve_shards([str(kind_shards[kind])])
    assert (info.masking, info.input_mode) == kind
    assert info.nsp == (kind[1] == "sentence-pairs")
    assert info.max_predictions_per_seq == PREDICTIONS
    assert (info.dynamic_masking is not None) == (kind[0] == "dynamic")


@pytest.mark.slow
@pytest.mark.parametrize("kind", MODES, ids=lambda k: "-".join(k))
def test_tiny_model_loss_falls_in_every_mode(kind_shards, kind, tmp_path):
    from trainer.training import train

    config = small_config(kind_shards[kind], tmp_path / "run", steps=150, checkpoint_every=150)
    result = train(config, log=lambda m: None)
    history = result.history
    first = np.mean([e["mlm_loss"] for e in history[:15]])
    last = np.mean([e["mlm_loss"] for e in history[-15:]])
    assert last < first - 1.0, (kind, first, last)
    if kind[1] != "sentence-pairs":
        assert all(e["nsp_loss"] == 0.0 for e in history)  # no NSP head, no NSP loss
        assert all(e["loss"] == pytest.approx(e["mlm_loss"]) for e in history)
    else:
        assert history[-1]["nsp_loss"] > 0
    record = json.loads((tmp_path / "run" / "trainer_config.json").read_text())
    assert record["masking"] == kind[0] and record["input_mode"] == kind[1]
    assert record["next_sentence_prediction"] == (kind[1] == "sentence-pairs")


def test_resume_with_shards_of_another_mode_fails_early(kind_shards, shards, tmp_path):
    from trainer.training import train

    out = tmp_path / "run"
    train(
        small_config(shards, out, steps=2, warmup_steps=1, checkpoint_every=2), log=lambda m: None
    )
    packed = small_config(kind_shards[("dynamic", "full-sentences")], out, steps=4, warmup_steps=1)
    with pytest.raises(ConfigMismatchError, match="NSP head"):
        train(packed, log=lambda m: None)


def test_eval_shards_must_match_the_nsp_of_the_training_shards(kind_shards, shards, tmp_path):
    from trainer.training import prepare

    config = small_config(
        shards, tmp_path / "run", eval_data=[str(kind_shards[("dynamic", "doc-sentences")])]
    )
    with pytest.raises(ConfigMismatchError, match="NSP head would not match"):
        prepare(config)


def test_unmasked_shards_without_manifest_are_refused(kind_shards, tmp_path):
    copy = tmp_path / "no-manifest"
    shutil.copytree(kind_shards[("dynamic", "sentence-pairs")], copy)
    (copy / "manifest.json").unlink()
    with pytest.raises(ShardConfigError, match="need the manifest.json"):
        resolve_shards([str(copy)])


def test_manifest_that_contradicts_the_records_is_refused(kind_shards, tmp_path):
    copy = tmp_path / "contradiction"
    shutil.copytree(kind_shards[("dynamic", "full-sentences")], copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["input_mode"] = "sentence-pairs"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ShardConfigError, match="needs next_sentence_labels"):
        resolve_shards([str(copy)])
