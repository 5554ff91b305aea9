"""The pretraining loop: checks before step one, distributed train steps, checkpoints and resume,
TensorBoard logs, a progress line (trainer.progress), evaluation, and the exported encoder.
A shard that cannot be read after step one ends the run with ``ShardReadError``, whose one-line
message names it and the checkpoint a rerun resumes from.

``train(config)`` settles every size and checks the shards against the model before building
anything (``ConfigMismatchError``/``ShardConfigError``), then builds the model and optimizer under
the strategy, resumes from ``OUT/checkpoints`` when it holds a checkpoint (step count, optimizer
state and so the learning-rate schedule continue) or starts from ``--init-checkpoint``'s weights,
and trains to ``config.steps`` total steps: ``steps`` counts applied updates (the optimizer's
``iterations``, which drive the schedule), so a step whose update the fp16 loss scaler skips is
run again, not counted.

One train step: each replica computes its share of the global objective (denominators are the
global batch's, via a scalar all-reduce); the gradients are all-reduced once, clipped by their
global norm (the true global norm, not a per-replica one) and applied without a second reduction.
TensorBoard scalars (``OUT/logs``), over the applied updates of each interval: loss, mlm_loss,
mlm_accuracy, nsp_loss, nsp_accuracy, learning_rate (the one the logged step's update used),
grad_norm, sequences_per_second (rows; every step run, skipped or not), tokens_per_second (real
tokens), tokens (real tokens in the interval), instances_per_second (packed rows only), and
under fp16 loss_scale and skipped_updates.
Packed rows (several instances each) go through the packed forward pass and count instances in
the NSP denominator, so a packed batch has the loss of its instances unpacked. After a resume the data order is reseeded with the step, so the
records seen differ from those before the interruption (the tf.data position is not saved).
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import keras
import numpy as np
import tensorflow as tf

from trainer.checkpointing import (
    check_init_compatible,
    checkpoint_dir,
    find_checkpoint,
    make_checkpointing,
    restore_latest,
    restore_model,
)
from trainer.distribution import Placement, placement
from trainer.evaluation import evaluate_shards, write_report
from trainer.export import export_encoder
from trainer.input_pipeline import (
    ConfigMismatchError,
    DataSpec,
    ShardInfo,
    ShardReadError,
    check_fits,
    in_memory,
    is_read_error,
    make_dataset,
    read_failure,
    resolve_shards,
)
from trainer.model_presets import ModelConfig
from trainer.optimization import PreReducedGradients, build_optimizer
from trainer.pretraining_model import (
    SUM_KEYS,
    batch_examples,
    build_pretraining_model,
    forward_model,
    loss_sums,
    model_inputs,
    objective,
    summarize,
)
from trainer.progress import TrainProgress, format_metrics
from trainer.recipes import get_recipe
from trainer.run_config import (
    TrainConfig,
    read_record,
    resolve_model,
    resolve_steps_per_loop,
    resume_conflicts,
    write_record,
)
from trainer.summaries import ScalarWriter

LOGS = "logs"
Log = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Prepared:
    """What the checks before step one settled."""

    info: ShardInfo
    model: ModelConfig
    eval_info: ShardInfo | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def packed(self) -> bool:
        """Whether the training or the eval shards are packed rows (the model then has the
        packed forward pass too)."""
        return self.info.packed or (self.eval_info is not None and self.eval_info.packed)


@dataclass
class TrainResult:
    """How a call to ``train`` ended. ``history`` has one entry per log interval."""

    step: int
    start_step: int
    history: list[dict]
    eval: dict | None = None
    encoder: dict | None = None
    sequences_per_second: float | None = None
    """Rows per second (packed rows hold several instances each)."""
    tokens_per_second: float | None = None
    """Real tokens (``input_mask``) per second, over the same steps."""
    restored_from: str | None = None
    initialized_from: str | None = None
    skipped_updates: int = 0
    """Steps run whose update the fp16 loss scaler skipped (non-finite gradients); they are not
    counted in ``step``."""


def prepare(config: TrainConfig) -> Prepared:
    """Every check that needs no model: shards, sizes, model fit, resume and init compatibility,
    the vocabulary to export and a writable output directory (nothing fails after step one for
    want of an input)."""
    check_outputs(config)
    info = resolve_shards(config.data)
    model = resolve_model(config.model, config.model_overrides, info, config.spec)
    check_fits(info, config.spec, model)
    notes = list(info.notes)
    eval_info = None
    if config.eval_data:
        eval_info = resolve_shards(config.eval_data)
        check_fits(eval_info, DataSpec(), model)
        if eval_info.nsp != info.nsp:
            raise ConfigMismatchError(
                f"the training shards are {info.input_mode} "
                f"({'with' if info.nsp else 'without'} NSP) but the eval shards are "
                f"{eval_info.input_mode}: the model's NSP head would not match"
            )
        notes += [f"eval data: {n}" for n in eval_info.notes]
    record = read_record(config.out)
    if record is not None and tf.train.latest_checkpoint(checkpoint_dir(config.out)):
        conflicts = resume_conflicts(record, model, info, config.recipe)
        if conflicts:
            raise ConfigMismatchError(
                f"cannot continue the run in {config.out}:\n  - " + "\n  - ".join(conflicts)
            )
    if config.init_checkpoint:
        find_checkpoint(config.init_checkpoint)
        check_init_compatible(config.init_checkpoint, model, info.max_seq_length)
    if info.records:
        epochs = config.steps * config.batch_size / info.records
        notes.append(
            f"{info.records:,} training records; {config.steps:,} steps ≈ {epochs:.2f} epochs"
        )
    if info.vocab_size is not None and info.vocab_size < model.vocabulary_size:
        notes.append(
            f"model vocab_size {model.vocabulary_size} > the shards' {info.vocab_size} "
            "(extra rows are never used as inputs)"
        )
    return Prepared(info=info, model=model, eval_info=eval_info, notes=notes)


def check_outputs(config: TrainConfig) -> None:
    """The files the run needs besides the shards: ``vocab`` (exported with the encoder) must be
    a readable, non-empty file, and ``out`` must be (or be creatable in) a directory this process
    can write to. Nothing is created. Raises ConfigMismatchError naming the path."""
    if config.vocab:
        if not tf.io.gfile.exists(config.vocab) or tf.io.gfile.isdir(config.vocab):
            raise ConfigMismatchError(f"vocab {config.vocab}: no such file")
        try:
            with tf.io.gfile.GFile(config.vocab, "rb") as f:
                head = f.read(1 << 16)
        except tf.errors.OpError as e:
            raise ConfigMismatchError(f"vocab {config.vocab}: cannot be read ({e.message})") from e
        if not head.strip():
            raise ConfigMismatchError(f"vocab {config.vocab}: the file is empty")
    out = config.out.rstrip("/") or "/"
    if "://" in out:  # object storage: writability shows at the first checkpoint
        return
    existing = os.path.abspath(out)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise ConfigMismatchError(f"output directory {config.out}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigMismatchError(f"output directory {config.out}: {existing} is not writable")


MAX_STALLED_STEPS = 100
"""fp16: training stops (``FloatingPointError``) after this many steps in a row without an applied
update (each halves the loss scale: from 2**15 the scale is then far below 1)."""
UPDATES = "updates"
TOKENS = "tokens"
"""The loop's sum of real tokens (``input_mask``) over the applied updates' batches."""
"""The loop's count of applied updates (fewer than the steps run when fp16 skips some)."""


