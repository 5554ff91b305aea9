"""The ``bertprep`` command line: help with defaults, refusal of unsafe modes, exit codes."""

from __future__ import annotations

import re

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
        "(default: follow the data",  # was "(default: 256)": the count now follows the data
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


def _instances_args(tmp_path, sample_corpus_files, sample_vocab_path, *extra: str) -> list[str]:
    return [
        "instances",
        "--input",
        str(sample_corpus_files[0]),
        "--vocab",
        str(sample_vocab_path),
        "--output",
        str(tmp_path / "out"),
        "--num-shards",
        "1",
        "--dupe-factor",
        "1",
        "--direct_running_mode=in_memory",
        *extra,
    ]


@pytest.mark.parametrize(
    ("typed", "suggested"),
    [
        (["--dupe-factr", "1"], "--dupe-factor"),
        (["--max-seq-lenght=64"], "--max-seq-length"),
        (["--runer", "DirectRunner"], "--runner"),
        (["--direct_num_worker=2"], "--direct_num_workers"),
    ],
)
def test_unknown_options_are_errors_naming_the_nearest(
    tmp_path, capsys, sample_corpus_files, sample_vocab_path, typed, suggested
):
    code = main(_instances_args(tmp_path, sample_corpus_files, sample_vocab_path, *typed))
    err = capsys.readouterr().err
    assert code == 2
    name = typed[0].split("=")[0]
    assert f"unknown option {name} (did you mean {suggested}?)" in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_unknown_options_on_every_beam_command(tmp_path, capsys):
    for argv, name, suggested in (
        (["clean", "--books", "x.txt", "--output", str(tmp_path), "--min-word", "3"], None, None),
        (
            ["clean", "--books", "x.txt", "--output", str(tmp_path), "--dedupe", "near"],
            "--dedupe",
            "--dedup",
        ),
        (
            ["vocab", "--input", "x", "--output", str(tmp_path), "--vocab_size", "5"],
            "--vocab_size",
            "--vocab-size",
        ),
        (["run", "--config", "x.yaml", "--forse", "vocab"], "--forse", "--force"),
        (["stats", "x.tfrecord", "--workrs", "1"], "--workrs", "--workers"),
        (
            ["train", "--data", "x", "--out", "y", "--warmup_steps", "1"],
            "--warmup_steps",
            "--warmup-steps",
        ),
    ):
        code = main(argv)
        err = capsys.readouterr().err
        if name is None:  # an unambiguous prefix is argparse's, and fine: it fails on x.txt
            continue
        assert code == 2, argv
        assert f"unknown option {name} (did you mean {suggested}?)" in err, err


def test_stray_values_and_bad_beam_values_are_errors(
    tmp_path, capsys, sample_corpus_files, sample_vocab_path
):
    code = main(_instances_args(tmp_path, sample_corpus_files, sample_vocab_path, "stray"))
    assert code == 2 and "unexpected argument(s): stray" in capsys.readouterr().err
    code = main(
        _instances_args(tmp_path, sample_corpus_files, sample_vocab_path, "--direct_num_workers=x")
    )
    err = capsys.readouterr().err
    assert code == 2 and "--direct_num_workers" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_beam_options_pass_through(tmp_path, capsys, sample_corpus_files, sample_vocab_path):
    code = main(
        _instances_args(
            tmp_path,
            sample_corpus_files,
            sample_vocab_path,
            "--job_name",
            "bertprep-test",
            "--direct_num_workers=1",
        )
    )
    assert code == 0, capsys.readouterr().err


