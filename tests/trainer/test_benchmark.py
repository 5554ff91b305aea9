"""``python -m trainer.benchmark`` on this CPU with a tiny model: every combination runs and is
reported, on random shards it writes itself and on the test shards."""

from __future__ import annotations

import json

import numpy as np

from tests.trainer.conftest import SEQ
from trainer.benchmark import (
    _combinations,
    main,
    parse_args,
    predictions_for,
    write_random_shards,
)
from trainer.input_pipeline import make_dataset, resolve_shards

TINY = ["--model", "tiny", "--max-position-embeddings", str(SEQ), "--steps", "2"]


def test_random_shards_follow_the_feature_contract(tmp_path):
    assert predictions_for(128) == 20 and predictions_for(512) == 76 and predictions_for(64) == 10
    directory = write_random_shards(tmp_path, seq_length=32, records=10, vocab_size=300)
    info = resolve_shards([str(directory)])
    assert len(info.files) == 2 and (info.max_seq_length, info.max_predictions_per_seq) == (32, 5)
    batch = next(iter(make_dataset(info, 10, training=False)))
    ids, positions = batch["input_ids"].numpy(), batch["masked_lm_positions"].numpy()
    assert ids.shape == (10, 32) and ids.max() < 300
    assert (np.diff(positions, axis=1) > 0).all() and positions.min() >= 1
    assert set(np.unique(batch["segment_ids"].numpy())) == {0, 1}
    assert float(batch["masked_lm_weights"].numpy().sum()) == 50.0


def test_benchmark_matrix_on_random_shards(tmp_path, capsys):
    report_path = tmp_path / "report.json"
    argv = [*TINY, "--seq-lengths", "32", "--records", "16", "--batch-size", "32:4,512:2"]
    argv += ["--vocab-size", "500", "--precisions", "none,fp16", "--xla", "off"]
    argv += ["--report", str(report_path)]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report == json.loads(report_path.read_text())
    assert report["devices"] and report["versions"]["keras"]
    (length,) = report["lengths"]
    assert length["seq_length"] == 32 and length["data"] == "random shards"
    assert [(r["precision"], r["input"]) for r in length["runs"]] == [
        (p, i) for p in ("none", "fp16") for i in ("real", "synthetic")
    ]
    for row in length["runs"]:
        assert "error" not in row, row
        assert row["sequences_per_second"] > 0 and row["batch_size"] == 4, row
        assert row["xla"] is False and np.isfinite(row["final_loss"])
    assert set(length["real_over_synthetic"]) == {"none", "fp16"}


def test_long_sequences_run_the_long_plan_only():
    args = parse_args([])
    assert (args.precisions, args.xla, args.inputs) == (
        ["bf16", "fp16"],
        ["on", "off"],
        ["real", "synthetic"],
    )
    assert args.batch_size == {128: 64, 512: 16} and args.model == "base"
    everything = [("bf16", True), ("bf16", False), ("fp16", True), ("fp16", False)]
    assert _combinations(args, 128) == everything
    assert _combinations(args, 512) == [("bf16", True)]
    args = parse_args(["--long-plan", "fp16:on,bf16:off"])
    assert _combinations(args, 512) == [("bf16", False), ("fp16", True)]
    assert _combinations(parse_args(["--long-plan", "all"]), 512) == everything
    # Only what the matrix holds: bf16 is not asked for here, so fp16's first combination.
    assert _combinations(parse_args(["--precisions", "fp16"]), 512) == [("fp16", True)]


def test_benchmark_on_given_shards(shards, capsys):
    argv = [*TINY, "--data", str(shards), "--batch-size", "8", "--precisions", "none"]
    argv += ["--xla", "on", "--inputs", "synthetic"]
    assert main(argv) == 0
    (length,) = json.loads(capsys.readouterr().out)["lengths"]
    assert length["seq_length"] == SEQ and length["data"] == str(shards)
    (row,) = length["runs"]
    assert row["xla"] is True and row["input"] == "synthetic" and row["sequences_per_second"] > 0


def test_a_failed_combination_is_reported_and_the_rest_run(tmp_path, capsys):
    report_path = tmp_path / "report.json"
    argv = [*TINY, "--seq-lengths", "32", "--records", "8", "--batch-size", "4", "--gpus", "99"]
    argv += ["--precisions", "none", "--xla", "off", "--report", str(report_path)]
    assert main(argv) == 1
    (length,) = json.loads(capsys.readouterr().out)["lengths"]
    assert [r["input"] for r in length["runs"]] == ["real", "synthetic"]
    assert all("--gpus 99 but only" in r["error"] for r in length["runs"])
    assert length["real_over_synthetic"] == {}
    assert json.loads(report_path.read_text())["lengths"] == [length]


def test_packing_pair_holds_the_same_instances(tmp_path):
    from trainer.benchmark import write_packing_pair

    unpacked, packed, counts = write_packing_pair(tmp_path, 32, 40, 300, 3, full_fraction=0.25)
    plain, rows = resolve_shards([str(unpacked)]), resolve_shards([str(packed)])
    assert not plain.packed and rows.packed and rows.max_instances_per_row == 3
    assert counts["packed_rows"] == rows.records < 40 == counts["unpacked_rows"]
    assert counts["packed_fill"] > counts["unpacked_fill"]
    a = next(iter(make_dataset(plain, 64, training=False)))
    b = next(iter(make_dataset(rows, 64, training=False)))
    assert float(b["next_sentence_weights"].numpy().sum()) == 40
    for name in ("input_mask", "masked_lm_weights"):
        assert a[name].numpy().sum() == b[name].numpy().sum(), name


def test_packing_benchmark_reports_real_tokens_per_second(tmp_path, capsys, monkeypatch):
    """The side-by-side report (training itself on both kinds of shards is what
    test_training's packed run and the matrix above exercise): each side trained on its own
    shards at the same batch, alternately, and the ratio of the medians."""
    from trainer import benchmark

    seen = []

    def fake_measure(args, data, precision, xla, synthetic, out, batch_size):
        info = resolve_shards([data])
        seen.append((info.packed, batch_size, synthetic))
        return {"tokens_per_second": 300.0 if info.packed else 200.0, "batch_size": batch_size}

    monkeypatch.setattr(benchmark, "measure", fake_measure)
    argv = [*TINY, "--packing", "3", "--seq-lengths", "32", "--records", "48", "--rounds", "2"]
    argv += ["--batch-size", "4", "--vocab-size", "300", "--precisions", "none", "--xla", "off"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert seen == [(False, 4, False), (True, 4, False)] * 2
    (length,) = report["lengths"]
    assert [r["rows"] for r in length["runs"]] == ["unpacked", "packed"] * 2
    assert length["tokens_per_second"]["none"] == {
        "unpacked": 200.0,
        "packed": 300.0,
        "packed_over_unpacked": 1.5,
    }
    assert length["packed_rows"] < length["unpacked_rows"] == 48
    assert 0 < length["unpacked_fill"] < length["packed_fill"] <= 1
