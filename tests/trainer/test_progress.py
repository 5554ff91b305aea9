"""The training progress line: plain periodic lines when not a terminal (no control codes), one
rewritten line on a terminal; counts printed as integers."""

from __future__ import annotations

import io

from tests.trainer.test_cli import _run
from trainer.progress import TrainProgress, format_metrics, format_progress, format_value


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_counts_are_integers_and_rates_keep_their_digits():
    assert format_value(15) == "15" and format_value(1.0) == "1.0000"
    assert format_value(0.5) == "0.5000" and format_value(7.12341) == "7.1234"
    assert format_value(1e-4) == "1.0e-04" and format_value(0.0) == "0.0000"
    text = format_metrics({"loss": 7.5, "examples": 15, "masked_tokens": 120})
    assert text == "loss=7.5000, examples=15, masked_tokens=120"


def test_progress_line_format():
    line = format_progress(120, 1000, [("loss", 7.12341), ("lr", 1e-4)], 83.0)
    assert line == "step 120/1,000 (12%) loss 7.1234 lr 1.0e-04 ETA 0:01:23"


def test_not_a_terminal_gets_one_plain_line_per_update():
    stream = io.StringIO()
    progress = TrainProgress(4, stream=stream)
    progress.update(2, [("loss", 9.0)])
    progress.update(4, [("loss", 8.0)])
    progress.close()
    text = stream.getvalue()
    assert "\r" not in text and "\x1b" not in text and "\b" not in text
    lines = text.splitlines()
    assert len(lines) == 2 and text.endswith("\n")
    assert lines[0].startswith("step 2/4 (50%) loss 9.0000")


def test_a_terminal_gets_one_line_rewritten_in_place():
    stream = Tty()
    progress = TrainProgress(4, stream=stream)
    progress.update(2, [("loss", 9.0)])
    progress.update(4, [("loss", 8.0)])
    progress.close()
    text = stream.getvalue()
    assert text.count("\r") == 2 and text.count("\n") == 1 and "\x1b" not in text


def test_train_cli_progress_and_eval_when_stderr_is_not_a_terminal(tmp_path, shards, capsys):
    common = ["--data", str(shards), "--out", str(tmp_path / "run"), "--model", "tiny"]
    common += ["--max-position-embeddings", "64", "--batch-size", "8"]
    rc = _run(
        [*common, "--steps", "4", "--warmup-steps", "1", "--log-every", "2"]
        + ["--eval-data", str(shards), "--eval-batches", "2"]
    )
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    err = captured.err
    assert "\x1b" not in err and "\r" not in err and "\b" not in err
    steps = [line for line in err.splitlines() if line.startswith("step ")]
    assert [s.split(" (")[0] for s in steps] == ["step 2/4", "step 4/4"]
    (eval_line,) = [line for line in err.splitlines() if "] eval: " in line]
    assert "examples=16," in eval_line and "masked_tokens=" in eval_line
    assert "examples=16.0000" not in eval_line
