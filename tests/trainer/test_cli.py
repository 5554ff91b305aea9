"""``bertprep train`` as a subcommand: help, a short run, evaluation mode, config errors."""

from __future__ import annotations

import argparse
import json

from pipeline.commands import train as train_command


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bertprep")
    sub = parser.add_subparsers(dest="command", required=True)
    train_command.register(sub)
    return parser


def _run(argv: list[str]) -> int:
    """``bertprep train ARGV`` through the entry point, which turns a UserError into exit 2."""
    from pipeline.cli import main

    return main(["train", *argv])


def test_help_groups_and_defaults():
    parser = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    text = sub.choices["train"].format_help()
    for fragment in (
        "data and output",
        "shard sizes (for shards without manifest.json",
        "optimization",
        "devices",
        "checkpoints and logs",
        "--mixed-precision {auto,bf16,fp16,none}",
        "--optimizer {adamw,lamb}",
        "--recipe {default,reference}",
        "none: 100 with --tpu, else 1",
        "(default: 256)",
        "(default: 512)",
        "tiny, mini, small, medium, base, large",
        "--init-checkpoint",
        "--eval-only",
    ):
        assert fragment in text, fragment


def test_short_run_then_eval_only(tmp_path, shards, capsys):
    out = tmp_path / "run"
    common = ["--data", str(shards), "--out", str(out), "--model", "tiny"]
    common += ["--max-position-embeddings", "64", "--batch-size", "8"]
    rc = _run(
        [*common, "--steps", "4", "--warmup-steps", "1", "--log-every", "2"]
        + ["--checkpoint-every", "2", "--no-progress", "--learning-rate", "1e-3"]
    )
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    summary = json.loads(captured.out)
    assert summary["step"] == 4 and summary["last"]["step"] == 4
    assert summary["encoder"]["keras"].endswith("encoder.keras")
    assert (out / "checkpoints" / "ckpt-4.index").exists()

    rc = _run([*common, "--eval-only", "--eval-batches", "3"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    report = json.loads(captured.out)
    assert report["step"] == 4 and report["examples"] == 24
    assert set(report) >= {"mlm_accuracy", "nsp_accuracy", "mlm_loss", "nsp_loss", "loss"}


def test_mismatch_exits_2_before_training(tmp_path, shards, capsys):
    out = tmp_path / "run"
    rc = _run(
        ["--data", str(shards), "--out", str(out), "--model", "tiny", "--steps", "10"]
        + ["--warmup-steps", "1", "--max-predictions-per-seq", "20"]
    )
    err = capsys.readouterr().err
    assert rc == 2
    assert "bertprep train: error: the shards do not fit the configuration" in err
    assert "trainer max_predictions_per_seq=20 but the shards have 10" in err
    assert not out.exists()
    assert _run(["--data", str(tmp_path / "none-*"), "--out", str(out)]) == 2
    assert "no shard files match" in capsys.readouterr().err
    assert _run(["--data", str(shards), "--out", str(out), "--steps", "5"]) == 2
    assert "--warmup-steps must be in [0, --steps]" in capsys.readouterr().err


def test_missing_vocab_and_unwritable_out_fail_before_step_one(tmp_path, shards, capsys):
    out = tmp_path / "run"
    common = ["--data", str(shards), "--model", "tiny", "--max-position-embeddings", "64"]
    common += ["--batch-size", "8", "--steps", "2", "--warmup-steps", "1", "--no-progress"]
    rc = _run([*common, "--out", str(out), "--vocab", str(tmp_path / "missing.txt")])
    err = capsys.readouterr().err
    assert rc == 2 and "missing.txt: no such file" in err and "Traceback" not in err
    assert not out.exists()
    (tmp_path / "a-file").write_text("")
    rc = _run([*common, "--out", str(tmp_path / "a-file" / "run")])
    err = capsys.readouterr().err
    assert rc == 2 and "a-file is not a directory" in err


def test_errors_name_the_flags_typed(tmp_path, shards, capsys):
    out = tmp_path / "run"
    rc = _run(["--data", str(shards), "--out", str(out), "--steps", "10", "--warmup-steps", "20"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "--warmup-steps must be in [0, --steps] = [0, 10], got 20" in err
    assert not out.exists()


def test_recipe_and_steps_per_loop_flags(tmp_path, capsys):
    base = ["train", "--data", str(tmp_path), "--out", str(tmp_path / "run")]
    config = train_command.config_from_args(_parser().parse_args(base))
    assert config.recipe == "default" and config.steps_per_loop is None  # resolved per platform
    args = _parser().parse_args([*base, "--recipe", "reference", "--steps-per-loop", "50"])
    config = train_command.config_from_args(args)
    assert config.recipe == "reference" and config.steps_per_loop == 50
    assert config.optimizer_config().recipe == "reference"
    assert _run([*base[1:], "--recipe", "reference", "--optimizer", "lamb"]) == 2
    assert "the reference recipe's optimizer is adamw, not lamb" in capsys.readouterr().err