def make_train_loop(
    model: keras.Model,
    optimizer: keras.optimizers.Optimizer,
    step: tf.Variable,
    strategy: tf.distribute.Strategy,
    clip_norm: float,
    jit_compile: bool = False,
    packed_model: keras.Model | None = None,
) -> Callable:
    """A compiled ``loop(iterator, n)`` running ``n`` train steps; returns summed statistics.

    Batches of packed rows go through ``packed_model`` (``PretrainingModel.packed``: the same
    variables as ``model``); their NSP denominator counts instances, not rows
    (``batch_examples``), and ``TOKENS`` sums the real tokens of every batch.

    ``step`` advances by the updates the optimizer applied (its ``iterations``), so a step the
    fp16 loss scaler skips (non-finite gradients) is not counted. The statistics (``SUM_KEYS``,
    ``grad_norm``) are summed over the applied updates only, and ``UPDATES`` counts them. The
    optimizer must not all-reduce again (``trainer.optimization``'s optimizers do not): the
    gradients are all-reduced here, once.
    """
    variables = model.trainable_variables
    replicas = strategy.num_replicas_in_sync
    loss_scaler = optimizer if isinstance(optimizer, keras.optimizers.LossScaleOptimizer) else None
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    if replicas > 1 and not isinstance(inner, PreReducedGradients):
        raise TypeError(
            f"{type(inner).__name__} all-reduces the gradients again: use an optimizer from "
            "trainer.optimization (PreReducedGradients)"
        )

    def forward_backward(batch, mlm_total, examples_total):
        net = forward_model(model, packed_model, batch)
        with tf.GradientTape() as tape:
            outputs = net(model_inputs(batch), training=True)
            sums = loss_sums(outputs, batch)
            loss = objective(sums, mlm_total, examples_total)
            if loss_scaler is not None:
                loss = loss_scaler.scale_loss(loss)
        return sums, tape.gradient(loss, variables)

    if jit_compile:
        forward_backward = tf.function(forward_backward, jit_compile=True)

    def replica_step(batch):
        ctx = tf.distribute.get_replica_context()
        weight = tf.reduce_sum(tf.cast(batch["masked_lm_weights"], tf.float32))
        examples = batch_examples(batch)
        mlm_total, examples_total = ctx.all_reduce(tf.distribute.ReduceOp.SUM, [weight, examples])
        sums, grads = forward_backward(batch, mlm_total, examples_total)
        # Dense gradients (the segment embedding's is IndexedSlices): what TPUs all-reduce, and
        # the tied token embedding's is dense anyway.
        # Without an NSP head the pooler gets no gradient: zeros (Adam then leaves it unchanged).
        grads = [
            tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
            for g, v in zip(grads, variables, strict=True)
        ]
        if replicas > 1:
            grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        scale = tf.cast(loss_scaler.dynamic_scale, tf.float32) if loss_scaler is not None else 1.0
        norm = tf.linalg.global_norm(grads)
        if clip_norm > 0:
            grads, _ = tf.clip_by_global_norm(grads, clip_norm * scale, use_norm=norm)
        # Already summed over the replicas: the optimizer applies them without reducing again.
        optimizer.apply_gradients(zip(grads, variables, strict=True))
        sums["grad_norm"] = norm / scale / replicas  # summed over the replicas below
        sums[TOKENS] = tf.reduce_sum(tf.cast(batch["input_mask"], tf.float32))
        return sums

    keys = (*SUM_KEYS, "grad_norm", TOKENS)
    iterations = optimizer.iterations

    @tf.function
    def loop(iterator, n):
        totals = {k: tf.constant(0.0) for k in (*keys, UPDATES)}
        for _ in tf.range(n):
            before = tf.identity(iterations)
            per_replica = strategy.run(replica_step, args=(next(iterator),))
            applied = tf.cast(tf.identity(iterations) - before, tf.int64)
            # A skipped update's figures (its gradient norm is inf or NaN) are left out.
            totals = {
                k: totals[k]
                + tf.where(
                    applied > 0,
                    strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica[k], axis=None),
                    0.0,
                )
                for k in keys
            } | {UPDATES: totals[UPDATES] + tf.cast(applied, tf.float32)}
            step.assign_add(applied)
        return totals

    return loop


