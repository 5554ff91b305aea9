"""Compiles the numba kernels (instance phases, near dedup) once, into numba's on-disk cache.

Each kernel is compiled on its first call and cached beside its module (``__pycache__``); a
fresh install would otherwise pay that in every worker of its first job (about 10 s on 2 cores).
``scripts/bootstrap.sh`` and the Dockerfile run ``python -m transforms.kernel_cache`` after
installing, so jobs start with the kernels ready. Calling it again is cheap (cache hits).
"""

from __future__ import annotations

import random
from collections import Counter

import numpy as np

KERNEL_GROUPS = ("phases", "near_dedup")
"""The kernels by the work that calls them: the instance phases', clean's near dedup's."""


def warm(groups: tuple[str, ...] = KERNEL_GROUPS) -> None:
    """Calls every kernel of ``groups`` once (all by default)."""
    unknown = set(groups) - set(KERNEL_GROUPS)
    if unknown:
        raise ValueError(f"unknown kernel group(s): {sorted(unknown)}")
    if "phases" in groups:
        warm_phases()
    if "near_dedup" in groups:
        warm_near_dedup()


def warm_phases() -> None:
    """Calls the instance phases' kernels once, on a tiny bucket."""
    from transforms.compact_columns import compact_bounds, compact_columns, frame_compact_rows
    from transforms.framed_examples import (
        count_frames,
        frame_bounds,
        frame_examples,
        gather_frames,
        residue_spill,
    )
    from transforms.instance_batches import (
        InstanceSettings,
        TokenTables,
        frame_static_spans,
        frame_unmasked_spans,
    )
    from transforms.instances import BucketLayout, PairConfig
    from transforms.masking import MaskingConfig
    from transforms.pair_spans import bucket_pair_spans
    from transforms.special_ids import SpecialIds
    from transforms.token_documents import TokenizedDocument, copy_ranges, unpack_documents

    docs = [TokenizedDocument.from_sentences(f"d{i}", [[200 + i] * 9, [300] * 7]) for i in range(3)]
    blob = np.frombuffer(b"".join(d.to_bytes() for d in docs), dtype=np.uint8).copy()
    sizes = np.array([len(d.to_bytes()) for d in docs], dtype=np.int64)
    positions = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    sentences = np.array([d.num_sentences for d in docs], dtype=np.int64)
    layout = BucketLayout(*unpack_documents(blob, positions, sizes, sentences))
    mapped = np.frombuffer(blob.tobytes(), dtype=np.uint8)  # read-only, as a mapped file is
    copy_ranges(mapped, positions, sizes, np.empty_like(blob), positions)
    settings = InstanceSettings(
        PairConfig(max_seq_length=32), MaskingConfig(max_predictions_per_seq=5)
    )
    spans = bucket_pair_spans(layout, settings.pairs, random.Random(0), Counter())
    tables = TokenTables(
        SpecialIds(vocab_size=400), np.arange(150, 400, dtype=np.int32), np.zeros(400, bool)
    )
    framed = frame_static_spans(
        layout.tokens, spans, settings, tables, np.random.default_rng(0), Counter()
    )
    frame_unmasked_spans(layout.tokens, spans, settings, tables, Counter())
    from transforms.pair_rows import pack_span_rows

    pack_span_rows(layout.tokens, spans, 1, 2, 32)
    frame_examples({"ids": np.zeros((1, 2), np.int64)}, {"w": np.zeros((1, 1), np.float32)})
    rows = frame_static_spans(
        layout.tokens, spans, settings, tables, np.random.default_rng(0), Counter(), compact_columns
    )
    list(frame_compact_rows(rows.data, rows.offsets[:-1], rows.offsets[1:], rows.schema))
    compact_bounds(rows.data, 0, len(rows))
    data, _ = residue_spill([framed, framed], np.arange(2 * len(framed)), 2)
    bounds = frame_bounds(framed.data, 0, len(framed))
    gather_frames(framed.data, bounds[:-1], bounds[1:])
    count_frames(data)
    from transforms.whole_word_choice import choose_whole_words

    choose_whole_words(
        np.zeros((1, 2), np.int32), np.ones((1, 2), bool), np.zeros(400, bool), np.zeros((1, 2)),
        np.zeros((1, 2)), np.ones(1), 0.8, 0.1, False, np.zeros((1, 1), np.int32),
        np.full((1, 1), -1, np.int8), np.zeros(1, np.int32),
    )  # fmt: skip


def warm_near_dedup() -> None:
    """Calls clean's near-dedup kernels once, on two texts."""
    from transforms.near_duplicates import minhash_signatures

    minhash_signatures(["one two three four five six", ""])


if __name__ == "__main__":
    warm()
