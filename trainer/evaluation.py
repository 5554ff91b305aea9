"""Evaluation over held-out shards: masked-LM and next-sentence accuracy and losses.

Every record is counted once (the last partial batch is kept, except on TPU where shapes must be
static and it is dropped). Sums are reduced across replicas, so the numbers do not depend on the
number of devices.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

from trainer import input_pipeline
from trainer.checkpointing import find_checkpoint, restore_model
from trainer.distribution import Placement, placement
from trainer.model_presets import ModelConfig
from trainer.pretraining_model import (
    SUM_KEYS,
    build_pretraining_model,
    forward_model,
    loss_sums,
    model_inputs,
    summarize,
)
from trainer.recipes import get_recipe
from trainer.run_config import TrainConfig, read_record, recorded_recipe, resolve_model
from trainer.summaries import ScalarWriter

RESULTS = "eval_results.json"


def make_eval_function(
    model: keras.Model,
    strategy: tf.distribute.Strategy,
    packed_model: keras.Model | None = None,
) -> Callable[[object], dict[str, tf.Tensor]]:
    """A compiled function: one distributed batch → summed statistics (see ``SUM_KEYS``).
    Packed rows go through ``packed_model`` (``examples`` then counts instances)."""

    def replica_fn(batch: dict) -> dict:
        net = forward_model(model, packed_model, batch)
        outputs = net(model_inputs(batch), training=False)
        return loss_sums(outputs, batch)

    @tf.function(reduce_retracing=True)
    def eval_step(batch) -> dict:
        per_replica = strategy.run(replica_fn, args=(batch,))
        return {
            k: strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica[k], axis=None)
            for k in SUM_KEYS
        }

    return eval_step


def evaluate(
    model: keras.Model,
    strategy: tf.distribute.Strategy,
    dataset_fn: Callable[[tf.distribute.InputContext], tf.data.Dataset],
    max_batches: int | None = None,
    packed_model: keras.Model | None = None,
) -> dict[str, float]:
    """Losses and accuracies over the dataset (or its first ``max_batches`` global batches).

    Returns ``loss``, ``mlm_loss``, ``mlm_accuracy``, ``nsp_loss``, ``nsp_accuracy``,
    ``examples`` and ``masked_tokens``.
    """
    dataset = strategy.distribute_datasets_from_function(dataset_fn)
    eval_step = make_eval_function(model, strategy, packed_model)
    totals = dict.fromkeys(SUM_KEYS, 0.0)
    for i, batch in enumerate(dataset):
        if max_batches is not None and i >= max_batches:
            break
        sums = eval_step(batch)
        for k in SUM_KEYS:
            totals[k] += float(np.asarray(sums[k]))
    if totals["examples"] == 0:
        raise ValueError("the evaluation data yielded no complete batch")
    result = summarize(totals)
    result["examples"] = int(totals["examples"])
    result["masked_tokens"] = int(round(totals["mlm_weight"]))
    return result


def evaluate_shards(
    model: keras.Model,
    place: Placement,
    info: input_pipeline.ShardInfo,
    batch_size: int,
    max_batches: int | None = None,
    packed_model: keras.Model | None = None,
) -> dict[str, float]:
    """``evaluate`` over shards, one ordered pass (partial last batch dropped only on TPU). A
    shard that cannot be read: ``ShardReadError`` naming it."""

    def dataset_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
        return input_pipeline.make_dataset(
            info,
            ctx.get_per_replica_batch_size(batch_size),
            training=False,
            input_context=ctx,
            drop_remainder=place.platform == "tpu",
            masking_seed=0,
        )

    try:
        return evaluate(model, place.strategy, dataset_fn, max_batches, packed_model)
    except tf.errors.OpError as e:
        if not input_pipeline.is_read_error(e):
            raise
        message = input_pipeline.read_failure(info, e, "while evaluating", "rerun")
        raise input_pipeline.ShardReadError(message) from e


def write_report(out: str, step: int, result: dict, **extra) -> dict:
    """TensorBoard scalars under ``OUT/logs/eval`` and ``OUT/eval_results.json``."""
    out = out.rstrip("/")
    ScalarWriter(f"{out}/logs/eval").write(step, {k: result[k] for k in result})
    report = {**result, "step": step, **extra}
    tf.io.gfile.makedirs(out)
    with tf.io.gfile.GFile(f"{out}/{RESULTS}", "w") as f:
        f.write(json.dumps(report, indent=2) + "\n")
    return report


def evaluate_run(
    config: TrainConfig, where: Placement | None = None, log: Callable[[str], None] = print
) -> dict:
    """Evaluation mode: the latest checkpoint of ``config.out`` (or ``config.init_checkpoint``) on
    ``config.eval_data`` (or ``config.data``). The model and its recipe's head come from the
    run's ``trainer_config.json`` (else from ``config.model`` and ``config.recipe``). Returns the
    report also written to ``OUT/eval_results.json`` (metrics, ``step``, ``checkpoint``,
    ``data``)."""
    source = config.init_checkpoint or config.out
    prefix = find_checkpoint(source)
    record = read_record(source) or read_record(prefix.rsplit("/", 2)[0])
    info = input_pipeline.resolve_shards(config.eval_data or config.data)
    for note in info.notes:
        log(f"note: {note}")
    if record and "model" in record:
        model_config = ModelConfig.from_dict(record["model"])
    else:
        model_config = resolve_model(config.model, config.model_overrides, info, config.spec)
    input_pipeline.check_fits(info, input_pipeline.DataSpec(), model_config)
    try:
        place = where or placement(config.tpu, config.gpus, config.precision)
    except ValueError as e:
        raise input_pipeline.ConfigMismatchError(str(e)) from e
    with place.strategy.scope():
        recipe = get_recipe(recorded_recipe(record) if record else config.recipe)
        # NSP is evaluated when both the checkpoint's model and the shards have it.
        nsp = info.nsp and (record.get("next_sentence_prediction", True) if record else True)
        built = build_pretraining_model(
            model_config, place.dtype_policy, recipe.head_activation, nsp=nsp, packed=info.packed
        )
    restore_model(built.model, prefix)
    result = evaluate_shards(
        built.model, place, info, config.batch_size, config.eval_batches, built.packed
    )
    tail = prefix.rsplit("-", 1)[-1]
    step = int(tail) if tail.isdigit() else 0
    return write_report(config.out, step, result, checkpoint=prefix, data=list(info.files))
