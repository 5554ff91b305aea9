"""Packing unpacked instances into rows by hand (numpy), independently of the shard writer's
``transforms.instance_packing``: what the packed-model and packed-masking tests compare against."""

from __future__ import annotations

import numpy as np

PER_TOKEN = ("input_ids", "input_mask", "segment_ids", "word_starts")


def pack_by_hand(
    batch: dict, groups: list[list[int]], max_instances: int, slots: int | None = None
) -> dict[str, np.ndarray]:
    """Rows of ``batch``'s instances (unpacked arrays: (N, L) per token, (N, P) prediction slots,
    (N, 1) labels), row r holding the instances ``groups[r]`` end to end in that order
    (``transforms.features.PACKED_FEATURES``; ``slots`` prediction slots per row, default K × P).
    Features ``batch`` lacks are left out (no masks: no ``masked_lm_*``)."""
    batch = {k: np.asarray(v) for k, v in batch.items()}
    n_rows, seq_len = len(groups), batch["input_ids"].shape[1]
    k = max_instances
    masked = "masked_lm_positions" in batch
    p = batch["masked_lm_positions"].shape[1] if masked else 0
    m = slots if slots is not None else k * p
    out = {name: np.zeros((n_rows, seq_len), np.int32) for name in PER_TOKEN if name in batch}
    out["position_ids"] = np.zeros((n_rows, seq_len), np.int32)
    out["instance_ids"] = np.zeros((n_rows, seq_len), np.int32)
    if masked:
        out["masked_lm_positions"] = np.zeros((n_rows, m), np.int32)
        out["masked_lm_ids"] = np.zeros((n_rows, m), np.int32)
        out["masked_lm_weights"] = np.zeros((n_rows, m), np.float32)
    out["next_sentence_labels"] = np.zeros((n_rows, k), np.int32)
    out["next_sentence_weights"] = np.zeros((n_rows, k), np.float32)
    out["cls_positions"] = np.zeros((n_rows, k), np.int32)
    for r, group in enumerate(groups):
        assert len(group) <= k
        offset, q = 0, 0
        for s, i in enumerate(group):
            n = int(batch["input_mask"][i].sum())
            assert offset + n <= seq_len
            span = slice(offset, offset + n)
            for name in PER_TOKEN:
                if name in batch:
                    out[name][r, span] = batch[name][i, :n]
            out["position_ids"][r, span] = np.arange(n)
            out["instance_ids"][r, span] = s + 1
            if masked:
                used = batch["masked_lm_weights"][i] > 0
                c = int(used.sum())
                out["masked_lm_positions"][r, q : q + c] = batch["masked_lm_positions"][i][used]
                out["masked_lm_positions"][r, q : q + c] += offset
                out["masked_lm_ids"][r, q : q + c] = batch["masked_lm_ids"][i][used]
                out["masked_lm_weights"][r, q : q + c] = batch["masked_lm_weights"][i][used]
                q += c
            out["next_sentence_labels"][r, s] = batch["next_sentence_labels"][i, 0]
            out["next_sentence_weights"][r, s] = 1.0
            out["cls_positions"][r, s] = offset
            offset += n
    return out


def first_fit(lengths, seq_len: int, max_instances: int) -> list[list[int]]:
    """Rows of instance indices, each instance into the first row it fits (in index order)."""
    rows: list[list[int]] = []
    room: list[int] = []
    for i, n in enumerate(lengths):
        for r, free in enumerate(room):
            if free >= n and len(rows[r]) < max_instances:
                rows[r].append(i)
                room[r] -= n
                break
        else:
            rows.append([i])
            room.append(seq_len - n)
    return rows
