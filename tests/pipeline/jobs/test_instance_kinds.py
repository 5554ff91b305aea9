"""Unmasked (dynamic masking) and packed-sentence instances end to end: the job, its manifest, the
records, and ``bertprep inspect/stats/validate`` on each kind."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from pipeline.cli import main
from tests.pipeline.jobs.test_instances import run_job, shard_files
from tokenizer.vocab import Vocab
from transforms.example_encoding import decode_example
from transforms.masking import word_starts
from transforms.tfrecord import iter_records


def read_records(path: str) -> list[bytes]:
    with open(path, "rb") as f:
        return list(iter_records(f))


KINDS = [
    ("dynamic", "sentence-pairs"),
    ("dynamic", "full-sentences"),
    ("dynamic", "doc-sentences"),
    ("static", "full-sentences"),
]


@pytest.fixture(scope="module")
def produced(tmp_path_factory, sample_corpus_files, sample_vocab_path):
    tmp = tmp_path_factory.mktemp("kinds")
    inputs = [str(p) for p in sample_corpus_files]
    runs = {}
    for masking, mode in KINDS:
        runs[(masking, mode)] = run_job(
            tmp,
            inputs,
            sample_vocab_path,
            name=f"{masking}-{mode}",
            num_shards=2,
            dupe_factor=1,
            max_seq_length=64,
            max_predictions_per_seq=10,
            masking=masking,
            input_mode=mode,
        )
    return runs


def records(out) -> list[dict]:
    found = []
    for path in shard_files(out):
        found += [decode_example(r) for r in read_records(str(path))]
    return found


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: "-".join(k))
def test_manifest_states_the_kind(produced, kind):
    manifest, _ = produced[kind]
    masking, mode = kind
    assert manifest["masking"] == masking and manifest["input_mode"] == mode
    assert manifest["dupe_factor"] == 1
    assert manifest["next_sentence_prediction"] == (mode == "sentence-pairs")
    names = set(manifest["features"])
    assert ("next_sentence_labels" in names) == (mode == "sentence-pairs")
    assert ("word_starts" in names) == (masking == "dynamic")
    assert ("masked_lm_positions" in names) == (masking == "static")
    if masking == "dynamic":
        spec = manifest["dynamic_masking"]
        assert spec["max_predictions_per_seq"] == 10 and spec["masked_lm_prob"] == 0.15
        assert spec["special_ids"]["mask"] == 103
        assert spec["replacement_excluded_ranges"] == [[0, 404]]  # [PAD], [unusedN], specials
        expected = manifest["totals"]["expected_predictions_per_instance"]
        assert 1 <= expected <= 10
    else:
        assert "dynamic_masking" not in manifest


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: "-".join(k))
def test_records_follow_their_contract(produced, kind, sample_vocab_path):
    manifest, out = produced[kind]
    vocab = Vocab.from_file(str(sample_vocab_path))
    rows = records(out)
    assert len(rows) == manifest["totals"]["instances"] > 0
    for r in rows:
        assert set(r) == set(manifest["features"])
    ids = np.array([r["input_ids"] for r in rows])
    mask = np.array([r["input_mask"] for r in rows])
    lengths = mask.sum(1)
    assert (ids[:, 0] == vocab.cls_id).all()
    assert (ids[np.arange(len(ids)), lengths - 1] == vocab.sep_id).all() or kind[0] == "static"
    if kind[0] == "dynamic":
        candidate = (mask > 0) & (ids != vocab.cls_id) & (ids != vocab.sep_id)
        starts = word_starts(ids, candidate, vocab.continuation_mask())
        np.testing.assert_array_equal(np.array([r["word_starts"] for r in rows]), starts)
        assert not (ids == vocab.mask_id).any()  # unmasked
    if kind[1] != "sentence-pairs":
        assert all(set(r["segment_ids"]) == {0} for r in rows)
        seps = ((ids == vocab.sep_id) & (mask > 0)).sum(1)
        if kind[1] == "doc-sentences":
            assert (seps == 1).all()
        elif kind[0] == "dynamic":
            assert manifest["totals"]["document_separators"] == int((seps - 1).sum()) > 0
        if kind[1] == "full-sentences":  # whole sentences (~27 tokens here) fill rows well
            assert lengths.mean() > 0.7 * 64


def test_packed_rows_keep_every_token(produced):
    """full-sentences drops nothing: the real tokens minus [CLS]/[SEP] are the corpus's tokens."""
    manifest, out = produced[("dynamic", "full-sentences")]
    ids = np.array([r["input_ids"] for r in records(out)])
    text = ((ids != 101) & (ids != 102) & (ids != 0)).sum()
    assert text == manifest["totals"]["tokens"]


def test_static_pairs_unchanged_by_the_new_fields(tmp_path, sample_corpus_files, sample_vocab_path):
    """Default settings and explicit static/sentence-pairs write the same bytes."""
    inputs = [str(sample_corpus_files[0])]
    a, out_a = run_job(tmp_path, inputs, sample_vocab_path, name="a", num_shards=2)
    b, out_b = run_job(
        tmp_path,
        inputs,
        sample_vocab_path,
        name="b",
        num_shards=2,
        masking="static",
        input_mode="sentence-pairs",
    )
    assert [s["content_sha256"] for s in a["shards"]] == [s["content_sha256"] for s in b["shards"]]
    assert "dynamic_masking" not in a and a["masking"] == "static"


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: "-".join(k))
def test_validate_accepts_every_kind(produced, kind, capsys):
    _, out = produced[kind]
    code, stdout, _ = cli(capsys, "validate", str(out), "--workers", "1")
    assert code == 0, stdout
    assert stdout.startswith("valid")


