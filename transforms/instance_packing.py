"""Several sentence-pair instances per row: which instances share a row, and the packed columns.

BERT pads every row to ``max_seq_length``; a packed row lays up to K instances end to end
(``transforms.features.PACKED_FEATURES``), each keeping its own tokens, segments, masks and NSP
label. Rows are chosen by first-fit-decreasing over one batch of instances: instances are taken
longest first (ties: the earlier one) and each goes into the first open row it fits in (tokens ≤
``max_seq_length``, instances ≤ K), or opens a new row. Within a row, instances keep their batch
order. Everything here is a function of the batch's lengths alone: deterministic, no randomness.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from transforms.framed_examples import ColumnEncoder, FramedRecords, frame_columns


@numba.njit(cache=True)
def _first_fit(order, lengths, capacity, max_items, row_of):  # fmt: skip
    n = order.shape[0]
    free = np.empty(n, dtype=np.int64)
    held = np.empty(n, dtype=np.int64)
    rows = 0
    for i in range(n):
        item = order[i]
        size = lengths[item]
        r = 0
        while r < rows and (free[r] < size or held[r] >= max_items):
            r += 1
        if r == rows:
            free[r] = capacity
            held[r] = 0
            rows += 1
        free[r] -= size
        held[r] += 1
        row_of[item] = r
    return rows


@dataclass(frozen=True)
class RowPlan:
    """Where each instance of a batch goes: its row, its place in the row (0-based) and the row
    position of its first token (its ``[CLS]``)."""

    row: np.ndarray
    slot: np.ndarray
    offset: np.ndarray
    rows: int
    max_instances: int

    def __len__(self) -> int:
        return len(self.row)


def plan_rows(lengths: np.ndarray, seq_len: int, max_instances: int) -> RowPlan:
    """First-fit-decreasing rows of at most ``seq_len`` tokens and ``max_instances`` instances
    for instances of ``lengths`` tokens (each ≤ ``seq_len``). Rows are numbered in the order they
    were opened; within a row, instances keep their order in ``lengths``."""
    if max_instances < 1:
        raise ValueError(f"max_instances must be at least 1, got {max_instances}")
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    n = len(lengths)
    if n and (lengths.max() > seq_len or lengths.min() < 1):
        raise ValueError(f"instance lengths must lie in [1, {seq_len}]")
    row = np.empty(n, dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")
    rows = int(_first_fit(order, lengths, seq_len, max_instances, row)) if n else 0
    by_row = np.lexsort((np.arange(n), row))
    slot = _before_in_row(np.ones(n, dtype=np.int64), row, by_row, rows)
    offset = _before_in_row(lengths, row, by_row, rows)
    return RowPlan(row, slot, offset, rows, max_instances)


def _before_in_row(values: np.ndarray, row: np.ndarray, by_row: np.ndarray, rows: int):
    """Per item, the sum of ``values`` over the items before it in its row (``by_row``: the
    items ordered by row, then by place in the row)."""
    n = len(values)
    ends = np.cumsum(values[by_row])
    starts = np.searchsorted(row[by_row], np.arange(rows))
    base = np.concatenate(([0], ends))[starts]
    out = np.empty(n, dtype=np.int64)
    out[by_row] = ends - values[by_row] - np.repeat(base, np.diff(np.append(starts, n)))
    return out


@numba.njit(cache=True)
def _pack(
    tokens, segments, starts, positions, label_ids, weights, labels, lengths, row, slot, offset,
    first, seq_len, p, k, m, masked, ints, floats,
):  # fmt: skip
    # int columns: input_ids, input_mask, segment_ids, position_ids, instance_ids, then
    # masked_lm_positions + masked_lm_ids (m each) or word_starts (L), then
    # next_sentence_labels, cls_positions (K each); floats: [masked_lm_weights (m),]
    # next_sentence_weights (K)
    tail = 5 * seq_len + (2 * m if masked else seq_len)
    for i in range(tokens.shape[0]):
        r, o, n = row[i], offset[i], lengths[i]
        for c in range(n):
            ints[r, o + c] = tokens[i, c]
            ints[r, seq_len + o + c] = 1
            ints[r, 2 * seq_len + o + c] = segments[i, c]
            ints[r, 3 * seq_len + o + c] = c
            ints[r, 4 * seq_len + o + c] = slot[i] + 1
            if not masked:
                ints[r, 5 * seq_len + o + c] = starts[i, c]
        if masked:
            q = first[i]
            for j in range(p):
                if weights[i, j] > 0:
                    if q >= m:
                        raise ValueError("a packed row has more predictions than its slots")
                    ints[r, 5 * seq_len + q] = positions[i, j] + o
                    ints[r, 5 * seq_len + m + q] = label_ids[i, j]
                    floats[r, q] = weights[i, j]
                    q += 1
        ints[r, tail + slot[i]] = labels[i]
        ints[r, tail + k + slot[i]] = o
        floats[r, (m if masked else 0) + slot[i]] = 1.0


@dataclass(frozen=True)
class PackedColumns:
    """The packed rows' features side by side, as ``transforms.framed_examples.frame_columns``
    takes them: int features (``int_names``) in ``ints`` (int32 (rows, C), feature ``f`` in
    columns ``int_bounds[f]:int_bounds[f + 1]``), float features (``float_names``) in
    ``floats`` (float32 (rows, D), likewise ``float_bounds``)."""

    ints: np.ndarray
    int_names: tuple[str, ...]
    int_bounds: np.ndarray
    floats: np.ndarray
    float_names: tuple[str, ...]
    float_bounds: np.ndarray

    @property
    def rows(self) -> int:
        return len(self.ints)

    def features(self) -> dict[str, np.ndarray]:
        """Feature name → (rows, length) array."""
        out = {}
        for names, matrix, bounds in (
            (self.int_names, self.ints, self.int_bounds),
            (self.float_names, self.floats, self.float_bounds),
        ):
            for f, name in enumerate(names):
                out[name] = matrix[:, bounds[f] : bounds[f + 1]]
        return out

    def framed(self, encoder: ColumnEncoder = frame_columns) -> FramedRecords:
        """The rows as framed ``tf.train.Example`` records (int features first), or what
        ``encoder`` makes of their columns."""
        floats = self.floats.view(np.uint8)
        return encoder(
            self.ints,
            self.int_bounds,
            floats,
            4 * self.float_bounds,
            [*self.int_names, *self.float_names],
        )


def packed_columns(
    *,
    input_ids: np.ndarray,
    segment_ids: np.ndarray,
    lengths: np.ndarray,
    next_sentence_labels: np.ndarray,
    plan: RowPlan,
    masked: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    prediction_slots: int = 0,
    word_starts: np.ndarray | None = None,
) -> PackedColumns:
    """The packed features (``transforms.features.PACKED_FEATURES``) of unpacked instances
    (n, L) laid out by ``plan``: static rows when ``masked`` (their positions, label ids and
    weights, (n, P), used slots first) is given, with ``prediction_slots`` per row
    (``transforms.features.packed_prediction_slots``; ValueError when a row's instances have
    more), else unmasked rows with ``word_starts``."""
    seq_len = input_ids.shape[1]
    k = plan.max_instances
    if masked is None and word_starts is None:
        raise ValueError("unmasked packed rows need word_starts")
    empty_i = np.zeros((len(lengths), 0), dtype=np.int32)
    if masked is not None:
        positions, label_ids, weights = masked
        p = positions.shape[1]
        by_row = np.lexsort((plan.slot, plan.row))
        first = _before_in_row((weights > 0).sum(axis=1), plan.row, by_row, plan.rows)
        token_names = ("masked_lm_positions", "masked_lm_ids")
        m = prediction_slots
        token_widths = [m, m]
        float_names: tuple[str, ...] = ("masked_lm_weights", "next_sentence_weights")
        float_widths = [m, k]
        starts = empty_i
    else:
        p = m = 0
        positions = label_ids = empty_i
        weights = np.zeros((len(lengths), 0), dtype=np.float32)
        first = np.zeros(len(lengths), dtype=np.int64)
        token_names = ("word_starts",)
        token_widths = [seq_len]
        float_names = ("next_sentence_weights",)
        float_widths = [k]
        starts = word_starts
    int_names = (
        "input_ids", "input_mask", "segment_ids", "position_ids", "instance_ids", *token_names,
        "next_sentence_labels", "cls_positions",
    )  # fmt: skip
    int_bounds = np.cumsum([0, *[seq_len] * 5, *token_widths, k, k])
    float_bounds = np.cumsum([0, *float_widths])
    ints = np.zeros((plan.rows, int(int_bounds[-1])), dtype=np.int32)
    floats = np.zeros((plan.rows, int(float_bounds[-1])), dtype=np.float32)
    _pack(
        np.ascontiguousarray(input_ids), np.ascontiguousarray(segment_ids),
        np.ascontiguousarray(starts), np.ascontiguousarray(positions),
        np.ascontiguousarray(label_ids), np.ascontiguousarray(weights, dtype=np.float32),
        np.asarray(next_sentence_labels).reshape(-1), np.asarray(lengths, dtype=np.int64),
        plan.row, plan.slot, plan.offset, first, seq_len, p, k, m, masked is not None, ints,
        floats,
    )  # fmt: skip
    return PackedColumns(ints, int_names, int_bounds, floats, float_names, float_bounds)


def unpack_row(row: dict, max_predictions_per_seq: int) -> list[dict[str, np.ndarray]]:
    """The instances of one decoded packed row (feature → values), each as the unpacked record
    it stands for (``transforms.features.FEATURES`` or ``UNMASKED_FEATURES`` at the row's length;
    ``max_predictions_per_seq`` slots each): the inverse of ``packed_columns``. A row that breaks
    the packed layout raises ValueError saying how (``unpack_batch`` finds the same)."""
    unpacked = unpack_batch({k: np.asarray([v]) for k, v in row.items()}, max_predictions_per_seq)
    if unpacked.broken:
        raise ValueError(unpacked.broken[0])
    features = unpacked.features
    return [{name: a[i] for name, a in features.items()} for i in range(len(unpacked.row))]


@dataclass(frozen=True)
class UnpackedBatch:
    """The instances of a batch of packed rows as unpacked records (``features``: (M, width)
    arrays of the unpacked kind), the row each came from (``row``: (M,)), and the rows whose
    layout is broken (``broken``: row index → why; their instances are left out)."""

    features: dict[str, np.ndarray]
    row: np.ndarray
    broken: dict[int, str]


def unpack_batch(batch: dict[str, np.ndarray], max_predictions_per_seq: int) -> UnpackedBatch:
    """``unpack_row`` over a batch of packed rows, vectorized: (N, width) arrays of the packed
    kind → the instances as (M, width) arrays of the unpacked kind (static when the batch has
    prediction slots, else unmasked with ``word_starts``)."""
    ids = np.asarray(batch["input_ids"])
    n, seq_len = ids.shape
    p = max_predictions_per_seq
    instance_ids = np.asarray(batch["instance_ids"]).astype(np.int64)
    nsw = np.asarray(batch["next_sentence_weights"])
    cls = np.asarray(batch["cls_positions"]).astype(np.int64)
    k = nsw.shape[1]
    broken: dict[int, str] = {}

    def fail(rows: np.ndarray, why: str) -> None:
        for r in rows.tolist():
            broken.setdefault(int(r), why)

    used = nsw > 0
    fail(
        np.flatnonzero((used[:, 1:] & ~used[:, :-1]).any(axis=1)),
        "an instance slot after an unused one",
    )
    fail(
        np.flatnonzero(((instance_ids < 0) | (instance_ids > k)).any(axis=1)),
        f"instance_ids outside [0, {k}]",
    )
    fail(
        np.flatnonzero(((cls < 0) | (cls >= seq_len)).any(axis=1)), "cls_positions outside the row"
    )
    counts = np.zeros((n, k + 1), dtype=np.int64)
    np.add.at(counts, (np.repeat(np.arange(n), seq_len), np.clip(instance_ids, 0, k).ravel()), 1)
    lengths_by_slot = counts[:, 1:]
    fail(
        np.flatnonzero((used != (lengths_by_slot > 0)).any(axis=1)),
        "instance_ids and next_sentence_weights name different instances",
    )
    rows, slots = np.nonzero(used)
    start = np.clip(cls[rows, slots], 0, seq_len - 1)
    length = lengths_by_slot[rows, slots]
    cols = np.arange(seq_len)
    inside = cols[None, :] < length[:, None]
    src = np.minimum(start[:, None] + cols[None, :], seq_len - 1)
    runs = (instance_ids[rows[:, None], src] == (slots + 1)[:, None]) | ~inside
    fail(
        np.unique(rows[~runs.all(axis=1) | (start + length > seq_len)]),
        "an instance's tokens are not one run from its [CLS]",
    )
    keep = ~np.isin(rows, np.fromiter(broken, dtype=np.int64, count=len(broken)))
    rows, slots, start, length, inside, src = (
        a[keep] for a in (rows, slots, start, length, inside, src)
    )
    m = len(rows)
    out: dict[str, np.ndarray] = {}
    for name in ("input_ids", "input_mask", "segment_ids", "word_starts"):
        if name in batch:
            column = np.asarray(batch[name]).astype(np.int64)
            out[name] = np.where(inside, column[rows[:, None], src], 0)
    if "masked_lm_positions" in batch:
        positions = np.asarray(batch["masked_lm_positions"]).astype(np.int64)
        label_ids = np.asarray(batch["masked_lm_ids"]).astype(np.int64)
        weights = np.asarray(batch["masked_lm_weights"])
        index = np.full((n, k), -1, dtype=np.int64)
        index[rows, slots] = np.arange(m)
        r_slot, c_slot = np.nonzero(weights > 0)
        owner_slot = instance_ids[r_slot, np.clip(positions[r_slot, c_slot], 0, seq_len - 1)] - 1
        owner = np.where(owner_slot >= 0, index[r_slot, np.clip(owner_slot, 0, k - 1)], -1)
        stray = owner < 0
        fail(
            np.unique(r_slot[stray & (index[r_slot].max(axis=1) >= 0)]),
            "a masked position outside every instance",
        )
        owner, r_slot, c_slot = owner[~stray], r_slot[~stray], c_slot[~stray]
        order = np.lexsort((c_slot, owner))
        owner, r_slot, c_slot = owner[order], r_slot[order], c_slot[order]
        firsts = np.searchsorted(owner, owner, side="left")
        rank = np.arange(len(owner)) - firsts
        over = rank >= p
        fail(np.unique(r_slot[over]), f"an instance with more than {p} masked positions")
        ok = ~over
        owner, r_slot, c_slot, rank = owner[ok], r_slot[ok], c_slot[ok], rank[ok]
        out_pos = np.zeros((m, p), dtype=np.int64)
        out_ids = np.zeros((m, p), dtype=np.int64)
        out_w = np.zeros((m, p), dtype=np.float32)
        out_pos[owner, rank] = positions[r_slot, c_slot] - start[owner]
        out_ids[owner, rank] = label_ids[r_slot, c_slot]
        out_w[owner, rank] = weights[r_slot, c_slot]
        out["masked_lm_positions"], out["masked_lm_ids"] = out_pos, out_ids
        out["masked_lm_weights"] = out_w
    out["next_sentence_labels"] = np.asarray(batch["next_sentence_labels"])[rows, slots][:, None]
    if broken:
        keep = ~np.isin(rows, np.fromiter(broken, dtype=np.int64, count=len(broken)))
        out = {name: a[keep] for name, a in out.items()}
        rows = rows[keep]
    return UnpackedBatch(out, rows, broken)