def last_update_learning_rate(optimizer: keras.optimizers.Optimizer, schedule) -> float:
    """The rate the optimizer's latest update used: the schedule at ``iterations − 1`` (Keras
    evaluates it at ``iterations``, then counts the update). Before any update: the first's."""
    return float(schedule(max(int(optimizer.iterations.numpy()) - 1, 0)))


def _vocab_for_export(info: ShardInfo, explicit: str | None, log: Log) -> tuple[str | None, bool]:
    lowercase = True if info.do_lower_case is None else info.do_lower_case
    if explicit:
        return explicit, lowercase
    path = info.vocab_path
    if not path or not tf.io.gfile.exists(path):
        log("note: vocabulary not found (pass --vocab): encoder exported without a tokenizer")
        return None, lowercase
    with tf.io.gfile.GFile(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if info.vocab_sha256 and digest != info.vocab_sha256:
        log(f"note: {path} changed since the shards were made: exported without a tokenizer")
        return None, lowercase
    return path, lowercase


def _default_jit(place: Placement, requested: bool | None) -> bool:
    if requested is not None:
        return requested and place.platform != "tpu"
    return place.platform == "gpu" and place.replicas == 1


def train(config: TrainConfig, where: Placement | None = None, log: Log = _stderr) -> TrainResult:
    """Trains to ``config.steps`` total steps (resuming when ``OUT`` holds a checkpoint)."""
    prep = prepare(config)
    for note in prep.notes:
        log(f"note: {note}")
    try:
        place = where or placement(config.tpu, config.gpus, config.precision)
    except ValueError as e:
        raise ConfigMismatchError(str(e)) from e
    strategy = place.strategy
    if config.batch_size % place.replicas:
        raise ConfigMismatchError(
            f"batch size {config.batch_size} is not divisible by {place.replicas} replicas"
        )
    with strategy.scope():
        built = build_pretraining_model(
            prep.model,
            place.dtype_policy,
            get_recipe(config.recipe).head_activation,
            nsp=prep.info.nsp,
            packed=prep.packed,
        )
        model = built.model
        optimizer, schedule = build_optimizer(config.optimizer_config(), model)
        if place.precision == "fp16":
            optimizer = keras.optimizers.LossScaleOptimizer(
                optimizer, initial_scale=config.initial_loss_scale
            )
        optimizer.build(model.trainable_variables)
        step = tf.Variable(
            0,
            dtype=tf.int64,
            trainable=False,
            name="global_step",
            aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
        )
    state = make_checkpointing(config.out, model, optimizer, step, config.keep_checkpoints)
    if restore_latest(state):
        log(f"resuming from {state.restored_from} at step {int(step.numpy())}")
    elif config.init_checkpoint:
        state.initialized_from = restore_model(model, config.init_checkpoint)
        log(f"initialized the model from {state.initialized_from}")
    start = int(step.numpy())
    write_record(
        config,
        prep.model,
        prep.info,
        {
            "platform": place.platform,
            "replicas": place.replicas,
            "resolved_precision": place.precision,
            "steps_per_loop": resolve_steps_per_loop(config.steps_per_loop, place.platform),
        },
    )
    result = TrainResult(
        step=start,
        start_step=start,
        history=[],
        restored_from=state.restored_from,
        initialized_from=state.initialized_from,
    )
    if start < config.steps:
        _run_steps(config, prep, place, built, optimizer, schedule, state, result, log)
    elif start > 0:
        log(f"already at step {start} (target {config.steps}): nothing to train")
    if result.step < config.steps:
        log(f"stopped at step {result.step} of {config.steps}; run again to continue")
        return result
    if prep.eval_info is not None:
        result.eval = _evaluate(config, prep.eval_info, place, model, result.step, built.packed)
        log(f"eval: {format_metrics(result.eval)}")
    if config.save_encoder:
        vocab, lowercase = _vocab_for_export(prep.info, config.vocab, log)
        result.encoder = export_encoder(built.backbone, config.out, vocab, lowercase)
        log(f"encoder saved: {result.encoder['keras']} and {result.encoder['preset']}/")
    return result


def _evaluate(
    config: TrainConfig,
    info: ShardInfo,
    place: Placement,
    model: keras.Model,
    step: int,
    packed_model: keras.Model | None = None,
) -> dict:
    result = evaluate_shards(
        model, place, info, config.batch_size, config.eval_batches, packed_model=packed_model
    )
    write_report(config.out, step, result, data=list(info.files))
    return result


def _run_steps(
    config: TrainConfig,
    prep: Prepared,
    place: Placement,
    built,
    optimizer: keras.optimizers.Optimizer,
    schedule,
    state,
    result: TrainResult,
    log: Log,
) -> None:
    strategy = place.strategy
    model = built.model
    start = result.start_step
    info = prep.info

    def train_input(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
        dataset = make_dataset(
            info,
            ctx.get_per_replica_batch_size(config.batch_size),
            training=True,
            input_context=ctx,
            shuffle_buffer=config.shuffle_buffer,
            seed=config.seed + start,
            deterministic=config.deterministic,
            masking_seed=config.seed,
            start_step=start,
        )
        return in_memory(dataset) if config.synthetic else dataset

    iterator = iter(strategy.distribute_datasets_from_function(train_input))
    loop = make_train_loop(
        model,
        optimizer,
        state.step,
        strategy,
        config.clip_norm,
        _default_jit(place, config.jit_compile),
        packed_model=built.packed,
    )
    writer = ScalarWriter(f"{config.out.rstrip('/')}/{LOGS}/train")
    progress = TrainProgress(config.steps, start) if config.progress else None
    loss_scaler = optimizer if isinstance(optimizer, keras.optimizers.LossScaleOptimizer) else None
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    steps_per_loop = resolve_steps_per_loop(config.steps_per_loop, place.platform)
    current = start
    totals = dict.fromkeys((*SUM_KEYS, "grad_norm", TOKENS, UPDATES), 0.0)
    interval_runs, interval_start = 0, time.perf_counter()
    steady_time, steady_runs, steady_tokens, first_loop = 0.0, 0, 0.0, True
    stalled = 0  # steps run in calls that applied no update (fp16)
    stop = config.steps
    if config.stop_after is not None:
        stop = min(stop, start + config.stop_after)
    while current < stop:
        n = steps_per_loop
        for every in (config.log_every, config.checkpoint_every, config.eval_every):
            if every:
                n = min(n, every - current % every)
        n = min(n, stop - current)
        t0 = time.perf_counter()
        try:
            sums = loop(iterator, tf.constant(n, tf.int32))
        except tf.errors.OpError as e:
            if not is_read_error(e):
                raise
            latest = state.manager.latest_checkpoint
            rerun = (
                f"rerun: training resumes from {latest}"
                if latest
                else "rerun: no checkpoint yet, training starts over"
            )
            when = f"at step {current + 1}" if n == 1 else f"in steps {current + 1}-{current + n}"
            raise ShardReadError(read_failure(info, e, when, rerun)) from e
        sums = {k: float(np.asarray(v)) for k, v in sums.items()}
        elapsed = time.perf_counter() - t0
        if not first_loop:
            steady_time += elapsed
            steady_runs += n
            steady_tokens += sums[TOKENS]
        first_loop = False
        applied = int(round(sums[UPDATES]))
        skipped = n - applied
        result.skipped_updates += skipped
        interval_runs += n
        for k, v in sums.items():
            totals[k] += v
        if not np.isfinite(sums["mlm_loss_sum"] + sums["nsp_loss_sum"]):
            raise FloatingPointError(
                f"the loss is not finite at step {current + applied}; the last good checkpoint is "
                f"{state.manager.latest_checkpoint}"
            )
        stalled = stalled + n if applied == 0 else 0
        if stalled >= MAX_STALLED_STEPS:
            raise FloatingPointError(
                f"no update applied in the last {stalled} steps at step {current} (gradients "
                f"not finite at every loss scale); the last good checkpoint is "
                f"{state.manager.latest_checkpoint}"
            )
        if applied == 0:
            continue
        current = int(state.step.numpy())
        if current % config.log_every == 0 or current == stop:
            seconds = time.perf_counter() - interval_start
            updates = totals[UPDATES]
            entry = {
                "step": current,
                **summarize(totals),
                "grad_norm": totals["grad_norm"] / updates,
                "learning_rate": last_update_learning_rate(inner, schedule),
                "sequences_per_second": interval_runs * config.batch_size / max(seconds, 1e-9),
                "tokens_per_second": totals[TOKENS] / max(seconds, 1e-9),
                "tokens": totals[TOKENS],
            }
            if info.packed:
                entry["instances_per_second"] = totals["examples"] / max(seconds, 1e-9)
            if loss_scaler is not None:
                entry["loss_scale"] = float(np.asarray(loss_scaler.dynamic_scale))
                entry["skipped_updates"] = interval_runs - int(round(updates))
            result.history.append(entry)
            writer.write(current, {k: v for k, v in entry.items() if k != "step"})
            if progress is not None:
                progress.update(
                    current,
                    [
                        ("loss", entry["loss"]),
                        ("mlm_acc", entry["mlm_accuracy"]),
                        ("nsp_acc", entry["nsp_accuracy"]),
                        ("lr", entry["learning_rate"]),
                        ("seq/s", entry["sequences_per_second"]),
                    ],
                )
            totals = dict.fromkeys(totals, 0.0)
            interval_runs, interval_start = 0, time.perf_counter()
        if current % config.checkpoint_every == 0 or current == stop:
            state.save(current)
        eval_due = config.eval_every and current % config.eval_every == 0
        if eval_due and prep.eval_info is not None and current < config.steps:
            evaluation = _evaluate(config, prep.eval_info, place, model, current, built.packed)
            if progress is not None:
                progress.close()
            log(f"step {current} eval: {format_metrics(evaluation)}")
    if progress is not None:
        progress.close()
    result.step = current
    if steady_runs:
        result.sequences_per_second = steady_runs * config.batch_size / steady_time
        result.tokens_per_second = steady_tokens / steady_time
