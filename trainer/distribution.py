"""Where training runs: the ``tf.distribute`` strategy and the mixed-precision policy.

``--tpu NAME`` → ``TPUStrategy`` (``local`` on a TPU VM); several GPUs → ``MirroredStrategy``;
otherwise the default strategy (one GPU or the CPU). Precision ``auto`` is bf16 on TPU, bf16 on
GPUs that support it (compute capability ≥ 8.0), fp16 with dynamic loss scaling on older GPUs,
float32 on CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import tensorflow as tf

PRECISIONS = ("auto", "bf16", "fp16", "none")
POLICY = {"bf16": "mixed_bfloat16", "fp16": "mixed_float16", "none": None}


@dataclass
class Placement:
    """The strategy, the kind of device it runs on, and the Keras dtype policy to build with."""

    strategy: tf.distribute.Strategy
    platform: str  # "tpu", "gpu" or "cpu"
    precision: str  # "bf16", "fp16" or "none"

    @property
    def dtype_policy(self) -> str | None:
        return POLICY[self.precision]

    @property
    def replicas(self) -> int:
        return self.strategy.num_replicas_in_sync


def select_strategy(
    tpu: str | None = None, gpus: int | None = None
) -> tuple[tf.distribute.Strategy, str]:
    """The strategy for ``--tpu``/``--gpus`` (None: every visible GPU) and its platform."""
    if tpu:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver), "tpu"
    visible = tf.config.list_logical_devices("GPU")
    if gpus is None:
        gpus = len(visible)
    if gpus > len(visible):
        raise ValueError(f"--gpus {gpus} but only {len(visible)} GPU(s) are visible")
    if gpus > 1:
        return tf.distribute.MirroredStrategy([d.name for d in visible[:gpus]]), "gpu"
    if gpus == 1:
        return tf.distribute.OneDeviceStrategy(visible[0].name), "gpu"
    if visible:  # --gpus 0 on a machine with GPUs
        return tf.distribute.OneDeviceStrategy("/cpu:0"), "cpu"
    return tf.distribute.get_strategy(), "cpu"


def gpu_supports_bf16() -> bool:
    """Whether every visible GPU has compute capability 8.0 or higher (Ampere and later)."""
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return False
    for gpu in gpus:
        capability = tf.config.experimental.get_device_details(gpu).get("compute_capability")
        if not capability or tuple(capability) < (8, 0):
            return False
    return True


def resolve_precision(choice: str, platform: str) -> str:
    """``auto`` → bf16 on TPU and modern GPUs, fp16 on older GPUs, none on CPU; fp16 on TPU is
    refused (TPUs compute in bf16)."""
    if choice not in PRECISIONS:
        raise ValueError(f"unknown precision {choice!r}; choose one of {', '.join(PRECISIONS)}")
    if choice == "auto":
        if platform == "tpu":
            return "bf16"
        if platform == "gpu":
            return "bf16" if gpu_supports_bf16() else "fp16"
        return "none"
    if choice == "fp16" and platform == "tpu":
        raise ValueError("fp16 is not supported on TPU; use bf16")
    return choice


def placement(
    tpu: str | None = None, gpus: int | None = None, precision: str = "auto"
) -> Placement:
    """Strategy + precision for the command-line choices."""
    strategy, platform = select_strategy(tpu, gpus)
    return Placement(strategy, platform, resolve_precision(precision, platform))
