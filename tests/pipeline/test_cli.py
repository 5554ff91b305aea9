"""The ``bertprep`` command line: help with defaults, refusal of unsafe modes, exit codes."""

from __future__ import annotations

import pytest

from pipeline.cli import main


def test_help_states_defaults(capsys):
    with pytest.raises(SystemExit) as e:
        main(["instances", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for text in (
        "--max-seq-length",
        "(default: 128)",
        "(default: 20)",
        "(default: 0.15)",
        "(default: 10)",
        "(default: 12345)",
        "(default: 256)",
        "multi_threading",
    ):
        assert text in out


def test_multi_threading_is_refused(tmp_path, capsys, sample_corpus_files, sample_vocab_path):
    code = main(
        [
            "instances",
            "--input",
            str(sample_corpus_files[0]),
            "--vocab",
            str(sample_vocab_path),
            "--output",
            str(tmp_path / "out"),
            "--direct_running_mode=multi_threading",
        ]
    )
    assert code == 2
    assert "multi_threading is refused" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_cli_runs_the_job(tmp_path, capsys, sample_corpus_files, sample_vocab_path):
    code = main(
        [
            "instances",
            "--input",
            str(sample_corpus_files[0]),
            "--vocab",
            str(sample_vocab_path),
            "--output",
            str(tmp_path / "out"),
            "--num-shards",
            "2",
            "--dupe-factor",
            "1",
            "--direct_running_mode=in_memory",
        ]
    )
    assert code == 0
    err = capsys.readouterr().err
    assert "instances" in err and "IsNext ratio" in err
    assert (tmp_path / "out" / "manifest.json").exists()


def test_config_error_exit_code(tmp_path, capsys, sample_corpus_files):
    (tmp_path / "v.txt").write_text("[PAD]\n")
    code = main(
        [
            "instances",
            "--input",
            str(sample_corpus_files[0]),
            "--vocab",
            str(tmp_path / "v.txt"),
            "--output",
            str(tmp_path / "out"),
            "--direct_running_mode=in_memory",
        ]
    )
    assert code == 2
    assert "lacks required special token" in capsys.readouterr().err
