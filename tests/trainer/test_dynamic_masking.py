"""Masks drawn in tf.data for unmasked shards: rates on large samples, the cap, specials, whole
words, and determinism from (seed, step, example) — the resume property."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tokenizer.vocab import Vocab
from trainer.dynamic_masking import DynamicMasking, mask_batch
from transforms.masking import prediction_budget, word_starts

ROWS, SEQ = 6000, 128


@pytest.fixture(scope="module")
def vocab(sample_vocab_path) -> Vocab:
    return Vocab.from_file(str(sample_vocab_path))


def make_spec(vocab: Vocab, **changes) -> DynamicMasking:
    settings = dict(
        vocab_size=len(vocab),
        cls_id=vocab.cls_id,
        sep_id=vocab.sep_id,
        mask_id=vocab.mask_id,
        replacement_ids=tuple(vocab.replacement_ids().tolist()),
        max_predictions_per_seq=20,
        seed=5,
    )
    settings.update(changes)
    return DynamicMasking(**settings)


def synthetic_batch(vocab: Vocab, rows: int = ROWS, seq: int = SEQ, seed: int = 0) -> dict:
    """Sentence-pair-like rows ([CLS] a [SEP] b [SEP], padded) of ordinary tokens, about a third
    of them ``##`` pieces, with their word-start flags (as the writer computes them)."""
    rng = np.random.default_rng(seed)
    pool = vocab.replacement_ids()
    cont = vocab.continuation_mask()
    pieces, words = pool[cont[pool]], pool[~cont[pool]]
    lengths = rng.integers(12, seq + 1, rows)
    ids = np.where(rng.random((rows, seq)) < 0.33, rng.choice(pieces, (rows, seq)), 0)
    ids = np.where(ids == 0, rng.choice(words, (rows, seq)), ids)
    col = np.arange(seq)[None, :]
    in_row = col < lengths[:, None]
    ids = np.where(in_row, ids, 0)
    ids[:, 0] = vocab.cls_id
    middle = lengths // 2
    ids[np.arange(rows), middle] = vocab.sep_id
    ids[np.arange(rows), lengths - 1] = vocab.sep_id
    candidate = in_row & (ids != vocab.cls_id) & (ids != vocab.sep_id)
    starts = word_starts(ids, candidate, cont)
    segments = ((col > middle[:, None]) & in_row).astype(np.int64)
    return {
        "input_ids": tf.constant(ids, tf.int32),
        "input_mask": tf.constant(in_row.astype(np.int32)),
        "segment_ids": tf.constant(segments, tf.int32),
        "word_starts": tf.constant(starts.astype(np.int32)),
        "next_sentence_labels": tf.zeros([rows, 1], tf.int32),
    }


def outcome(batch: dict, out: dict) -> dict[str, np.ndarray]:
    ids = batch["input_ids"].numpy()
    masked = out["input_ids"].numpy()
    pos = out["masked_lm_positions"].numpy()
    w = out["masked_lm_weights"].numpy()
    labels = out["masked_lm_ids"].numpy()
    used = w > 0
    rows = np.arange(len(ids))[:, None]
    return dict(
        ids=ids,
        masked=masked,
        pos=pos,
        used=used,
        labels=labels,
        at=masked[rows, pos],
        counts=used.sum(1),
        lengths=batch["input_mask"].numpy().sum(1),
    )


@pytest.fixture(scope="module")
def token_level(vocab):
    batch = synthetic_batch(vocab)
    spec = make_spec(vocab)
    return spec, batch, outcome(batch, mask_batch(batch, tf.constant(3, tf.int64), spec))


def test_rate_and_budget_per_row(token_level):
    spec, _, o = token_level
    budget = prediction_budget(o["lengths"], 0.15, 20)
    assert (o["counts"] == budget).all()  # the cap (20) never binds below 134 tokens
    rate = o["counts"].sum() / o["lengths"].sum()
    assert abs(rate - 0.15) < 0.01, rate


