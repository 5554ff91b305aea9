"""Errors name each option as the user typed it: google-research/bert's ``--max_seq_length``
gets ``--max_seq_length`` back, the native ``--max-seq-length`` gets that (through the real
``bertprep`` entry point), and the spelling map itself (aliases, prefixes, ``--x/--no-x``)."""

from __future__ import annotations

import argparse

import pytest

from pipeline.cli import main
from pipeline.commands.common import as_typed, typed_spellings


def _instances(tmp_path, sample_corpus_files, sample_vocab_path, *flags: str) -> list[str]:
    return [
        "instances",
        "--input",
        str(sample_corpus_files[0]),
        "--vocab",
        str(sample_vocab_path),
        "--output",
        str(tmp_path / "out"),
        "--direct_running_mode=in_memory",
        *flags,
    ]


@pytest.mark.parametrize(
    ("flags", "named", "not_named"),
    [
        (
            ["--max_seq_length", "512", "--masked_lm_prob=0.15"],
            ["--max_seq_length 512", "--masked_lm_prob 0.15"],
            ["--max-seq-length", "--masked-lm-prob"],
        ),
        (
            ["--max-seq-length", "512", "--masked-lm-prob=0.15"],
            ["--max-seq-length 512", "--masked-lm-prob 0.15"],
            ["--max_seq_length", "--masked_lm_prob"],
        ),
        # A prefix argparse accepts names the full option it stands for, in the typed style.
        (["--max_seq", "512"], ["--max_seq_length 512"], ["--max-seq-length"]),
    ],
)
def test_an_error_names_each_flag_as_typed(
    tmp_path, capsys, sample_corpus_files, sample_vocab_path, flags, named, not_named
):
    code = main(_instances(tmp_path, sample_corpus_files, sample_vocab_path, *flags))
    err = capsys.readouterr().err
    assert code == 2, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("bertprep instances: error: ") and "is too small" in line
    for text in named:
        assert text in line, line
    for text in not_named:
        assert text not in line, line
    # Not typed, so in the native spelling.
    assert "--max-predictions-per-seq 20" in line and "--allow-prediction-cap" in line


@pytest.mark.parametrize(
    ("typed", "expected"),
    [("--dupe_factor", "--dupe_factor must be"), ("--dupe-factor", "--dupe-factor must be")],
)
def test_a_setting_error_names_the_setting_as_typed(
    tmp_path, capsys, sample_corpus_files, sample_vocab_path, typed, expected
):
    code = main(_instances(tmp_path, sample_corpus_files, sample_vocab_path, typed, "0"))
    err = capsys.readouterr().err
    assert code == 2 and expected in err, err


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-seq-length", "--max_seq_length", type=int)
    parser.add_argument("--seed", "--random_seed", type=int)
    parser.add_argument(
        "--do-lower-case", "--do_lower_case", action=argparse.BooleanOptionalAction, default=True
    )
    parser.add_argument("--output")
    parser.add_argument("--max-len", type=int)
    return parser


def test_the_spelling_map_follows_the_parser():
    parser = _parser()
    assert typed_spellings(["--max_seq_length=5", "--random_seed", "3"], parser) == {
        "--max-seq-length": "--max_seq_length",
        "--seed": "--random_seed",
    }
    # Each sense of a switch maps to its own sense only.
    assert typed_spellings(["--no-do_lower_case"], parser) == {
        "--no-do-lower-case": "--no-do_lower_case"
    }
    assert typed_spellings(["--do_lower_case"], parser) == {"--do-lower-case": "--do_lower_case"}
    # Unknown options, ambiguous prefixes and anything after -- are left out.
    assert typed_spellings(["--runner=x", "--max", "--", "--random_seed"], parser) == {}


def test_messages_are_rewritten_only_where_they_name_a_typed_option():
    parser = _parser()
    argv = ["--max_seq_length", "64", "--output", "--seed-dir"]
    message = "--max-seq-length 64 (not --max-seq-length-x, --seed or --output) is bad."
    assert as_typed(message, argv, parser) == (
        "--max_seq_length 64 (not --max-seq-length-x, --seed or --output) is bad."
    )
    assert as_typed("--seed must be positive", ["--random_seed", "-1"], parser) == (
        "--random_seed must be positive"
    )
    assert as_typed("--seed must be positive", [], parser) == "--seed must be positive"


@pytest.mark.parametrize(
    ("flags", "expected"),
    [([], 0), (["--pack-instances"], None), (["--pack-instances", "2"], 2)],
)
def test_pack_instances_alone_packs_the_measured_default(
    tmp_path, sample_corpus_files, sample_vocab_path, flags, expected
):
    """Off unless asked; the bare flag is ``DEFAULT_PACK_INSTANCES`` (4), a number is K."""
    from pipeline.cli import build_parser
    from pipeline.commands.instances import config_from_args
    from transforms.features import DEFAULT_PACK_INSTANCES

    argv = _instances(tmp_path, sample_corpus_files, sample_vocab_path, *flags)
    args, _ = build_parser().parse_known_args(argv)
    want = DEFAULT_PACK_INSTANCES if expected is None else expected
    assert DEFAULT_PACK_INSTANCES == 4
    assert config_from_args(args).pack_instances == want
