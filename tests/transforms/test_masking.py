"""Masked-LM prediction choice (transforms.masking)."""

from __future__ import annotations

import numpy as np
import pytest

from tokenizer.vocab import Vocab
from transforms.masking import (
    KEPT,
    MASKED,
    RANDOM,
    MaskingConfig,
    mask_rows,
)

# [PAD] [UNK] [CLS] [SEP] [MASK] [unused0..4] w0..w39 ##c0..##c39
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"[unused{i}]" for i in range(5)]
WORDS = [f"w{i}" for i in range(40)]
PIECES = [f"##c{i}" for i in range(40)]
VOCAB = Vocab.from_bytes("\n".join(SPECIAL + WORDS + PIECES).encode())
PAD, CLS, SEP, MASK = VOCAB.pad_id, VOCAB.cls_id, VOCAB.sep_id, VOCAB.mask_id
WORD_IDS = np.array([VOCAB.id_of(w) for w in WORDS])
PIECE_IDS = np.array([VOCAB.id_of(p) for p in PIECES])
IS_CONTINUATION = VOCAB.continuation_mask()
REPLACEMENT = VOCAB.replacement_ids()


def word_groups(
    row_ids: np.ndarray, row_candidate: np.ndarray, is_continuation: np.ndarray
) -> list[list[int]]:
    """Candidate positions grouped into words (the scalar reading of ``word_starts``): a ``##`` piece joins the word before it.

    A group never crosses a non-candidate position ([SEP]), so words stay within a segment.
    """
    groups: list[list[int]] = []
    previous_candidate = False
    for pos in range(len(row_ids)):
        if not row_candidate[pos]:
            previous_candidate = False
            continue
        if previous_candidate and is_continuation[row_ids[pos]]:
            groups[-1].append(pos)
        else:
            groups.append([pos])
        previous_candidate = True
    return groups


def test_vocab_tables_used_here():
    assert (PAD, CLS, SEP, MASK) == (0, 2, 3, 4)
    assert IS_CONTINUATION[PIECE_IDS].all() and not IS_CONTINUATION[WORD_IDS].any()
    assert set(REPLACEMENT.tolist()) == set(WORD_IDS.tolist()) | set(PIECE_IDS.tolist())


