"""Strategy and precision selection, the multi-replica train step, and the mixed-precision paths."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.trainer.conftest import small_config
from trainer.distribution import Placement, resolve_precision, select_strategy
from trainer.optimization import WarmupLinearDecay
from trainer.summaries import read_scalars
from trainer.training import train

ROOT = Path(__file__).resolve().parents[2]


def test_precision_rules():
    assert resolve_precision("auto", "tpu") == "bf16"
    assert resolve_precision("auto", "cpu") == "none"
    assert resolve_precision("fp16", "gpu") == "fp16"
    assert resolve_precision("bf16", "gpu") == "bf16"
    with pytest.raises(ValueError, match="fp16 is not supported on TPU"):
        resolve_precision("fp16", "tpu")
    with pytest.raises(ValueError, match="unknown precision"):
        resolve_precision("fp8", "gpu")


def test_strategy_on_this_machine():
    """CPU only: the default strategy on the CPU, and no GPU to ask for. With GPUs: all of them by
    default, the CPU with ``--gpus 0``. Asking for more GPUs than visible is refused either way."""
    visible = len(tf.config.list_logical_devices("GPU"))
    strategy, platform = select_strategy()
    if visible:
        assert platform == "gpu" and strategy.num_replicas_in_sync == visible
        cpu, cpu_platform = select_strategy(gpus=0)
        assert cpu_platform == "cpu" and cpu.num_replicas_in_sync == 1
    else:
        assert platform == "cpu" and strategy.num_replicas_in_sync == 1
    with pytest.raises(ValueError, match=f"--gpus {visible + 2} but only {visible} GPU"):
        select_strategy(gpus=visible + 2)


_REPLICA_CHECK = textwrap.dedent(
    """
    import json, os, sys
    import tensorflow as tf
    tf.config.set_visible_devices([], "GPU")  # the check is about CPU replicas on any host
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    import numpy as np
    from trainer.input_pipeline import make_dataset, resolve_shards
    from trainer.model_presets import get_preset
    from trainer.optimization import OptimizerConfig, PreReducedGradients, build_optimizer
    from trainer.pretraining_model import build_pretraining_model
    from trainer.training import make_train_loop

    class SGD(PreReducedGradients, keras.optimizers.SGD):
        pass  # linear in the gradient: a doubled reduction would double the update

    class CountingReduction(tf.distribute.ReductionToOneDevice):
        \"\"\"Counts the tensors (scalars apart) of every cross-replica reduction traced.\"\"\"

        def __init__(self):
            super().__init__()
            self.tensors, self.scalars, self.depth = 0, 0, 0

        def _count(self, tensors, fn):
            if self.depth == 0:  # not the per-value reductions inside a batch reduction
                self.scalars += sum(t.shape.rank == 0 for t in tensors)
                self.tensors += sum(t.shape.rank != 0 for t in tensors)
            self.depth += 1
            try:
                return fn()
            finally:
                self.depth -= 1

        def reduce_implementation(self, op, value, destinations, options):
            parent = super().reduce_implementation
            return self._count(
                [value.values[0]], lambda: parent(op, value, destinations, options)
            )

        def batch_reduce_implementation(self, op, pairs, options):
            parent = super().batch_reduce_implementation
            return self._count([v.values[0] for v, _ in pairs], lambda: parent(op, pairs, options))

    info = resolve_shards([sys.argv[1]])
    batch = next(iter(make_dataset(info, 8, training=False)))
    packed_info = resolve_shards([sys.argv[2]])
    packed_batch = next(iter(make_dataset(packed_info, 8, training=False)))
    config = get_preset("tiny").with_(num_layers=1, hidden_dim=64, num_heads=2,
        intermediate_dim=128, max_position_embeddings=128, vocabulary_size=4000, dropout=0.0)
    init = build_pretraining_model(config).model.get_weights()

    def one_step(strategy, clip, optimizer_name, batch=batch):
        with strategy.scope():
            built = build_pretraining_model(config, packed=True)
            model = built.model
            model.set_weights(init)
            if optimizer_name == "sgd":
                optimizer = SGD(learning_rate=0.5)
            else:
                optimizer, _ = build_optimizer(OptimizerConfig(
                    learning_rate=1e-3, warmup_steps=0, total_steps=10, recipe=optimizer_name
                ), model)
            optimizer.build(model.trainable_variables)
            step = tf.Variable(0, dtype=tf.int64, trainable=False,
                               aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        data = tf.data.Dataset.from_tensor_slices(batch).batch(8).repeat()
        loop = make_train_loop(model, optimizer, step, strategy, clip, packed_model=built.packed)
        sums = loop(iter(strategy.experimental_distribute_dataset(data)), tf.constant(1))
        return (model.get_weights(), {k: float(v) for k, v in sums.items()}, int(step.numpy()),
                int(optimizer.iterations.numpy()), len(model.trainable_variables))

    report = {}
    cases = [(0.05, "sgd", batch), (1.0, "default", batch), (1.0, "reference", batch)]
    cases.append((0.05, "sgd", packed_batch))  # packed rows: instances counted across replicas
    for clip, name, data in cases:
        counter = CountingReduction()
        mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"], cross_device_ops=counter)
        w1, s1, n1, i1, variables = one_step(tf.distribute.get_strategy(), clip, name, data)
        w2, s2, n2, i2, _ = one_step(mirrored, clip, name, data)
        packed = "instance_ids" in data
        report[f"{name} clip {clip}{' packed' if packed else ''}"] = {
            "max_weight_diff": max(float(np.abs(a - b).max()) for a, b in zip(w1, w2)),
            "max_update": max(float(np.abs(a - b).max()) for a, b in zip(w1, init)),
            "sums": [s1, s2],
            "steps": [n1, n2],
            "iterations": [i1, i2],
            "replicas": mirrored.num_replicas_in_sync,
            "reduced_tensors": counter.tensors,
            "reduced_scalars": counter.scalars,
            "variables": variables,
            "instances": float(np.asarray(data["next_sentence_weights"]).sum()) if packed else 8.0,
        }
    print("REPORT" + json.dumps(report))
    """
)


def test_two_replicas_make_the_same_update_as_one_with_one_gradient_all_reduce(
    shards, packed_shards
):
    """One step on the same global batch: 2 replicas (MirroredStrategy over 2 logical CPUs) must
    give the 1-replica weights (global denominators, summed gradients, global-norm clip), with SGD
    (linear in the gradient; clipped) and both recipes' AdamW; the gradients cross replicas once per step:
    the traced step reduces each variable's gradient once (counted in the cross-device ops).
    Packed rows too (SGD): the NSP denominator is the global batch's instances."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run(
        [sys.executable, "-c", _REPLICA_CHECK, str(shards), str(packed_shards)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.split("REPORT", 1)[1])
    assert len(report) == 4 and "sgd clip 0.05 packed" in report
    for case, r in report.items():
        assert r["replicas"] == 2 and r["steps"] == [1, 1] and r["iterations"] == [1, 1], case
        assert r["max_update"] > 1e-4, case  # the step changed the weights
        assert r["max_weight_diff"] < 1e-5, (case, r)
        one, two = r["sums"]
        for key in ("mlm_loss_sum", "mlm_weight", "nsp_loss_sum", "examples", "grad_norm"):
            assert two[key] == pytest.approx(one[key], rel=1e-4), (case, key)
        assert one["examples"] == two["examples"] == r["instances"], case
        # One gradient all-reduce: each variable's gradient once (Keras reducing them again
        # would double this), plus the 2 denominators (scalars).
        assert r["reduced_tensors"] == r["variables"], (case, r)
        assert r["reduced_scalars"] == 2, (case, r)


def test_bf16_with_xla_trains_and_exports_float32(tmp_path, shards):
    out = tmp_path / "bf16"
    config = small_config(shards, out, steps=3, warmup_steps=1, log_every=1, jit_compile=True)
    result = train(config, where=Placement(tf.distribute.get_strategy(), "cpu", "bf16"))
    assert all(e["loss"] == e["loss"] for e in result.history)  # finite, not NaN
    record = json.loads((out / "trainer_config.json").read_text())
    assert record["training"]["resolved_precision"] == "bf16"
    encoder = keras.saving.load_model(out / "encoder.keras")
    assert encoder.dtype_policy.name == "float32"


def test_fp16_uses_dynamic_loss_scaling_and_resumes_in_float32(tmp_path, shards):
    config = small_config(shards, tmp_path / "run", steps=5, warmup_steps=1, save_encoder=False)
    cpu = tf.distribute.get_strategy()
    first = train(replace(config, stop_after=3), where=Placement(cpu, "cpu", "fp16"))
    assert first.step == 3
    assert all("loss_scale" in e and e["loss_scale"] > 0 for e in first.history)
    # The checkpoint holds the loss scale beside the optimizer; float32 can resume from it.
    second = train(config, where=Placement(cpu, "cpu", "none"))
    assert second.start_step == 3 and second.step == 5
    assert all("loss_scale" not in e for e in second.history)


def _checkpoint_counts(out: Path, step: int) -> tuple[int, int]:
    """(step, optimizer iterations) saved in ``OUT/checkpoints/ckpt-STEP``."""
    reader = tf.train.load_checkpoint(str(out / "checkpoints" / f"ckpt-{step}"))
    names = reader.get_variable_to_shape_map()
    saved_step = next(n for n in names if n.startswith("step/"))
    iterations = next(n for n in names if n.startswith("optimizer/") and "iteration" in n)
    return int(reader.get_tensor(saved_step)), int(reader.get_tensor(iterations))


def test_fp16_skipped_updates_are_not_counted_as_steps(tmp_path, shards):
    """A loss scale of 2**40 overflows float16 gradients until it has been halved ~25 times:
    those steps apply no update. The run still makes exactly ``steps`` updates, the step count
    equals the optimizer's iterations (and so the schedule), and no NaN gradient norm is logged."""
    out = tmp_path / "run"
    config = small_config(
        shards, out, steps=6, warmup_steps=2, initial_loss_scale=2.0**40, save_encoder=False
    )
    result = train(config, where=Placement(tf.distribute.get_strategy(), "cpu", "fp16"))
    assert result.step == 6
    assert _checkpoint_counts(out, 6) == (6, 6)
    assert result.skipped_updates >= 20
    history = result.history
    assert [e["step"] for e in history] == [1, 2, 3, 4, 5, 6]
    assert sum(e["skipped_updates"] for e in history) == result.skipped_updates
    assert history[0]["skipped_updates"] >= 20  # 2**40 down to about 2**18
    assert all(np.isfinite(e["grad_norm"]) and e["grad_norm"] > 0 for e in history)
    assert all(np.isfinite(e["loss"]) for e in history)
    # Each skip halved the scale once (no growth within 2000 steps).
    assert history[-1]["loss_scale"] == 2.0 ** (40 - result.skipped_updates)
    schedule = WarmupLinearDecay(config.learning_rate, 2, 6)
    logged = [e["learning_rate"] for e in history]
    assert logged == pytest.approx([float(schedule(n)) for n in range(6)], rel=1e-6)
    scalars = read_scalars(f"{out}/logs/train")
    assert [s for s, _ in scalars["skipped_updates"]] == [1, 2, 3, 4, 5, 6]


def test_fp16_stops_when_no_update_is_ever_applied(tmp_path, shards):
    """An infinite loss scale stays infinite when halved: every update is skipped, and the run
    stops with FloatingPointError instead of looping for ever (exit status 1 from the CLI)."""
    config = small_config(
        shards,
        tmp_path / "run",
        steps=3,
        warmup_steps=1,
        initial_loss_scale=float("inf"),
        save_encoder=False,
    )
    with pytest.raises(FloatingPointError, match="no update applied in the last 100 steps"):
        train(config, where=Placement(tf.distribute.get_strategy(), "cpu", "fp16"))
