"""Evaluation mode over held-out shards: MLM/NSP accuracy and losses, every record once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.trainer.conftest import small_config
from trainer.checkpointing import CheckpointError
from trainer.evaluation import evaluate_run
from trainer.input_pipeline import resolve_shards

pytestmark = pytest.mark.xdist_group("trained_run")  # one 300-step run, set up once


def test_final_evaluation_reports_accuracies_and_losses(trained_run, shards):
    config, result, messages = trained_run
    ev = result.eval
    records = resolve_shards([str(shards)]).records
    assert ev["examples"] == records  # the partial last batch is kept
    assert 0.0 <= ev["mlm_accuracy"] <= 1.0 and 0.0 <= ev["nsp_accuracy"] <= 1.0
    assert ev["mlm_accuracy"] > 0.05  # better than chance after training (1/4000)
    assert ev["loss"] == pytest.approx(ev["mlm_loss"] + ev["nsp_loss"])
    assert ev["mlm_loss"] < 8.0
    assert any(m.startswith("eval: ") for m in messages)
    saved = json.loads((Path(config.out) / "eval_results.json").read_text())
    assert saved["step"] == 300 and saved["mlm_accuracy"] == pytest.approx(ev["mlm_accuracy"])


def test_eval_only_mode_reproduces_the_final_evaluation(trained_run, shards, tmp_path):
    config, result, _ = trained_run
    # Model from the run's trainer_config.json; the preset named here is not used.
    eval_config = small_config(shards, config.out, model="large", eval_data=[str(shards)])
    report = evaluate_run(eval_config, log=lambda m: None)
    assert report["checkpoint"].endswith("ckpt-300") and report["step"] == 300
    for key in ("mlm_accuracy", "nsp_accuracy", "mlm_loss", "nsp_loss", "examples"):
        assert report[key] == pytest.approx(result.eval[key], rel=1e-4), key
    limited = evaluate_run(
        small_config(shards, config.out, eval_batches=2, batch_size=8), log=lambda m: None
    )
    assert limited["examples"] == 16
    with pytest.raises(CheckpointError, match="no checkpoint found"):
        evaluate_run(small_config(shards, tmp_path / "empty"), log=lambda m: None)
