"""Each job's config dataclass is the one source of its settings: the command-line flags' names
and defaults, ``bertprep run``'s keys, and the stage fingerprints all come from it."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from pipeline import job_config
from pipeline.cli import _subcommand_parser, build_parser
from pipeline.jobs.clean import CleanJobConfig
from pipeline.jobs.config import flag_defaults, stage_fingerprint
from pipeline.jobs.instances import InstancesJobConfig
from pipeline.jobs.run import clean_job_config, phase_job_configs, vocab_job_config
from pipeline.jobs.run_config import (
    CleanConfig,
    ConfigError,
    InputsConfig,
    PhaseConfig,
    VocabConfig,
    load_run_config,
)
from pipeline.jobs.vocab import VocabJobConfig
from transforms.seeding import DEFAULT_SEED

SAMPLE = Path(__file__).resolve().parents[3] / "configs" / "sample.yaml"

# Job settings with no flag of their own: set by other flags (shard_names by --output_file,
# chunk sizes by --chunk-mb), by `bertprep run` only, or tuning knobs left at their defaults.
JOB_ONLY = {
    "clean": {"chunk_documents", "punkt_sample_documents"},
    "vocab": {"exclude_eval_fraction"},
    "instances": {"shard_names", "spill_groups", "spill_group_mb", "pretokenized"},
}
# Where `bertprep run` deliberately differs from the job's own default (stated in run_config).
RUN_DEFAULTS = {("clean", "dedup"): "near", ("phase", "dupe_factor"): None}


def _fields(cls) -> dict[str, object]:
    return flag_defaults(cls)


@pytest.mark.parametrize(
    ("command", "job"),
    [("clean", CleanJobConfig), ("vocab", VocabJobConfig), ("instances", InstancesJobConfig)],
)
def test_every_flag_is_a_job_field_with_the_jobs_default(command, job):
    parser = _subcommand_parser(build_parser(), command)
    fields = {f.name for f in dataclasses.fields(job)}
    defaults = flag_defaults(job)
    flagged = set()
    for action in parser._actions:
        if not action.option_strings or action.dest in ("help", "input_file", "output_file"):
            continue
        dest = "inputs" if action.dest == "input" and "inputs" in fields else action.dest
        assert dest in fields, f"--{action.dest} is not a field of {job.__name__}"
        flagged.add(dest)
        if action.default not in (None, argparse.SUPPRESS, []) and dest in defaults:
            assert action.default == defaults[dest], (command, dest)
    assert fields - flagged == JOB_ONLY[command]


@pytest.mark.parametrize(
    ("section", "name", "job"),
    [
        (InputsConfig, "inputs", CleanJobConfig),
        (CleanConfig, "clean", CleanJobConfig),
        (VocabConfig, "vocab", VocabJobConfig),
        (PhaseConfig, "phase", InstancesJobConfig),
    ],
)
def test_run_keys_are_the_jobs_fields_with_the_jobs_defaults(section, name, job):
    ours, theirs = _fields(section), _fields(job)
    shared = set(ours) & set(theirs)
    assert shared, name
    for key in shared:
        expected = RUN_DEFAULTS.get((name, key), theirs[key])
        assert ours[key] == expected, (name, key)
    run_only = set(ours) - set(theirs)
    assert run_only <= {"path", "name", "eval_num_shards"}, run_only


def test_set_reaches_the_jobs_options():
    config = load_run_config(
        SAMPLE,
        [
            "phases.0.compression=gzip",
            "phases.0.bucket_size=50",
            "phases.0.reference_random_next=true",
            "phases.1.reference_whole_word_decisions=true",
            "clean.near_threshold=0.9",
            "inputs.title_field=heading",
            "vocab.reserved_unused=10",
        ],
    )
    train = phase_job_configs(config, config.phases[0], "v.txt")["train"]
    assert (train.compression, train.bucket_size, train.reference_random_next) == (
        "gzip",
        50,
        True,
    )
    evaluation = phase_job_configs(config, config.phases[0], "v.txt")["eval"]
    assert evaluation.compression == "gzip" and evaluation.dupe_factor == 1
    assert phase_job_configs(config, config.phases[1], "v.txt")["train"].compression == "none"
    assert phase_job_configs(config, config.phases[1], "v.txt")[
        "train"
    ].reference_whole_word_decisions
    clean = clean_job_config(config)
    assert clean.near_threshold == 0.9 and clean.title_field == "heading"
    assert clean.seed == config.seed == DEFAULT_SEED
    assert vocab_job_config(config).reserved_unused == 10


def test_set_errors_name_the_key():
    with pytest.raises(ConfigError, match=r"phases\[0\]\.compression must be one of"):
        from pipeline.jobs.run import preflight

        preflight(load_run_config(SAMPLE, ["phases.0.compression=zip"]), set())
    with pytest.raises(ConfigError, match=r"clean.near_threshold"):
        load_run_config(SAMPLE, ["clean.near_threshold=1.5"])
    with pytest.raises(ConfigError, match=r"phases\[0\]\.bucket_size: expected an integer"):
        load_run_config(SAMPLE, ["phases.0.bucket_size=big"])


def test_the_older_vocab_lowercase_key_is_still_read():
    config = load_run_config(SAMPLE, ["vocab.lowercase=false"])
    assert config.vocab.do_lower_case is False
    assert phase_job_configs(config, config.phases[0], "v.txt")["train"].do_lower_case is False


# configs/sample.yaml as the first version of `bertprep run` wrote it (commit 4e23bd2).
FIRST_SAMPLE = """\
output: bertprep-out
seed: 12345
inputs:
  wikipedia: [../sample/wiki/*.xml]
  books: [../sample/books/*.txt]
clean:
  dedup: near
  min_words: 20
  num_shards: 2
vocab:
  vocab_size: 3000
  lowercase: true
  min_frequency: 2
eval:
  fraction: 0.1
phases:
  - name: seq128
    max_seq_length: 128
    max_predictions_per_seq: 20
    dupe_factor: 3
    num_shards: 4
    eval_num_shards: 1
"""


def test_a_removed_key_says_it_was_removed_and_what_replaces_it(tmp_path):
    old = tmp_path / "old.yaml"
    old.write_text(FIRST_SAMPLE, encoding="utf-8")
    message = r"^clean\.num_shards: removed in an earlier version: .*set chunk_mb instead"
    with pytest.raises(ConfigError, match=message) as caught:
        load_run_config(old)
    assert "unknown key" not in str(caught.value)
    with pytest.raises(ConfigError, match=message):
        load_run_config(SAMPLE, ["clean.num_shards=4"])
    # Doing as it says is enough: the rest of the old config still reads.
    old.write_text(FIRST_SAMPLE.replace("  num_shards: 2\n", ""), encoding="utf-8")
    config = load_run_config(old)
    assert config.phases[0].num_shards == 4 and config.vocab.do_lower_case is True


def test_other_unknown_keys_are_still_unknown_and_removed_ones_stay_removed():
    from pipeline.jobs.run_config import REMOVED, RunConfig

    with pytest.raises(ConfigError, match=r"clean\.min_word: unknown key \(did you mean min_words"):
        load_run_config(SAMPLE, ["clean.min_word=3"])
    with pytest.raises(ConfigError, match=r"vocab\.num_shards: unknown key"):
        load_run_config(SAMPLE, ["vocab.num_shards=3"])
    assert load_run_config(SAMPLE, ["phases.0.num_shards=3"]).phases[0].num_shards == 3
    # The table names no key that is read again (or it would shadow nothing, silently stale).
    sections = {f.name: f.type for f in dataclasses.fields(RunConfig)}
    for section_name, keys in REMOVED.items():
        kind = {"clean": CleanConfig, "vocab": VocabConfig, "phases": PhaseConfig}[section_name]
        assert section_name in sections
        assert not set(keys) & {f.name for f in dataclasses.fields(kind)}, section_name


def test_stage_fingerprints_take_the_whole_config_and_the_version(monkeypatch):
    job = clean_job_config(load_run_config(SAMPLE))
    base = stage_fingerprint("clean", job)
    assert stage_fingerprint("clean", dataclasses.replace(job, text_field="body")) != base
    assert stage_fingerprint("clean", dataclasses.replace(job, punkt_sample_documents=9)) != base
    # Where the stage writes is not what it computes: a moved output still resumes.
    assert stage_fingerprint("clean", dataclasses.replace(job, output="/elsewhere")) == base
    monkeypatch.setattr(job_config, "PACKAGE_VERSION", "9.9.9")
    assert stage_fingerprint("clean", job) != base