def _stats(capsys, path) -> dict:
    import json

    assert main(["stats", str(path), "--json", "--workers", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    report["records_per_shard"] = list(report["records_per_shard"].values())
    return report


def test_reference_command_line_matches_native_flags(
    tmp_path, capsys, sample_corpus_files, sample_vocab_path
):
    import json

    corpus = sample_corpus_files[0].parent
    first, rest = sample_corpus_files[0], corpus / "part-00[1-3].txt"
    ref_dir = tmp_path / "ref"
    settings = (
        ("max_seq_length", "64"),
        ("max_predictions_per_seq", "10"),
        ("masked_lm_prob", "0.15"),
        ("dupe_factor", "2"),
        ("short_seq_prob", "0.2"),
    )
    code = main(
        [
            "instances",
            f"--input_file={first},{rest}",
            f"--output_file={ref_dir}/a.tfrecord,{ref_dir}/b.tfrecord,{ref_dir}/c.tfrecord",
            f"--vocab_file={sample_vocab_path}",
            "--do_lower_case=True",
            *(f"--{k}={v}" for k, v in settings),
            "--random_seed=7",
            "--do_whole_word_mask=True",
            "--direct_running_mode=in_memory",
        ]
    )
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    native = tmp_path / "native"
    code = main(
        [
            "instances",
            "--input",
            str(first),
            "--input",
            str(rest),
            "--output",
            str(native),
            "--vocab",
            str(sample_vocab_path),
            "--num-shards",
            "3",
            *(x for k, v in settings for x in (f"--{k.replace('_', '-')}", v)),
            "--seed",
            "7",
            "--whole-word-mask",
            "--direct_running_mode=in_memory",
        ]
    )
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    # The given file names are the shards; manifest.json and rejects.jsonl go beside them.
    assert sorted(p.name for p in ref_dir.iterdir()) == [
        "a.tfrecord",
        "b.tfrecord",
        "c.tfrecord",
        "manifest.json",
        "rejects.jsonl",
    ]
    manifest = json.loads((ref_dir / "manifest.json").read_text())
    assert manifest["config"]["dupe_factor"] == 2 and manifest["config"]["whole_word_mask"]
    assert manifest["config"]["short_seq_prob"] == 0.2 and manifest["config"]["seed"] == 7
    assert manifest["totals"]["input_files"] == 4
    reference, ours = _stats(capsys, ref_dir), _stats(capsys, native)
    assert reference["records"] == ours["records"] > 0
    assert reference == ours  # instance count, lengths, masks, tokens: every statistic
    native_manifest = json.loads((native / "manifest.json").read_text())
    assert [s["content_sha256"] for s in manifest["shards"]] == [
        s["content_sha256"] for s in native_manifest["shards"]
    ]  # the same shards, byte for byte, under the given names
    assert main(["validate", str(ref_dir), "--workers", "1"]) == 0


def test_reference_flag_values_and_conflicts(tmp_path, capsys):
    from pipeline.cli import build_parser
    from pipeline.commands.instances import config_from_args
    from pipeline.jobs.instances import JobConfigError

    def config(*argv: str):
        return config_from_args(build_parser().parse_args(["instances", *argv]))

    base = ["--input_file=a.txt,b*.txt", "--vocab_file=v.txt"]
    c = config(*base, "--output_file=o/x.tfrecord", "--do_lower_case=False")
    assert c.inputs == ["a.txt", "b*.txt"] and c.vocab == "v.txt"
    assert (c.output, c.shard_names, c.num_shards) == ("o", ["x.tfrecord"], 1)
    assert c.do_lower_case is False and c.whole_word_mask is False
    c = config(*base, "--output_file=x.tfrecord", "--do_whole_word_mask")
    assert c.output == "." and c.whole_word_mask and c.do_lower_case
    assert config(*base, "--output", "o").num_shards is None  # follows the data (was 256)
    assert config(*base, "--output", "o", "--nodo_lower_case").do_lower_case is False
    assert config(*base, "--output", "o", "--do_lower_case", "false").do_lower_case is False
    for argv, message in (
        (["--output_file=a/x.tfrecord,b/y.tfrecord"], "must be in one directory"),
        (["--output_file=x.tfrecord", "--output", "o"], "not both"),
        (["--output_file=x.tfrecord,y.tfrecord", "--num-shards", "3"], "names 2 file(s)"),
        ([], "--output (or --output_file)"),
    ):
        with pytest.raises(JobConfigError, match=re.escape(message)):
            config(*base, *argv)
    with pytest.raises(SystemExit):
        config(*base, "--output", "o", "--do_lower_case=maybe")
    assert "expected True or False" in capsys.readouterr().err


def test_input_directory_means_the_files_under_it(
    tmp_path, capsys, sample_corpus_files, sample_vocab_path
):
    import json
    import shutil

    corpus = tmp_path / "corpus"
    (corpus / "more").mkdir(parents=True)
    shutil.copy(sample_corpus_files[0], corpus / sample_corpus_files[0].name)
    shutil.copy(sample_corpus_files[1], corpus / "more" / sample_corpus_files[1].name)
    (corpus / ".hidden.txt").write_text("not\n\ninput\n")
    common = ["--vocab", str(sample_vocab_path), "--num-shards", "2", "--dupe-factor", "1"]
    common += ["--direct_running_mode=in_memory"]
    assert (
        main(["instances", "--input", str(corpus), "--output", str(tmp_path / "d"), *common]) == 0
    )
    files = [str(sample_corpus_files[0]), str(sample_corpus_files[1])]
    argv = ["instances", "--input", files[0], "--input", files[1], "--output", str(tmp_path / "f")]
    assert main([*argv, *common]) == 0
    capsys.readouterr()
    by_dir = json.loads((tmp_path / "d" / "manifest.json").read_text())
    by_files = json.loads((tmp_path / "f" / "manifest.json").read_text())
    assert [f["name"] for f in by_dir["inputs"]] == ["more/part-001.txt", "part-000.txt"]
    for key in ("input_files", "documents", "sentences", "tokens"):  # (keys name the files)
        assert by_dir["totals"][key] == by_files["totals"][key] > 0, key


def test_failed_run_leaves_no_empty_shards(tmp_path, capsys, sample_vocab_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "empty.txt").write_text("")
    out = tmp_path / "out"
    code = main(
        ["instances", "--input", str(corpus), "--vocab", str(sample_vocab_path)]
        + ["--output", str(out), "--num-shards", "8", "--direct_running_mode=in_memory"]
    )
    err = capsys.readouterr().err
    assert code == 2 and "1 input file(s), 0 bytes" in err and "1 empty" in err
    assert not list(out.glob("*.tfrecord*")) and not (out / "manifest.json").exists()
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_run_config_missing_is_a_clear_error(tmp_path, capsys):
    code = main(["run", "--config", str(tmp_path / "missing.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and "missing.yaml: no such file" in err and "Traceback" not in err


def test_help_shows_each_default_once(capsys):
    def help_of(*command: str) -> str:
        with pytest.raises(SystemExit):
            main([*command, "--help"])
        return capsys.readouterr().out

    for command in ("run", "clean", "vocab", "instances", "inspect", "stats", "validate", "train"):
        text = help_of(command)
        assert "(default: None)" not in text, command
        assert text.count("(default: ") == len(re.findall(r"\(default: [^)]*\)", text))
        assert not re.search(r"\(default: [^)]*\)\s*\(default: ", text), command
    run_help = help_of("run")
    assert "(default: the embedded sample, configs/sample.yaml)" in run_help
    assert "(default: [])" not in run_help
    stats_help = help_of("stats")
    assert "(default: manifest's)" in stats_help
    vocab_help = " ".join(help_of("vocab").split())
    assert "(default: True)" not in vocab_help
    assert "--lowercase uncased" in vocab_help and "(the default)" in vocab_help
    instances_help = " ".join(help_of("instances").split())
    assert "--vocab, --vocab_file VOCAB WordPiece vocab.txt (one token per line) --output" in (
        instances_help
    )


def test_vocab_casing_switches_exclude_each_other(capsys):
    with pytest.raises(SystemExit) as e:
        main(["vocab", "--input", "x", "--output", "y", "--lowercase", "--cased"])
    assert e.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def _user_error_cases(tmp_path, sample_corpus_files, sample_vocab_path):
    missing = str(tmp_path / "nothing-*.txt")
    bad_vocab = tmp_path / "v.txt"
    bad_vocab.write_text("[PAD]\n")
    return [
        (["run", "--set", "phases.0.dupe_factr=2"], "dupe_factr: unknown key"),
        (["clean", "--books", missing, "--output", str(tmp_path / "c")], "nothing-*.txt"),
        (["vocab", "--input", missing, "--output", str(tmp_path / "v")], "nothing-*.txt"),
        (
            [
                "instances",
                "--input",
                str(sample_corpus_files[0]),
                "--vocab",
                str(bad_vocab),
                "--output",
                str(tmp_path / "i"),
            ],
            "lacks required special token",
        ),
        (["inspect", missing], "nothing-*.txt"),
        (["stats", missing], "nothing-*.txt"),
        (["validate", str(sample_corpus_files[0])], "not a TFRecord file"),
    ]


def test_user_errors_end_every_command_the_same_way(
    tmp_path, capsys, sample_corpus_files, sample_vocab_path
):
    """A UserError from any subcommand is caught once, in cli.main: one line
    ``bertprep COMMAND: error: ...`` on stderr, exit status 2, no traceback."""
    for argv, text in _user_error_cases(tmp_path, sample_corpus_files, sample_vocab_path):
        code = main(
            [*argv, "--direct_running_mode=in_memory"]
            if argv[0] in ("run", "clean", "vocab", "instances")
            else argv
        )
        err = capsys.readouterr().err
        errors = [line for line in err.splitlines() if ": error: " in line]
        assert code == 2, (argv, err)
        assert len(errors) == 1 and errors[0].startswith(f"bertprep {argv[0]}: error: "), err
        assert text in errors[0], (argv, err)
        assert "Traceback" not in err, err


def test_every_user_facing_error_derives_from_user_error():
    from pipeline.files.input_files import NoInputFilesError
    from pipeline.jobs.clean import CleanConfigError, CleanReconciliationError
    from pipeline.jobs.instances import JobConfigError, NoInstancesError, ReconciliationError
    from pipeline.jobs.run import EmptyTokensError
    from pipeline.jobs.run_config import ConfigError
    from pipeline.jobs.vocab import VocabJobError
    from pipeline.runtime.beam_options import BeamOptionError, UnsafeRunnerModeError
    from shards.files import ShardPathError
    from tokenizer.vocab import VocabError
    from transforms.errors import UserError
    from transforms.tfrecord import CorruptRecordError

    for kind in (
        BeamOptionError,
        UnsafeRunnerModeError,
        CleanConfigError,
        NoInputFilesError,
        JobConfigError,
        NoInstancesError,
        ConfigError,
        EmptyTokensError,
        VocabJobError,
        ShardPathError,
        VocabError,
        CorruptRecordError,
    ):
        assert issubclass(kind, UserError), kind
    # A runner that lost records is not the user's to fix: it keeps its traceback.
    for kind in (CleanReconciliationError, ReconciliationError):
        assert not issubclass(kind, UserError), kind


def test_a_command_imports_only_its_own_module_and_parses_as_with_every_command():
    """``bertprep stats`` (say) does not import the instances job (numba, the shard writer), and
    each command's options, defaults and help are those of the whole command line."""
    import subprocess
    import sys

    from pipeline.cli import _subcommand_parser, build_parser
    from pipeline.commands import SUMMARIES

    probe = (
        "import sys; from pipeline.cli import build_parser; build_parser('stats'); "
        "print(sorted(m for m in ('pipeline.commands.instances', 'pipeline.jobs.instances', "
        "'numba') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"

    def described(parser):
        return [
            (a.dest, a.option_strings, a.default, a.help, a.choices) for a in parser._actions
        ] + [parser.format_help()]

    whole = build_parser()
    for name in SUMMARIES:
        alone = _subcommand_parser(build_parser(name), name)
        assert described(alone) == described(_subcommand_parser(whole, name)), name
    listed = build_parser("clean").format_help()
    assert all(f"    {name}" in listed for name in SUMMARIES)


def test_a_misspelt_command_is_refused_naming_the_commands(capsys):
    with pytest.raises(SystemExit) as e:
        main(["clen", "x"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'clen'" in err and "'instances'" in err
