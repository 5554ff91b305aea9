"""The pretraining loop on real shards: the loss falls, resume continues, bad configs fail early."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from shards.reader import RecordSizes
from shards.validation import trainer_config_findings
from tests.trainer.conftest import SMALL, small_config
from trainer import evaluation
from trainer.checkpointing import CheckpointError, check_init_compatible
from trainer.distribution import Placement
from trainer.input_pipeline import ConfigMismatchError, DataSpec
from trainer.model_presets import get_preset
from trainer.optimization import (
    OptimizerConfig,
    ReferenceWarmupDecay,
    WarmupLinearDecay,
    build_optimizer,
)
from trainer.pretraining_model import build_pretraining_model
from trainer.run_config import TPU_STEPS_PER_LOOP, resolve_steps_per_loop
from trainer.summaries import read_scalars
from trainer.training import last_update_learning_rate, train

pytestmark = pytest.mark.xdist_group("trained_run")  # one 300-step run, set up once


def _mean_loss(entries: list[dict]) -> float:
    return float(np.mean([e["loss"] for e in entries]))


def test_tiny_model_loss_falls(trained_run):
    config, result, _ = trained_run
    history = result.history
    assert [e["step"] for e in history] == list(range(1, 301))
    first, last = _mean_loss(history[:20]), _mean_loss(history[-20:])
    # Chance level is ln(vocab) + ln(2) ≈ 9.0; a few hundred steps learn at least the unigram
    # distribution of the masked tokens.
    assert first > 8.0
    assert last < first - 1.2, (first, last)
    mlm_acc_last = np.mean([e["mlm_accuracy"] for e in history[-20:]])
    assert mlm_acc_last > 0.05
    assert all(np.isfinite(e["loss"]) and e["grad_norm"] > 0 for e in history)
    assert result.step == 300 and result.start_step == 0
    assert result.sequences_per_second and result.sequences_per_second > 0


def test_learning_rate_follows_the_schedule(trained_run):
    """The rate logged at step N is the one update N used: the schedule after N - 1 updates."""
    config, result, _ = trained_run
    schedule = WarmupLinearDecay(config.learning_rate, config.warmup_steps, config.steps)
    for entry in result.history[::37]:
        expected = float(schedule(entry["step"] - 1))
        assert entry["learning_rate"] == pytest.approx(expected, rel=1e-5)
    assert result.history[0]["learning_rate"] == 0.0  # update 1 is at step 0 of the warmup
    peak = config.learning_rate
    assert result.history[config.warmup_steps]["learning_rate"] == pytest.approx(peak)
    last = result.history[-1]["learning_rate"]
    assert last == pytest.approx(peak / (config.steps - config.warmup_steps), rel=1e-4)


def test_logged_rate_is_the_one_the_update_used():
    """Constant unit gradients: each AdamW step moves a bias-free variable by exactly its rate,
    which must be what ``last_update_learning_rate`` reports after that update."""
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, use_bias=False)])
    config = OptimizerConfig(learning_rate=0.1, warmup_steps=4, total_steps=12, weight_decay=0.0)
    optimizer, schedule = build_optimizer(config, model)
    variable = model.trainable_variables[0]
    moves, logged = [], []
    for _ in range(11):
        before = variable.numpy().copy()
        optimizer.apply_gradients([(tf.ones_like(variable), variable)])
        moves.append(float(np.abs(before - variable.numpy()).max()))
        logged.append(last_update_learning_rate(optimizer, schedule))
    np.testing.assert_allclose(moves, logged, rtol=1e-4, atol=1e-9)
    assert moves[0] == 0.0 and logged[3] == pytest.approx(0.075)  # warmup: 0, .025, .05, .075
    # The schedule at the update's own number (the old log) is the next update's rate.
    assert [float(schedule(n)) for n in range(1, 11)] == pytest.approx(logged[1:])


def test_tensorboard_logs_and_run_record(trained_run):
    config, result, _ = trained_run
    scalars = read_scalars(f"{config.out}/logs/train")
    for name in (
        "loss",
        "mlm_loss",
        "mlm_accuracy",
        "nsp_loss",
        "nsp_accuracy",
        "learning_rate",
        "sequences_per_second",
        "grad_norm",
    ):
        assert len(scalars[name]) == 300, name
    assert scalars["loss"][-1] == (300, pytest.approx(result.history[-1]["loss"], rel=1e-5))
    assert "mlm_accuracy" in read_scalars(f"{config.out}/logs/eval")
    record = json.loads((Path(config.out) / "trainer_config.json").read_text())
    assert record["max_seq_length"] == 64 and record["max_predictions_per_seq"] == 10
    assert record["vocab_size"] == 4000
    assert record["model"]["hidden_dim"] == SMALL["hidden_dim"]
    assert record["training"]["steps_per_loop"] == 1  # the default off TPU
    assert record["training"]["optimizer"]["recipe"] == "default"
    # The record is a trainer config for `bertprep validate --trainer-config`.
    assert trainer_config_findings(record, RecordSizes(64, 10), 4000) == []


def test_resume_continues_step_count_schedule_and_loss(tmp_path, shards):
    out = tmp_path / "run"
    config = small_config(shards, out, steps=80, warmup_steps=10, checkpoint_every=20)
    first = train(replace(config, stop_after=40), log=lambda m: None)
    assert first.step == 40 and first.history[-1]["step"] == 40
    assert sorted(p.name for p in (out / "checkpoints").glob("*.index")) == [
        "ckpt-20.index",
        "ckpt-40.index",
    ]
    assert not (out / "encoder.keras").exists()  # stopped early: no export yet

    messages: list[str] = []
    second = train(config, log=messages.append)
    assert second.start_step == 40 and second.step == 80
    assert second.restored_from.endswith("ckpt-40")
    assert any("resuming from" in m and "step 40" in m for m in messages)
    assert [e["step"] for e in second.history] == list(range(41, 81))
    # The schedule continues where it stopped (not a new warmup).
    schedule = WarmupLinearDecay(config.learning_rate, 10, 80)
    for entry in second.history[:3] + second.history[-3:]:
        expected = float(schedule(entry["step"] - 1))
        assert entry["learning_rate"] == pytest.approx(expected, rel=1e-5)
    # The loss picks up where it was, far below the untrained start.
    start, before, after = (
        _mean_loss(first.history[:5]),
        _mean_loss(first.history[-5:]),
        _mean_loss(second.history[:5]),
    )
    assert after < start - 1.0, (start, before, after)
    assert abs(after - before) < 0.6, (start, before, after)
    assert (out / "encoder.keras").exists()

    # Running the finished command again trains nothing.
    again = train(config, log=lambda m: None)
    assert again.start_step == again.step == 80 and again.history == []


def test_resume_refuses_another_model(tmp_path, shards):
    out = tmp_path / "run"
    train(
        small_config(shards, out, steps=2, warmup_steps=1, save_encoder=False), log=lambda m: None
    )
    bigger = small_config(
        shards, out, steps=4, warmup_steps=1, model_overrides={**SMALL, "hidden_dim": 128}
    )
    with pytest.raises(ConfigMismatchError, match="hidden_dim was 64, now 128"):
        train(bigger, log=lambda m: None)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(spec=DataSpec(max_seq_length=128)), "max_seq_length=128 but the shards have 64"),
        (
            dict(spec=DataSpec(max_predictions_per_seq=20)),
            "max_predictions_per_seq=20 but the shards have 10",
        ),
        (
            dict(spec=DataSpec(vocab_size=1000)),
            "vocabulary has 4000 tokens but the model's vocab_size is 1000",
        ),
        (
            dict(model_overrides={**SMALL, "max_position_embeddings": 32}),
            "max_seq_length=64 exceeds the model's position table",
        ),
    ],
)
def test_config_mismatch_fails_before_training(tmp_path, shards, changes, message):
    out = tmp_path / "run"
    with pytest.raises(ConfigMismatchError, match=message):
        train(small_config(shards, out, **changes), log=lambda m: None)
    assert not out.exists()  # nothing was built or written


def test_phase_two_starts_from_phase_one_weights(tmp_path, shards, trained_run):
    phase1, result1, _ = trained_run
    out = tmp_path / "phase2"
    messages: list[str] = []
    phase2 = train(
        small_config(
            shards, out, steps=3, warmup_steps=1, init_checkpoint=phase1.out, save_encoder=False
        ),
        log=messages.append,
    )
    assert phase2.start_step == 0 and phase2.step == 3
    assert phase2.initialized_from.endswith("ckpt-300")
    assert phase2.history[0]["loss"] < _mean_loss(result1.history[:20]) - 1.0


def test_phase_two_needs_a_large_enough_position_table(tmp_path, shards, trained_run):
    phase1, _, _ = trained_run
    config = small_config(
        shards,
        tmp_path / "phase2",
        init_checkpoint=phase1.out,
        model_overrides={**SMALL, "max_position_embeddings": 128},
    )
    with pytest.raises(CheckpointError, match="max_position_embeddings: 64 there, 128 here"):
        train(config, log=lambda m: None)
    # A 128-token phase 2 from a phase 1 whose table has 64 positions is refused up front.
    model = get_preset("tiny").with_(**SMALL, vocabulary_size=4000)
    with pytest.raises(
        CheckpointError, match="position table of 64, too small for max_seq_length 128"
    ):
        check_init_compatible(phase1.out, model, max_seq_length=128)


def test_reference_recipe_run_and_no_resume_with_another_recipe(tmp_path, shards, monkeypatch):
    out = tmp_path / "run"
    config = small_config(
        shards, out, steps=6, warmup_steps=2, recipe="reference", save_encoder=False
    )
    result = train(config, log=lambda m: None)
    assert result.step == 6
    schedule = ReferenceWarmupDecay(config.learning_rate, 2, 6)
    logged = [e["learning_rate"] for e in result.history]
    assert logged == pytest.approx([float(schedule(n)) for n in range(6)], rel=1e-6)
    record = json.loads((out / "trainer_config.json").read_text())
    assert record["training"]["optimizer"]["recipe"] == "reference"
    with pytest.raises(ConfigMismatchError, match="used --recipe reference, not default"):
        train(replace(config, steps=8, recipe="default"), log=lambda m: None)
    # --eval-only builds the run's head (tanh GELU), whatever --recipe says: a spy on the builder.
    built_with = []

    def spy(*args, **kwargs):
        built_with.append(args[2] if len(args) > 2 else kwargs.get("head_activation"))
        return build_pretraining_model(*args, **kwargs)

    monkeypatch.setattr(evaluation, "build_pretraining_model", spy)
    report = evaluation.evaluate_run(
        replace(config, recipe="default", eval_batches=1), log=lambda m: None
    )
    assert built_with == ["gelu_approximate"] and report["step"] == 6
    with pytest.raises(ValueError, match="reference recipe's optimizer is adamw, not lamb"):
        replace(config, optimizer="lamb")


def test_steps_per_loop_default_and_boundaries(tmp_path, shards):
    assert resolve_steps_per_loop(None, "tpu") == TPU_STEPS_PER_LOOP == 100
    assert resolve_steps_per_loop(None, "gpu") == resolve_steps_per_loop(None, "cpu") == 1
    assert resolve_steps_per_loop(7, "tpu") == 7 and resolve_steps_per_loop(7, "cpu") == 7
    out = tmp_path / "run"
    config = small_config(shards, out, steps=7, warmup_steps=1, log_every=3, save_encoder=False)
    assert config.steps_per_loop is None
    # The TPU rules on this CPU (the strategy does not matter to them): 100 steps per call.
    result = train(config, where=Placement(tf.distribute.get_strategy(), "tpu", "none"))
    record = json.loads((out / "trainer_config.json").read_text())
    assert record["training"]["steps_per_loop"] == 100
    # A call stops at each log step (3, 6) and at the end (7): 100 steps never cross them.
    assert [e["step"] for e in result.history] == [3, 6, 7]


def test_packed_shards_train_end_to_end(tmp_path, packed_shards, packed_dynamic_shards):
    """Packed rows from the instance stage, read by the real input pipeline: the reference
    recipe, several steps per host call, evaluated on packed unmasked shards (masked in
    tf.data); the NSP figures are per instance, the checkpoint restores into the unpacked model
    (the same variables), the encoder exports as a plain BertBackbone."""
    import keras_hub

    from tests.trainer.conftest import PACK, PACKED_SMALL
    from trainer.checkpointing import restore_model
    from trainer.input_pipeline import resolve_shards
    from trainer.pretraining_model import model_inputs

    out = tmp_path / "packed"
    config = small_config(
        packed_shards,
        out,
        steps=4,
        warmup_steps=1,
        log_every=2,
        steps_per_loop=2,
        recipe="reference",
        model_overrides=dict(PACKED_SMALL),
        eval_data=[str(packed_dynamic_shards)],
        eval_batches=2,
    )
    result = train(config, log=lambda m: None)
    assert result.step == 4
    assert [e["step"] for e in result.history] == [2, 4]
    for entry in result.history:
        assert np.isfinite(entry["loss"]) and entry["nsp_loss"] > 0
        # Rows hold several instances: more instances than rows went through each step.
        assert entry["instances_per_second"] > entry["sequences_per_second"]
        assert entry["tokens_per_second"] > 0
        # The interval's real tokens: 2 steps of whole rows, at most every slot.
        slots = 2 * config.batch_size * resolve_shards([str(packed_shards)]).max_seq_length
        assert entry["tokens"] == int(entry["tokens"]) and 0 < entry["tokens"] <= slots
    unpacked = build_pretraining_model(
        get_preset("tiny").with_(**PACKED_SMALL, vocabulary_size=4000)
    )
    restore_model(unpacked.model, str(out))  # every variable matched, none left over
    assert result.eval["examples"] > 2 * config.batch_size  # instances, not rows
    record = json.loads((out / "trainer_config.json").read_text())
    info = resolve_shards([str(packed_shards)])
    assert record["packing"] == {
        "max_instances_per_row": PACK,
        "max_predictions_per_row": info.max_predictions_per_row,
    }
    assert record["max_predictions_per_seq"] == 20  # per instance, as the shards say
    encoder = keras.saving.load_model(out / "encoder.keras")
    assert isinstance(encoder, keras_hub.models.BertBackbone)
    # The encoder runs unpacked inputs as any BertBackbone does.
    batch = {
        k: v[:2]
        for k, v in model_inputs(
            {
                "input_ids": np.full((2, 8), 7, "int32"),
                "segment_ids": np.zeros((2, 8), "int32"),
                "input_mask": np.ones((2, 8), "int32"),
                "masked_lm_positions": np.zeros((2, 1), "int32"),
            }
        ).items()
        if k != "mask_positions"
    }
    assert encoder(batch)["sequence_output"].shape == (2, 8, SMALL["hidden_dim"])
