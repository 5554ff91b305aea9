"""``--compat reference`` instance creation against google-research/bert's own functions.

Each scenario is built so that one of the reference's random rules decides most of its output
(named in the test id); the reference's ``create_training_instances`` (the bert-tensorflow wheel,
run in this process) and the compiled kernels get the same files and seed, and must give the same
records in the same order and leave the random stream in the same state.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from tests.reference_script import (
    book_sentences,
    compat_documents,
    compat_rows,
    compat_settings,
    reference_rows,
)
from transforms.reference_instances import create_reference_instances
from transforms.reference_stream import stream_state


def write_documents(path: Path, documents: list[list[str]]) -> Path:
    path.write_text("\n\n".join("\n".join(d) for d in documents) + "\n", encoding="utf-8")
    return path


def documents(count: int, sentences: int, skip: int = 0) -> list[list[str]]:
    text = book_sentences(count * sentences, skip)
    return [text[i * sentences : (i + 1) * sentences] for i in range(count)]


SCENARIOS = {
    # 40 one-sentence documents: every instance is a random next; the order is the shuffles'.
    "document-shuffle": (lambda: documents(40, 1), {"max_seq_length": 64}),
    # every document draws randint(2, max_num_tokens) as its target length
    "short-target-draw": (lambda: documents(12, 8), {"short_seq_prob": 1.0}),
    # long documents, targets reached after several sentences: randint(1, len - 1) splits
    "a-b-split": (lambda: documents(6, 40), {"max_seq_length": 96}),
    # two documents: randint(0, 1) hits the same document half the time and retries
    "random-next-retries": (lambda: documents(2, 30), {"max_seq_length": 64, "dupe_factor": 3}),
    # one document: the ten retries all fail and B comes from the same document
    "single-document": (lambda: documents(1, 60), {"max_seq_length": 64, "dupe_factor": 2}),
    # sentences longer than the sequence: every pair truncated from a random end
    "truncation-side": (
        lambda: [[" ".join(d) for d in documents(1, 12, i * 12)] for i in range(8)],
        {"max_seq_length": 24, "max_predictions_per_seq": 4},
    ),
    # half the tokens predicted: many [MASK]/keep/random decisions and replacement ids
    "masking-80-10-10": (
        lambda: documents(10, 20),
        {"masked_lm_prob": 0.5, "max_predictions_per_seq": 64, "max_seq_length": 128},
    ),
    # the prediction cap below round(length * prob)
    "prediction-cap": (lambda: documents(10, 20), {"max_predictions_per_seq": 3}),
    # several passes: the final shuffle mixes every pass
    "final-shuffle": (lambda: documents(20, 10), {"dupe_factor": 4, "max_seq_length": 48}),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_each_random_rule_matches_the_reference(scenario, tmp_path):
    build, settings = SCENARIOS[scenario]
    path = write_documents(tmp_path / "input.txt", build())
    expected, reference_state = reference_rows([path], **settings)
    rows, state = compat_rows([path], **settings)
    assert len(rows) == len(expected) > 0
    for g, (got, want) in enumerate(zip(rows, expected, strict=True)):
        assert got == want, f"record {g}"
    assert (state == stream_state(_as_random(reference_state))).all()


def _as_random(state: tuple) -> random.Random:
    rng = random.Random()
    rng.setstate(state)
    return rng


def test_the_scenarios_exercise_their_rules(tmp_path):
    """The scenarios do what their names say (so the comparisons above cover those rules)."""
    one, _ = compat_rows([write_documents(tmp_path / "a.txt", documents(1, 60))], max_seq_length=64)
    assert any(r["next_sentence_labels"] == 1 for r in one)  # random next from its own document
    cut, _ = compat_rows(
        [write_documents(tmp_path / "b.txt", [[" ".join(documents(1, 12)[0])]] * 2)],
        max_seq_length=24,
    )
    assert all(len(r["input_ids"]) == 24 for r in cut)  # every pair truncated to the length
    masked, _ = compat_rows(
        [write_documents(tmp_path / "c.txt", documents(10, 20))],
        masked_lm_prob=0.5,
        max_predictions_per_seq=64,
    )
    kept = replaced = 0
    for r in masked:
        for p, label in zip(r["masked_lm_positions"], r["masked_lm_ids"], strict=True):
            token = r["input_ids"][p]
            kept += token == label
            replaced += token not in (label, 103)
    assert kept > 20 and replaced > 20


def test_whole_word_rule_against_an_oracle(tmp_path):
    """``--do_whole_word_mask`` (google-research/bert master; the wheel predates it) against a
    plain-Python rendering of that rule drawn from ``random.Random``: groups of ``##`` pieces,
    words that would overflow the budget skipped, decisions per piece."""
    path = write_documents(tmp_path / "w.txt", documents(12, 15))
    vocab, docs = compat_documents([path])
    settings = compat_settings(vocab, whole_word_mask=True, masked_lm_prob=0.3)
    state = stream_state(4)
    instances = create_reference_instances(docs, settings, state)
    oracle = _WholeWordOracle(docs, settings, random.Random(4))
    expected = oracle.run()
    assert len(expected) == len(instances)
    for k, want in enumerate(expected):
        used = int(instances.predictions[k])
        assert instances.positions[k][:used].tolist() == want["positions"]
        assert instances.replacements[k][:used].tolist() == want["replacements"]
    assert (state == stream_state(oracle.rng)).all()
    assert any(len(w["positions"]) > 1 for w in expected)


class _WholeWordOracle:
    """The reference's instance loop with master's whole-word masking, in Python, on ids."""

    def __init__(self, docs, settings, rng: random.Random) -> None:
        self.docs = [
            [
                docs.ids[docs.token_starts[s] : docs.token_starts[s + 1]].tolist()
                for s in range(docs.sentence_starts[d], docs.sentence_starts[d + 1])
            ]
            for d in range(docs.documents)
        ]
        self.s = settings
        self.rng = rng
        self.cont = settings.is_continuation

    def run(self) -> list[dict]:
        rng = self.rng
        order = list(range(len(self.docs)))
        rng.shuffle(order)
        docs = [self.docs[i] for i in order]
        out = []
        for _ in range(self.s.dupe_factor):
            for index in range(len(docs)):
                out += self.document(docs, index)
        rng.shuffle(list(range(len(out))))
        return out

    def document(self, docs, index) -> list[dict]:
        rng, doc = self.rng, docs[index]
        max_tokens = self.s.max_seq_length - 3
        target = max_tokens
        if rng.random() < self.s.short_seq_prob:
            target = rng.randint(2, max_tokens)
        out, chunk, length, i = [], [], 0, 0
        while i < len(doc):
            chunk.append(doc[i])
            length += len(doc[i])
            if i == len(doc) - 1 or length >= target:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                a = [t for sentence in chunk[:a_end] for t in sentence]
                b: list[int] = []
                if len(chunk) == 1 or rng.random() < 0.5:
                    for _ in range(10):
                        other = rng.randint(0, len(docs) - 1)
                        if other != index:
                            break
                    other_doc = docs[other]
                    for j in range(rng.randint(0, len(other_doc) - 1), len(other_doc)):
                        b += other_doc[j]
                        if len(b) >= target - len(a):
                            break
                    i -= len(chunk) - a_end
                else:
                    b = [t for sentence in chunk[a_end:] for t in sentence]
                while len(a) + len(b) > max_tokens:
                    longer = a if len(a) > len(b) else b
                    if rng.random() < 0.5:
                        del longer[0]
                    else:
                        longer.pop()
                out.append(self.mask([self.s.cls_id, *a, self.s.sep_id, *b, self.s.sep_id]))
                chunk, length = [], 0
            i += 1
        return out

    def mask(self, tokens: list[int]) -> dict:
        rng = self.rng
        groups: list[list[int]] = []
        for i, token in enumerate(tokens):
            if (
                i == 0
                or token == self.s.sep_id
                and i in (tokens.index(self.s.sep_id), len(tokens) - 1)
            ):
                continue
            if groups and self.cont[token]:
                groups[-1].append(i)
            else:
                groups.append([i])
        rng.shuffle(groups)
        budget = int(self.s.predictions_by_length()[len(tokens)])
        chosen = []
        for group in groups:
            if len(chosen) >= budget:
                break
            if len(chosen) + len(group) > budget:
                continue
            for i in group:
                if rng.random() < 0.8:
                    token = self.s.mask_id
                elif rng.random() < 0.5:
                    token = tokens[i]
                else:
                    token = int(
                        self.s.vocab_word_ids[rng.randint(0, len(self.s.vocab_word_ids) - 1)]
                    )
                chosen.append((i, token))
        chosen.sort()
        return {"positions": [i for i, _ in chosen], "replacements": [t for _, t in chosen]}


def test_instances_are_spans_not_token_lists(tmp_path):
    """Memory: an instance costs its spans and its predictions, not its tokens."""
    path = write_documents(tmp_path / "m.txt", documents(10, 20))
    vocab, docs = compat_documents([path])
    instances = create_reference_instances(docs, compat_settings(vocab), stream_state(1))
    per_instance = sum(
        getattr(instances, f).nbytes / len(instances)
        for f in (
            "a_start",
            "a_end",
            "b_start",
            "b_end",
            "random_next",
            "predictions",
            "positions",
            "replacements",
            "order",
        )
    )
    assert per_instance < 16 + 6 * 20 + 48
    assert np.all(instances.a_end > instances.a_start)


def test_instances_made_in_batches_give_the_same_instances(tmp_path, monkeypatch):
    """Instances are made a batch at a time (bounded arrays), a pass paused and resumed
    between batches, inside documents too; the batch size changes nothing."""
    import transforms.reference_instances as module

    path = write_documents(tmp_path / "g.txt", documents(20, 10))
    expected, _ = reference_rows([path], dupe_factor=3, max_seq_length=48)
    monkeypatch.setattr(module, "BATCH_INSTANCES", 3)
    rows, _ = compat_rows([path], dupe_factor=3, max_seq_length=48)
    assert rows == expected


def test_whole_words_group_across_the_separator(tmp_path):
    """A ``##`` piece that starts segment B (B truncated from the front) joins the last word of
    A, as master's rule does (it skips [CLS]/[SEP] without closing the current word)."""
    path = write_documents(tmp_path / "x.txt", documents(30, 6))
    vocab, docs = compat_documents([path])
    settings = compat_settings(vocab, whole_word_mask=True, max_seq_length=24, masked_lm_prob=0.4)
    state = stream_state(11)
    instances = create_reference_instances(docs, settings, state)
    oracle = _WholeWordOracle(docs, settings, random.Random(11))
    expected = oracle.run()
    starts_with_piece = 0
    for k, want in enumerate(expected):
        used = int(instances.predictions[k])
        assert instances.positions[k][:used].tolist() == want["positions"]
        assert instances.replacements[k][:used].tolist() == want["replacements"]
        starts_with_piece += bool(settings.is_continuation[docs.ids[instances.b_start[k]]])
    assert starts_with_piece > 0
    assert (state == stream_state(oracle.rng)).all()