def test_eighty_ten_ten(token_level, vocab):
    _, _, o = token_level
    used = o["used"]
    at, labels = o["at"][used], o["labels"][used]
    n = used.sum()
    assert n > 50_000  # standard error of the 80% share: 0.0018
    masked = np.mean(at == vocab.mask_id)
    kept = np.mean(at == labels)
    random = np.mean((at != vocab.mask_id) & (at != labels))
    assert abs(masked - 0.8) < 0.01, masked
    assert abs(kept - 0.1) < 0.01, kept
    assert abs(random - 0.1) < 0.01, random


def test_no_specials_masked_or_drawn(token_level, vocab):
    _, _, o = token_level
    used = o["used"]
    rows = np.arange(len(o["ids"]))[:, None]
    original = o["ids"][rows, o["pos"]]
    assert (original[used] == o["labels"][used]).all()
    specials = {vocab.cls_id, vocab.sep_id, vocab.pad_id}
    assert not np.isin(o["labels"][used], list(specials)).any()
    assert (o["pos"][used] < o["lengths"].repeat(used.shape[1]).reshape(used.shape)[used]).all()
    # Drawn replacements: only from the pool (no bracketed token: specials, [unusedN]).
    drawn = o["at"][used & (o["at"] != vocab.mask_id) & (o["at"] != o["labels"])]
    pool = set(vocab.replacement_ids().tolist())
    assert drawn.size > 5_000 and all(int(t) in pool for t in np.unique(drawn))
    assert not any(vocab.tokens[int(t)].startswith("[") for t in np.unique(drawn))
    # Everything outside the predictions is untouched; padding stays 0.
    changed = o["masked"] != o["ids"]
    in_pred = np.zeros_like(changed)
    in_pred[np.nonzero(used)[0], o["pos"][used]] = True
    assert not (changed & ~in_pred).any()


def test_random_replacements_cover_the_pool_and_nothing_else(vocab):
    """Degenerate probabilities: every token predicted, every prediction a random token."""
    batch = synthetic_batch(vocab, rows=3000)
    spec = make_spec(
        vocab,
        masked_lm_prob=1.0,
        max_predictions_per_seq=SEQ,
        mask_token_prob=0.0,
        keep_token_prob=0.0,
        random_token_prob=1.0,
    )
    o = outcome(batch, mask_batch(batch, tf.constant(2, tf.int64), spec))
    candidates = (o["ids"] != vocab.cls_id) & (o["ids"] != vocab.sep_id) & (o["ids"] != 0)
    assert (o["counts"] == candidates.sum(1)).all()  # every maskable token, no [CLS]/[SEP]/pad
    drawn = o["at"][o["used"]]
    pool = vocab.replacement_ids()
    assert drawn.size > 150_000
    assert np.isin(drawn, pool).all()
    freq = np.bincount(drawn, minlength=len(vocab))[pool] / drawn.size
    assert (freq > 0).all() and abs(freq.max() * len(pool) - 1) < 0.5  # uniform over the pool


def test_positions_ascend_and_unused_slots_are_zero(token_level):
    _, _, o = token_level
    pos, used = o["pos"], o["used"]
    gaps = np.diff(np.where(used, pos, 10**6), axis=1)
    assert (gaps[used[:, 1:]] > 0).all()
    assert (pos[~used] == 0).all() and (o["labels"][~used] == 0).all()
    assert (used[:, :-1] >= used[:, 1:]).all()  # used slots first


def test_prediction_cap(vocab):
    batch = synthetic_batch(vocab, rows=2000)
    spec = make_spec(vocab, max_predictions_per_seq=5)
    o = outcome(batch, mask_batch(batch, tf.constant(0, tf.int64), spec))
    budget = prediction_budget(o["lengths"], 0.15, 5)
    assert (o["counts"] == budget).all() and o["counts"].max() == 5
    assert o["pos"].shape[1] == 5