def test_validate_finds_broken_word_starts(produced, tmp_path, capsys):
    from transforms.example_encoding import encode_examples
    from transforms.tfrecord import frame_record

    manifest, out = produced[("dynamic", "sentence-pairs")]
    copy = tmp_path / "broken"
    shutil.copytree(out, copy)
    shard = shard_files(copy)[0]
    rows = [decode_example(r) for r in read_records(str(shard))]
    rows[1]["word_starts"][0] = 1  # on [CLS]
    ints = {k: np.array([r[k] for r in rows]) for k in rows[0]}
    shard.write_bytes(b"".join(frame_record(r) for r in encode_examples(ints, {})))
    code, stdout, _ = cli(capsys, "validate", str(shard), "--workers", "1")
    assert code == 1
    assert "record 1: word_starts_on_maskable" in stdout


def test_validate_finds_doubled_separators(produced, tmp_path, capsys):
    from transforms.example_encoding import encode_examples
    from transforms.tfrecord import frame_record

    _, out = produced[("dynamic", "doc-sentences")]
    copy = tmp_path / "doubled"
    shutil.copytree(out, copy)
    shard = shard_files(copy)[0]
    rows = [decode_example(r) for r in read_records(str(shard))]
    rows[0]["input_ids"][2] = 102  # a second [SEP] inside one document's row
    rows[0]["word_starts"][2] = 0
    ints = {k: np.array([r[k] for r in rows]) for k in rows[0]}
    shard.write_bytes(b"".join(frame_record(r) for r in encode_examples(ints, {})))
    code, stdout, _ = cli(capsys, "validate", str(shard), "--workers", "1")
    assert code == 1 and "record 0: packed_separators" in stdout


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: "-".join(k))
def test_stats_reports_the_kind(produced, kind, capsys, tmp_path):
    manifest, out = produced[kind]
    html = tmp_path / "report.html"
    code, stdout, _ = cli(
        capsys, "stats", str(out), "--workers", "1", "--json", "--plot", str(html)
    )
    assert html.stat().st_size > 0
    assert code == 0
    report = json.loads(stdout)
    assert report["masking"] == kind[0] and report["input_mode"] == kind[1]
    assert report["records"] == manifest["totals"]["instances"]
    if kind[1] != "sentence-pairs":
        assert report["is_next_ratio"] is None
    if kind[0] == "dynamic":
        dyn = report["dynamic_masking"]
        assert dyn["expected_predictions_per_instance"] == pytest.approx(
            manifest["totals"]["expected_predictions_per_instance"], abs=1e-3
        )
        assert abs(dyn["expected_predicted_share"] - 0.15) < 0.02
        assert report["predictions_per_instance"]["total"] == 0  # nothing masked on disk
    code, text, _ = cli(capsys, "stats", str(out), "--workers", "1")
    assert code == 0 and "kind" in text


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: "-".join(k))
def test_inspect_shows_every_kind(produced, kind, capsys):
    _, out = produced[kind]
    code, stdout, _ = cli(capsys, "inspect", str(out), "-n", "2")
    assert code == 0
    if kind[0] == "dynamic":
        assert "unmasked (masked by the trainer)" in stdout
    if kind[1] != "sentence-pairs":
        assert "no NSP" in stdout


def test_cli_defaults_dupe_factor_by_masking():
    from pipeline.cli import build_parser
    from pipeline.commands.instances import config_from_args

    parser = build_parser()
    base = ["instances", "--input", "x.txt", "--vocab", "v.txt", "--output", "o"]
    dynamic = config_from_args(parser.parse_args([*base, "--masking", "dynamic"]))
    static = config_from_args(parser.parse_args(base))
    assert (dynamic.dupe_factor, static.dupe_factor) == (1, 10)
    packed = config_from_args(parser.parse_args([*base, "--input-mode", "doc-sentences"]))
    assert packed.input_mode == "doc-sentences" and packed.masking == "static"


def test_run_config_phases_take_the_kind_and_default_dupe_factor(tmp_path):
    from pipeline.jobs.run_config import ConfigError, load_run_config

    path = tmp_path / "run.yaml"
    path.write_text(
        "inputs: {books: [b.txt]}\n"
        "phases:\n"
        "  - {name: s, masking: static}\n"
        "  - {name: d, masking: dynamic, input_mode: full-sentences}\n"
        "  - {name: e, masking: dynamic, dupe_factor: 3}\n"
    )
    phases = load_run_config(path).phases
    assert [(p.masking, p.input_mode, p.dupe_factor) for p in phases] == [
        ("static", "sentence-pairs", 10),
        ("dynamic", "full-sentences", 1),
        ("dynamic", "sentence-pairs", 3),
    ]
    with pytest.raises(ConfigError, match=r"phases\[0\].input_mode"):
        load_run_config(path, ["phases.0.input_mode=pairs"])