def make_rows(
    rng: np.random.Generator,
    n: int,
    seq_len: int,
    continuation_prob: float = 0.0,
    min_tokens: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """[CLS] A [SEP] B [SEP] rows with padding 0; A/B tokens are words or ## pieces."""
    pieces = rng.random((n, seq_len)) < continuation_prob
    ids = np.where(
        pieces, rng.choice(PIECE_IDS, (n, seq_len)), rng.choice(WORD_IDS, (n, seq_len))
    ).astype(np.int32)
    lengths = rng.integers(min_tokens * 2 + 3, seq_len + 1, size=n).astype(np.int32)
    len_a = rng.integers(min_tokens, lengths - 3 - min_tokens + 1)
    rows = np.arange(n)
    ids[:, 0] = CLS
    ids[rows, len_a + 1] = SEP
    ids[rows, lengths - 1] = SEP
    ids[np.arange(seq_len)[None, :] >= lengths[:, None]] = PAD
    return ids, lengths


def run(ids, lengths, cfg, seed=0, replacement=REPLACEMENT, continuation=IS_CONTINUATION):
    return mask_rows(
        ids,
        lengths,
        cfg,
        cls_id=CLS,
        sep_id=SEP,
        mask_id=MASK,
        replacement_ids=replacement,
        is_continuation=continuation,
        rng=np.random.default_rng(seed),
    )


def check_invariants(ids, lengths, cfg, out, replacement=REPLACEMENT):
    """Properties every MaskedRows must have."""
    n, seq_len = ids.shape
    p = cfg.max_predictions_per_seq
    assert out.input_ids.shape == (n, seq_len) and out.input_ids.dtype == np.int32
    assert out.positions.shape == (n, p) and out.positions.dtype == np.int32
    assert out.label_ids.shape == (n, p) and out.label_ids.dtype == np.int32
    assert out.weights.shape == (n, p) and out.weights.dtype == np.float32
    assert out.decisions.shape == (n, p) and out.decisions.dtype == np.int8
    assert out.counts.shape == (n,)
    replacement_set = set(np.asarray(replacement).tolist())
    for r in range(n):
        k = int(out.counts[r])
        n_candidates = int(lengths[r]) - int(np.isin(ids[r, : lengths[r]], [CLS, SEP]).sum())
        assert 0 <= k <= min(cfg.num_to_predict(int(lengths[r])), n_candidates)
        pos = out.positions[r, :k]
        # ascending, unique, real non-special tokens only
        assert (np.diff(pos) > 0).all()
        assert (pos >= 1).all() and (pos < lengths[r]).all()
        assert not np.isin(ids[r, pos], [CLS, SEP, PAD]).any()
        # labels are the original ids, weights 1.0 on used slots, unused slots all zero
        assert out.label_ids[r, :k].tolist() == ids[r, pos].tolist()
        assert (out.weights[r, :k] == 1.0).all()
        assert (out.positions[r, k:] == 0).all()
        assert (out.label_ids[r, k:] == 0).all()
        assert (out.weights[r, k:] == 0.0).all()
        assert (out.decisions[r, k:] == -1).all()
        assert np.isin(out.decisions[r, :k], [MASKED, KEPT, RANDOM]).all()
        # only chosen positions change, each as its decision says
        untouched = np.ones(seq_len, dtype=bool)
        untouched[pos] = False
        assert (out.input_ids[r, untouched] == ids[r, untouched]).all()
        new = out.input_ids[r, pos]
        dec = out.decisions[r, :k]
        assert (new[dec == MASKED] == MASK).all()
        assert (new[dec == KEPT] == ids[r, pos][dec == KEPT]).all()
        assert set(new[dec == RANDOM].tolist()) <= replacement_set


# --------------------------------------------------------------------------------------------
# Config and budget


@pytest.mark.parametrize(
    "kwargs",
    [
        {"masked_lm_prob": -0.1},
        {"masked_lm_prob": 1.1},
        {"max_predictions_per_seq": 0},
        {"mask_token_prob": 0.8, "keep_token_prob": 0.1, "random_token_prob": 0.2},
        {"mask_token_prob": 1.1, "keep_token_prob": -0.1, "random_token_prob": 0.0},
        {"mask_token_prob": 0.5, "keep_token_prob": 0.1, "random_token_prob": 0.1},
    ],
)
def test_masking_config_rejects_invalid(kwargs):
    with pytest.raises(ValueError):
        MaskingConfig(**kwargs)


def test_masking_config_defaults_are_bert():
    cfg = MaskingConfig()
    assert (cfg.masked_lm_prob, cfg.max_predictions_per_seq) == (0.15, 20)
    assert (cfg.mask_token_prob, cfg.keep_token_prob, cfg.random_token_prob) == (0.8, 0.1, 0.1)
    assert not cfg.whole_word_mask and not cfg.per_piece_decisions


@pytest.mark.parametrize(
    ("prob", "max_pred", "n", "expected"),
    [
        (0.25, 20, 10, 2),  # 2.5 -> 2 (round half to even)
        (0.25, 20, 14, 4),  # 3.5 -> 4
        (0.25, 20, 6, 2),  # 1.5 -> 2
        (0.25, 20, 2, 1),  # 0.5 -> 0 -> at least 1
        (0.5, 20, 5, 2),  # 2.5 -> 2
        (0.5, 20, 7, 4),  # 3.5 -> 4
        (0.5, 20, 9, 4),  # 4.5 -> 4
        (0.5, 20, 11, 6),  # 5.5 -> 6
        (0.0, 20, 128, 1),  # never below one
        (0.15, 20, 128, 19),  # 19.2
        (0.15, 20, 512, 20),  # capped
        (0.15, 76, 512, 76),  # 76.8 -> 77, capped at 76
        (1.0, 20, 100, 20),
        (1.0, 20, 5, 5),
        (0.15, 20, 3, 1),
    ],
)
def test_num_to_predict(prob, max_pred, n, expected):
    cfg = MaskingConfig(masked_lm_prob=prob, max_predictions_per_seq=max_pred)
    assert cfg.num_to_predict(n) == expected
    assert cfg.num_to_predict(n) == min(max_pred, max(1, int(round(n * prob))))


@pytest.mark.parametrize("whole_word_mask", [False, True])
@pytest.mark.parametrize("prob", [0.1, 0.15, 0.2, 0.25, 0.5, 1.0])
def test_counts_follow_num_to_predict_for_every_length(prob, whole_word_mask):
    # One-token words only, so whole-word masking can always fill its budget exactly.
    cfg = MaskingConfig(
        masked_lm_prob=prob, max_predictions_per_seq=40, whole_word_mask=whole_word_mask
    )
    seq_len = 120
    lengths = np.arange(3, seq_len + 1, dtype=np.int32)
    ids = np.zeros((len(lengths), seq_len), dtype=np.int32)
    for r, n in enumerate(lengths):
        ids[r, :n] = WORD_IDS[(np.arange(n) % len(WORD_IDS))]
        ids[r, 0] = CLS
        ids[r, n - 1] = SEP
        ids[r, n // 2] = SEP
    out = run(ids, lengths, cfg)
    for r, n in enumerate(lengths.tolist()):
        candidates = n - 3 if n // 2 not in (0, n - 1) else n - 2
        assert out.counts[r] == min(cfg.num_to_predict(n), candidates), n
    check_invariants(ids, lengths, cfg, out)


# --------------------------------------------------------------------------------------------
# Invariants on random batches


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(
    "cfg",
    [
        MaskingConfig(),
        MaskingConfig(masked_lm_prob=0.5, max_predictions_per_seq=7),
        MaskingConfig(whole_word_mask=True),
        MaskingConfig(whole_word_mask=True, per_piece_decisions=True, masked_lm_prob=0.4),
        MaskingConfig(masked_lm_prob=1.0, max_predictions_per_seq=64),
    ],
    ids=["default", "p0.5-cap7", "wwm", "wwm-per-piece", "all"],
)
def test_masked_rows_invariants(cfg, seed):
    rng = np.random.default_rng(seed)
    ids, lengths = make_rows(rng, 150, 64, continuation_prob=0.4)
    before = ids.copy()
    out = run(ids, lengths, cfg, seed)
    assert (ids == before).all()  # the input is not modified
    check_invariants(ids, lengths, cfg, out)
    assert out.counts.sum() > 0


def test_padding_only_and_tiny_rows():
    cfg = MaskingConfig(max_predictions_per_seq=4)
    ids = np.array(
        [
            [CLS, SEP, SEP, 0, 0, 0],  # no candidate at all
            [CLS, WORD_IDS[0], SEP, WORD_IDS[1], SEP, 0],
            [0, 0, 0, 0, 0, 0],  # empty row
        ],
        dtype=np.int32,
    )
    lengths = np.array([3, 5, 0], dtype=np.int32)
    for whole in (False, True):
        out = run(ids, lengths, MaskingConfig(max_predictions_per_seq=4, whole_word_mask=whole))
        assert out.counts.tolist() == [0, 1, 0]
        check_invariants(ids, lengths, cfg, out)
        assert out.positions[1, 0] in (1, 3)


def test_sep_token_inside_length_never_chosen_and_padding_ids_never_chosen():
    # Padding positions hold a real word id here: the length, not the id, decides.
    cfg = MaskingConfig(
        masked_lm_prob=1.0,
        max_predictions_per_seq=10,
        mask_token_prob=1.0,
        keep_token_prob=0.0,
        random_token_prob=0.0,
    )
    ids = np.full((50, 10), WORD_IDS[5], dtype=np.int32)
    ids[:, 0] = CLS
    ids[:, 3] = SEP
    ids[:, 6] = SEP
    lengths = np.full(50, 7, dtype=np.int32)
    out = run(ids, lengths, cfg)
    assert (out.counts == 4).all()
    assert (out.positions[:, :4] == [1, 2, 4, 5]).all()
    assert (out.input_ids[:, 7:] == WORD_IDS[5]).all()
    assert (out.input_ids[:, [0, 3, 6]] == [CLS, SEP, SEP]).all()


# --------------------------------------------------------------------------------------------
# Degenerate branch probabilities


@pytest.mark.parametrize("whole_word_mask", [False, True])
def test_all_candidates_masked_up_to_cap(whole_word_mask):
    cap = 12
    cfg = MaskingConfig(
        masked_lm_prob=1.0,
        max_predictions_per_seq=cap,
        mask_token_prob=1.0,
        keep_token_prob=0.0,
        random_token_prob=0.0,
        whole_word_mask=whole_word_mask,
    )
    rng = np.random.default_rng(1)
    ids, lengths = make_rows(rng, 200, 24)  # one-piece words only
    out = run(ids, lengths, cfg)
    check_invariants(ids, lengths, cfg, out)
    for r in range(len(ids)):
        n = int(lengths[r])
        candidates = np.flatnonzero(~np.isin(ids[r, :n], [CLS, SEP]))
        k = int(out.counts[r])
        assert k == min(cap, len(candidates))
        assert (out.decisions[r, :k] == MASKED).all()
        assert (out.input_ids[r, out.positions[r, :k]] == MASK).all()
        if len(candidates) <= cap:
            assert out.positions[r, :k].tolist() == candidates.tolist()
            assert (out.input_ids[r, candidates] == MASK).all()
        else:
            assert (out.input_ids[r, :n] == MASK).sum() == cap


@pytest.mark.parametrize("whole_word_mask", [False, True])
def test_keep_token_prob_one_leaves_input_unchanged(whole_word_mask):
    cfg = MaskingConfig(
        masked_lm_prob=0.3,
        mask_token_prob=0.0,
        keep_token_prob=1.0,
        random_token_prob=0.0,
        whole_word_mask=whole_word_mask,
    )
    rng = np.random.default_rng(2)
    ids, lengths = make_rows(rng, 300, 48, continuation_prob=0.3)
    out = run(ids, lengths, cfg)
    check_invariants(ids, lengths, cfg, out)
    assert (out.input_ids == ids).all()
    assert out.counts.sum() > 0
    assert (out.decisions[out.weights == 1.0] == KEPT).all()


@pytest.mark.parametrize("whole_word_mask", [False, True])
def test_random_token_prob_one_uses_replacement_ids_only(whole_word_mask):
    cfg = MaskingConfig(
        masked_lm_prob=0.5,
        max_predictions_per_seq=30,
        mask_token_prob=0.0,
        keep_token_prob=0.0,
        random_token_prob=1.0,
        whole_word_mask=whole_word_mask,
    )
    rng = np.random.default_rng(3)
    ids, lengths = make_rows(rng, 400, 48, continuation_prob=0.3)
    replacement = np.array([VOCAB.id_of("w7"), VOCAB.id_of("##c3")], dtype=np.int32)
    out = run(ids, lengths, cfg, replacement=replacement)
    check_invariants(ids, lengths, cfg, out, replacement=replacement)
    used = out.weights == 1.0
    new = np.take_along_axis(out.input_ids, out.positions, axis=1)[used]
    assert set(new.tolist()) == set(replacement.tolist())
    assert (out.decisions[used] == RANDOM).all()
    # every other position is untouched
    changed = out.input_ids != ids
    assert changed.sum() <= used.sum()


def test_default_replacement_ids_never_special():
    cfg = MaskingConfig(
        masked_lm_prob=1.0,
        max_predictions_per_seq=40,
        mask_token_prob=0.0,
        keep_token_prob=0.0,
        random_token_prob=1.0,
    )
    rng = np.random.default_rng(4)
    ids, lengths = make_rows(rng, 500, 44)
    out = run(ids, lengths, cfg)
    new = np.take_along_axis(out.input_ids, out.positions, axis=1)[out.weights == 1.0]
    assert len(new) > 10_000
    assert not np.isin(new, np.arange(len(SPECIAL))).any()
    # the draw is uniform over the replacement ids: every one appears
    assert set(new.tolist()) == set(REPLACEMENT.tolist())


# --------------------------------------------------------------------------------------------
# Statistics


def test_80_10_10_over_200k_predictions():
    cfg = MaskingConfig()
    n_rows, seq_len = 12_000, 128
    rng = np.random.default_rng(5)
    ids = rng.choice(WORD_IDS, size=(n_rows, seq_len)).astype(np.int32)
    ids[:, 0] = CLS
    ids[:, 60] = SEP
    ids[:, -1] = SEP
    lengths = np.full(n_rows, seq_len, dtype=np.int32)
    out = run(ids, lengths, cfg, seed=6)
    assert (out.counts == 19).all()
    used = out.weights == 1.0
    total = int(used.sum())
    assert total >= 200_000
    decisions = out.decisions[used]
    assert abs((decisions == MASKED).mean() - 0.8) < 0.01
    assert abs((decisions == KEPT).mean() - 0.1) < 0.01
    assert abs((decisions == RANDOM).mean() - 0.1) < 0.01
    # and the tokens agree: [MASK] exactly where decided (no [MASK] in the input or replacements)
    new = np.take_along_axis(out.input_ids, out.positions, axis=1)[used]
    assert ((new == MASK) == (decisions == MASKED)).all()
    # positions are uniform over the 125 candidates
    hits = np.bincount(out.positions[used], minlength=seq_len)
    candidate_hits = np.delete(hits, [0, 60, seq_len - 1])
    assert hits[[0, 60, seq_len - 1]].sum() == 0
    expected = total / 125
    assert np.abs(candidate_hits - expected).max() < 0.1 * expected


def test_whole_word_decision_frequencies_per_word():
    cfg = MaskingConfig(whole_word_mask=True, masked_lm_prob=0.3, max_predictions_per_seq=40)
    rng = np.random.default_rng(7)
    ids, lengths = make_rows(rng, 3000, 96, continuation_prob=0.5)
    out = run(ids, lengths, cfg, seed=8)
    # first piece of each chosen word carries the word's decision
    words = []
    for r in range(len(ids)):
        k = int(out.counts[r])
        pos = out.positions[r, :k].tolist()
        for j, p in enumerate(pos):
            if j == 0 or pos[j - 1] != p - 1 or not IS_CONTINUATION[ids[r, p]]:
                words.append(int(out.decisions[r, j]))
    words = np.array(words)
    assert len(words) > 20_000
    assert abs((words == MASKED).mean() - 0.8) < 0.015
    assert abs((words == KEPT).mean() - 0.1) < 0.015
    assert abs((words == RANDOM).mean() - 0.1) < 0.015


# --------------------------------------------------------------------------------------------
# Whole-word masking


def test_word_groups_basic():
    w, c = WORD_IDS, PIECE_IDS
    row = np.array([CLS, w[0], c[0], c[1], w[1], SEP, c[2], w[2], c[3], SEP, 0, 0])
    length = 10
    candidate = (np.arange(len(row)) < length) & (row != CLS) & (row != SEP)
    groups = word_groups(row, candidate, IS_CONTINUATION)
    # the ## piece right after [SEP] starts its own word: words never span [SEP]
    assert groups == [[1, 2, 3], [4], [6], [7, 8]]


def test_word_groups_continuation_after_cls_and_padding():
    w, c = WORD_IDS, PIECE_IDS
    row = np.array([CLS, c[0], c[1], w[0], SEP, w[1], SEP, c[2], c[3]])
    candidate = (np.arange(len(row)) < 7) & (row != CLS) & (row != SEP)
    assert word_groups(row, candidate, IS_CONTINUATION) == [[1, 2], [3], [5]]
    assert word_groups(row, np.zeros(len(row), dtype=bool), IS_CONTINUATION) == []


def chosen_words(ids_row, out, r):
    """The chosen positions of row r grouped into word groups, plus the groups of that row."""
    n_candidates = (ids_row != CLS) & (ids_row != SEP) & (ids_row != PAD)
    groups = word_groups(ids_row, n_candidates, IS_CONTINUATION)
    chosen = set(out.positions[r, : out.counts[r]].tolist())
    return groups, chosen


@pytest.mark.parametrize("per_piece", [False, True])
def test_whole_word_masking_takes_whole_words(per_piece):
    cfg = MaskingConfig(
        whole_word_mask=True,
        per_piece_decisions=per_piece,
        masked_lm_prob=0.3,
        max_predictions_per_seq=16,
    )
    rng = np.random.default_rng(9)
    ids, lengths = make_rows(rng, 800, 40, continuation_prob=0.6)
    out = run(ids, lengths, cfg, seed=10)
    check_invariants(ids, lengths, cfg, out)
    for r in range(len(ids)):
        groups, chosen = chosen_words(ids[r], out, r)
        covered = set()
        for g in groups:
            inside = chosen & set(g)
            assert inside == set() or inside == set(g), (g, chosen)  # all pieces or none
            covered |= inside
        assert covered == chosen
        # greedy budget: no unchosen word would still fit
        budget = cfg.num_to_predict(int(lengths[r]))
        k = int(out.counts[r])
        assert k <= budget
        assert all(len(g) > budget - k for g in groups if not set(g) & chosen)


def test_whole_word_masking_per_word_decisions_share_the_branch():
    cfg = MaskingConfig(whole_word_mask=True, masked_lm_prob=0.4, max_predictions_per_seq=30)
    rng = np.random.default_rng(11)
    ids, lengths = make_rows(rng, 1500, 48, continuation_prob=0.6)
    out = run(ids, lengths, cfg, seed=12)
    seen = {MASKED: 0, KEPT: 0, RANDOM: 0}
    multi_piece = 0
    for r in range(len(ids)):
        groups, chosen = chosen_words(ids[r], out, r)
        slot_of = {p: j for j, p in enumerate(out.positions[r, : out.counts[r]].tolist())}
        for g in groups:
            if not set(g) & chosen:
                continue
            branches = {int(out.decisions[r, slot_of[p]]) for p in g}
            assert len(branches) == 1, (g, branches)
            branch = branches.pop()
            seen[branch] += 1
            new = out.input_ids[r, g]
            if branch == MASKED:
                assert (new == MASK).all()  # all pieces [MASK]
            elif branch == KEPT:
                assert (new == ids[r, g]).all()  # all pieces kept
            else:
                assert np.isin(new, REPLACEMENT).all()  # all pieces random
            multi_piece += len(g) > 1
    assert all(v > 100 for v in seen.values())
    assert multi_piece > 1000


def test_whole_word_masking_per_piece_decisions_mix_within_words():
    cfg = MaskingConfig(
        whole_word_mask=True,
        per_piece_decisions=True,
        masked_lm_prob=0.4,
        max_predictions_per_seq=30,
    )
    rng = np.random.default_rng(13)
    ids, lengths = make_rows(rng, 1500, 48, continuation_prob=0.6)
    out = run(ids, lengths, cfg, seed=14)
    mixed = multi = 0
    for r in range(len(ids)):
        groups, chosen = chosen_words(ids[r], out, r)
        slot_of = {p: j for j, p in enumerate(out.positions[r, : out.counts[r]].tolist())}
        for g in groups:
            if len(g) > 1 and set(g) <= chosen:
                multi += 1
                mixed += len({int(out.decisions[r, slot_of[p]]) for p in g}) > 1
    assert multi > 1000
    # P(a two-piece word is mixed) = 1 - (0.64 + 0.01 + 0.01) = 0.34; longer words more often
    assert 0.3 < mixed / multi < 0.6


def test_whole_word_masking_skips_words_that_overflow_budget():
    # One long word (6 pieces) and one single-piece word; budget 2 -> the long word never fits.
    w, c = WORD_IDS, PIECE_IDS
    row = [CLS, w[1], c[1], c[2], c[3], c[4], c[5], SEP, w[2], SEP]
    ids = np.array([row] * 200, dtype=np.int32)
    lengths = np.full(200, len(row), dtype=np.int32)
    cfg = MaskingConfig(whole_word_mask=True, masked_lm_prob=0.2, max_predictions_per_seq=20)
    assert cfg.num_to_predict(len(row)) == 2
    out = run(ids, lengths, cfg)
    assert (out.counts == 1).all()
    assert (out.positions[:, 0] == 8).all()


def test_whole_word_masking_needs_continuation_table():
    rng = np.random.default_rng(0)
    ids, lengths = make_rows(rng, 3, 16)
    with pytest.raises(ValueError, match="continuation"):
        run(ids, lengths, MaskingConfig(whole_word_mask=True), continuation=None)
    # not needed without whole-word masking
    out = run(ids, lengths, MaskingConfig(), continuation=None)
    check_invariants(ids, lengths, MaskingConfig(), out)


def test_without_whole_word_masking_pieces_are_independent():
    cfg = MaskingConfig(masked_lm_prob=0.3, max_predictions_per_seq=20)
    rng = np.random.default_rng(15)
    ids, lengths = make_rows(rng, 600, 48, continuation_prob=0.6)
    out = run(ids, lengths, cfg, seed=16)
    partial = 0
    for r in range(len(ids)):
        groups, chosen = chosen_words(ids[r], out, r)
        partial += sum(1 for g in groups if 0 < len(set(g) & chosen) < len(g))
    assert partial > 100


# --------------------------------------------------------------------------------------------
# Determinism


@pytest.mark.parametrize("whole_word_mask", [False, True])
def test_mask_rows_deterministic_per_seed(whole_word_mask):
    cfg = MaskingConfig(whole_word_mask=whole_word_mask)
    rng = np.random.default_rng(17)
    ids, lengths = make_rows(rng, 100, 64, continuation_prob=0.3)
    a, b, c = run(ids, lengths, cfg, 1), run(ids, lengths, cfg, 1), run(ids, lengths, cfg, 2)
    for name in ("input_ids", "positions", "label_ids", "weights", "counts", "decisions"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.positions, c.positions)


def test_prediction_budget_is_the_references_formula():
    from transforms.masking import prediction_budget

    assert prediction_budget(128, 0.15) == 19 and prediction_budget(512, 0.15) == 77
    assert prediction_budget(128, 0.15, 20) == 19 and prediction_budget(512, 0.15, 76) == 76
    assert prediction_budget(3, 0.0) == 1  # at least one
    assert prediction_budget(10, 0.25) == 2 and prediction_budget(30, 0.05) == 2  # half to even
    lengths = np.arange(200)
    assert prediction_budget(lengths, 0.15, 20).tolist() == [
        min(20, max(1, round(n * 0.15))) for n in lengths
    ]
    assert isinstance(prediction_budget(7, 0.15), int)


def reference_whole_words(
    ids, candidate, budget, cfg, is_continuation, rng, positions, decisions, counts
):
    """The numpy definition ``transforms.whole_word_choice`` replaced (same draws, same order):
    word starts and sizes by array operations, words ordered by a stable argsort of their keys,
    then a per-row loop taking words while they fit."""
    from transforms.masking import _decide, word_starts

    n, seq_len = ids.shape
    starts = word_starts(ids, candidate, is_continuation)
    word_index = np.cumsum(starts, axis=1) - 1
    flat_word = (np.arange(n)[:, None] * seq_len + word_index)[candidate]
    sizes_by_word = np.bincount(flat_word, minlength=n * seq_len).reshape(n, seq_len)
    sizes = np.where(starts, np.take_along_axis(sizes_by_word, np.maximum(word_index, 0), 1), 0)
    keys = rng.random((n, seq_len))
    keys[~starts] = 2.0
    order = np.argsort(keys, axis=1, kind="stable")
    branches = _decide(rng.random((n, seq_len)), cfg)
    n_words = starts.sum(axis=1)
    for r in range(n):
        limit = int(budget[r])
        taken: list[int] = []
        total = 0
        for start in order[r, : n_words[r]].tolist():
            if total >= limit:
                break
            size = int(sizes[r, start])
            if total + size > limit:
                continue
            taken.extend(range(start, start + size))
            total += size
        taken.sort()
        counts[r] = total
        if total:
            cols = np.asarray(taken)
            positions[r, :total] = cols
            if cfg.per_piece_decisions:
                decisions[r, :total] = branches[r, cols]
            else:
                first = np.nonzero(starts[r])[0]
                decisions[r, :total] = branches[r, first[np.searchsorted(first, cols, "right") - 1]]


class _Draws:
    """A generator whose uniform draws are bent: ``tied`` draws come from ten values (word keys
    tie; 0.8 is kept, 0.9 random), ``high`` ones crowd near 1 (few words fall below the
    kernel's first threshold, so its second pass is taken)."""

    def __init__(self, kind: str, seed: int) -> None:
        self._kind = kind
        self._rng = np.random.default_rng(seed)

    def random(self, shape):
        u = self._rng.random(shape)
        return np.floor(u * 10) / 10 if self._kind == "tied" else 1.0 - u**8

    def integers(self, low, high, size):
        return self._rng.integers(low, high, size=size)


@pytest.mark.parametrize("draws", ["uniform", "tied", "high"])
@pytest.mark.parametrize("per_piece", [False, True])
@pytest.mark.parametrize(
    "prob, max_pred, seq_len", [(0.15, 20, 128), (0.15, 80, 512), (0.5, 30, 64), (1.0, 16, 16)]
)
def test_compiled_whole_word_choice_equals_the_numpy_definition(
    monkeypatch, draws, per_piece, prob, max_pred, seq_len
):
    import transforms.masking as masking

    ids, lengths = make_rows(np.random.default_rng(seq_len), 400, seq_len, continuation_prob=0.4)
    cfg = MaskingConfig(
        masked_lm_prob=prob,
        max_predictions_per_seq=max_pred,
        whole_word_mask=True,
        per_piece_decisions=per_piece,
    )

    def masked():
        return mask_rows(
            ids, lengths, cfg, cls_id=CLS, sep_id=SEP, mask_id=MASK, replacement_ids=REPLACEMENT,
            is_continuation=IS_CONTINUATION,
            rng=np.random.default_rng(3) if draws == "uniform" else _Draws(draws, 3),
        )  # fmt: skip

    got = masked()
    monkeypatch.setattr(masking, "_choose_whole_words", reference_whole_words)
    want = masked()
    for name in ("input_ids", "positions", "label_ids", "weights", "counts", "decisions"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
    assert got.counts.sum() > 0
    if got.counts.sum() > 500:
        assert set(np.unique(got.decisions[got.weights > 0]).tolist()) == {MASKED, KEPT, RANDOM}


def test_whole_word_masking_refuses_ids_outside_the_continuation_table():
    ids, lengths = make_rows(np.random.default_rng(1), 4, 32, continuation_prob=0.3)
    ids[0, 1] = len(IS_CONTINUATION) + 5
    with pytest.raises(ValueError, match="1 token ids lie outside the vocabulary"):
        run(ids, lengths, MaskingConfig(whole_word_mask=True))