def test_whole_word_masking(vocab):
    batch = synthetic_batch(vocab, rows=3000)
    spec = make_spec(vocab, whole_word_mask=True)
    o = outcome(batch, mask_batch(batch, tf.constant(1, tf.int64), spec))
    starts = batch["word_starts"].numpy().astype(bool)
    ids = o["ids"]
    candidate = (o["masked"] != -1) & (np.arange(SEQ)[None] < o["lengths"][:, None])
    candidate &= (ids != vocab.cls_id) & (ids != vocab.sep_id)
    branch_counts = {"mask": 0, "keep": 0, "random": 0}
    for r in range(len(ids)):
        chosen = set(o["pos"][r][o["used"][r]].tolist())
        word = -1
        words: dict[int, list[int]] = {}
        for p in range(SEQ):
            if not candidate[r, p]:
                word = -1
                continue
            if starts[r, p] or word < 0:
                word = p
            words.setdefault(word, []).append(p)
        for start, members in words.items():
            inside = [p in chosen for p in members]
            assert all(inside) or not any(inside), (r, start, members)
            if all(inside):
                pieces = o["masked"][r, members]
                if (pieces == vocab.mask_id).all():
                    branch_counts["mask"] += 1
                elif (pieces == ids[r, members]).all():
                    branch_counts["keep"] += 1
                else:
                    branch_counts["random"] += 1
                    assert vocab.mask_id not in pieces.tolist()  # one decision per word
    total = sum(branch_counts.values())
    assert abs(branch_counts["mask"] / total - 0.8) < 0.015, branch_counts
    budget = np.minimum(20, np.maximum(1, np.round(o["lengths"] * 0.15)))
    assert (o["counts"] <= budget).all()
    # Taking words in key order up to the first that overflows costs a little of the rate.
    assert o["counts"].sum() / budget.sum() > 0.9


def test_masks_depend_on_seed_step_and_example_only(vocab):
    batch = synthetic_batch(vocab, rows=256, seed=3)
    spec = make_spec(vocab)
    step = tf.constant(41, tf.int64)
    first = mask_batch(batch, step, spec)
    again = mask_batch(batch, step, spec)
    for k in ("input_ids", "masked_lm_positions", "masked_lm_ids"):
        np.testing.assert_array_equal(first[k].numpy(), again[k].numpy())
    # The same examples in another order (another batch composition): the same masks.
    perm = np.random.default_rng(0).permutation(256)
    shuffled = {k: tf.gather(v, perm) for k, v in batch.items()}
    moved = mask_batch(shuffled, step, spec)
    for k in ("input_ids", "masked_lm_positions", "masked_lm_ids"):
        np.testing.assert_array_equal(moved[k].numpy(), first[k].numpy()[perm])
    # Another step (a later epoch) or seed: new masks.
    later = mask_batch(batch, tf.constant(42, tf.int64), spec)
    other = mask_batch(batch, step, make_spec(vocab, seed=6))
    for changed in (later, other):
        same = np.all(
            changed["masked_lm_positions"].numpy() == first["masked_lm_positions"].numpy(), 1
        )
        assert same.mean() < 0.05


def _unmask(batch: dict) -> dict:
    """The unmasked batch behind a masked one: labels put back at their positions."""
    ids = batch["input_ids"].numpy().copy()
    pos = batch["masked_lm_positions"].numpy()
    used = batch["masked_lm_weights"].numpy() > 0
    r, c = np.nonzero(used)
    ids[r, pos[r, c]] = batch["masked_lm_ids"].numpy()[r, c]
    keep = ("input_mask", "segment_ids", "word_starts", "next_sentence_labels")
    return {"input_ids": tf.constant(ids), **{k: batch[k] for k in keep if k in batch}}


@pytest.fixture(scope="module")
def unmasked_shards(tmp_path_factory, sample_corpus_files, sample_vocab_path):
    from tests.pipeline.jobs.test_instances import run_job

    _, out = run_job(
        tmp_path_factory.mktemp("dynamic"),
        [str(sample_corpus_files[0].parent / "*.txt")],
        sample_vocab_path,
        max_seq_length=64,
        max_predictions_per_seq=10,
        num_shards=2,
        dupe_factor=1,
        masking="dynamic",
    )
    return out


def test_resume_draws_the_masks_of_an_uninterrupted_run(unmasked_shards):
    """Step N's masks are a function of (seed, N, example): a run resumed at N (its dataset
    starting at N) masks each example exactly as the uninterrupted run does at N."""
    from trainer.input_pipeline import make_dataset, resolve_shards

    info = resolve_shards([str(unmasked_shards)])
    assert info.masking == "dynamic" and info.nsp
    masker = info.masker(9)

    def batches(start: int, n: int) -> list[dict]:
        ds = make_dataset(
            info, 8, training=True, seed=1, deterministic=True, masking_seed=9, start_step=start
        )
        return list(ds.take(n))

    uninterrupted = batches(0, 7)
    resumed = batches(5, 2)  # the trainer reseeds the data order on resume: other examples
    for step, batch in [
        (5, uninterrupted[5]),
        (6, uninterrupted[6]),
        (5, resumed[0]),
        (6, resumed[1]),
    ]:
        expected = mask_batch(_unmask(batch), tf.constant(step, tf.int64), masker)
        for k in ("input_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights"):
            np.testing.assert_array_equal(batch[k].numpy(), expected[k].numpy())
    # With the examples' masks independent of their batch (test above), an example both runs
    # meet at step 5 is masked alike. The same example at an earlier step (another epoch) gets another mask.
    both = _unmask(uninterrupted[5])
    early = mask_batch(both, tf.constant(0, tf.int64), masker)
    assert not np.array_equal(
        early["masked_lm_positions"].numpy(), uninterrupted[5]["masked_lm_positions"].numpy()
    )


@pytest.mark.parametrize("whole_word", [False, True], ids=["tokens", "whole-words"])
def test_packed_rows_draw_each_instance_its_unpacked_masks(vocab, whole_word):
    """An instance in a packed row is masked on its own tokens with its own budget, and gets
    the very masks it gets unpacked at the same step (keys from its own tokens): the row's
    prediction slots are the instances' predictions at their row positions, ascending."""
    from tests.trainer.packing import first_fit, pack_by_hand
    from trainer.dynamic_masking import mask_packed_batch, packed_slots

    seq, k = 64, 3
    short = synthetic_batch(vocab, rows=90, seq=24, seed=4)
    unpacked = {
        name: np.pad(v.numpy(), [(0, 0), (0, seq - v.shape[1])]) if v.shape[1] == 24 else v.numpy()
        for name, v in short.items()
    }
    unpacked["next_sentence_labels"] = np.arange(90)[:, None] % 2
    lengths = unpacked["input_mask"].sum(1)
    groups = first_fit(lengths, seq, k)
    assert len(groups) < 45  # most rows hold two or three instances
    packed = pack_by_hand(unpacked, groups, k)
    spec = make_spec(vocab, max_predictions_per_seq=5, whole_word_mask=whole_word)
    step = tf.constant(7, tf.int64)
    alone = mask_batch({n: tf.constant(v) for n, v in unpacked.items()}, step, spec)
    together = mask_batch({n: tf.constant(v) for n, v in packed.items()}, step, spec)
    slots = packed_slots(spec, seq, k)
    assert together["masked_lm_positions"].shape == (len(groups), slots)
    assert slots == int(np.floor(seq * 0.15)) + k
    # The packed rows unpacked by hand have the instances' own masks.
    expected = pack_by_hand({n: v.numpy() for n, v in alone.items()}, groups, k, slots)
    for name in ("input_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights"):
        np.testing.assert_array_equal(together[name].numpy(), expected[name], err_msg=name)
    # Each instance's budget is its own length's (BERT's rule), so a row of three short
    # instances gets more predictions than one row of that length would.
    counts = (alone["masked_lm_weights"].numpy() > 0).sum(1)
    if not whole_word:
        np.testing.assert_array_equal(
            counts, [min(5, prediction_budget(int(n), 0.15)) for n in lengths]
        )
    positions = together["masked_lm_positions"].numpy()
    used = together["masked_lm_weights"].numpy() > 0
    assert all((np.diff(p[u]) > 0).all() for p, u in zip(positions, used, strict=True))
    # The packed path is the one mask_batch takes for packed rows.
    direct = mask_packed_batch({n: tf.constant(v) for n, v in packed.items()}, step, spec)
    np.testing.assert_array_equal(direct["input_ids"], together["input_ids"])
