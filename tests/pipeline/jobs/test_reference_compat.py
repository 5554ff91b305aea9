"""``bertprep instances --compat reference``: the whole job against google-research/bert's script
run as its own command line (bert-tensorflow wheel), file by file; invocations in parallel;
refusals; failures that leave nothing behind."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli import main
from tests.reference_script import vocab_path
from transforms.example_encoding import decode_example
from transforms.tfrecord import iter_records

IN_MEMORY = "--direct_running_mode=in_memory"


def decoded(path: Path) -> list[dict]:
    with path.open("rb") as f:
        return [decode_example(r) for r in iter_records(f)]


def run_reference(inputs: list[Path], outputs: list[Path], *flags: str, vocab=None) -> None:
    """The reference script itself, as MLPerf runs it (one process)."""
    from benchmarks.instances_benchmark import reference_package

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(reference_package()))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bert.create_pretraining_data",
            f"--input_file={','.join(map(str, inputs))}",
            f"--output_file={','.join(map(str, outputs))}",
            f"--vocab_file={vocab or vocab_path()}",
            "--random_seed=12345",
            *flags,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def books(tmp_path_factory) -> list[Path]:
    """~0.6 MB of real books in BERT format (NLTK Punkt sentences, ~30 per document), 3 files:
    the first ~200 KB of documents of three books."""
    from benchmarks.books_corpus import build_corpus
    from tests.conftest import require_corpora

    require_corpora("books")
    root = tmp_path_factory.mktemp("books")
    files = sorted(build_corpus(root / "all", 1_200_000))
    assert len(files) >= 3
    parts = [root / f"part-{i}.txt" for i in range(3)]
    for book, part in zip(files, parts, strict=False):
        documents = book.read_bytes().split(b"\n\n")
        kept, size = [], 0
        while size < 200_000:
            kept.append(documents[len(kept)])
            size += len(kept[-1]) + 2
        part.write_bytes(b"\n\n".join(kept) + b"\n")
    return parts


@pytest.mark.slow
@pytest.mark.parametrize(
    ("seq", "predictions", "cased"), [(128, 20, False), (512, 80, False), (128, 20, True)]
)
def test_reference_command_line_writes_the_references_records(
    books, tmp_path, seq, predictions, cased
):
    """The reference's own command line, one invocation over three files into two output files:
    every record decodes to the same values in the same file and order (uncased, and cased with
    Google's cased vocab)."""
    vocab = vocab_path().with_name("bert-base-cased-vocab.txt") if cased else vocab_path()
    flags = [
        f"--max_seq_length={seq}",
        f"--max_predictions_per_seq={predictions}",
        "--dupe_factor=2",
        f"--do_lower_case={not cased}",
    ]
    theirs = [tmp_path / "ref" / n for n in ("a.tfrecord", "b.tfrecord")]
    theirs[0].parent.mkdir()
    run_reference(books, theirs, *flags, vocab=vocab)
    ours = [tmp_path / "ours" / p.name for p in theirs]
    code = main(
        [
            "instances",
            "--compat",
            "reference",
            f"--input_file={','.join(map(str, books))}",
            f"--output_file={','.join(map(str, ours))}",
            f"--vocab_file={vocab}",
            "--random_seed=12345",
            *flags,
        ]
    )
    assert code == 0
    total = 0
    for a, b in zip(ours, theirs, strict=True):
        mine, reference = decoded(a), decoded(b)
        assert len(mine) == len(reference) > 100
        for g, (x, y) in enumerate(zip(mine, reference, strict=True)):
            assert x == y, f"{a.name} record {g}"
        total += len(mine)
    manifest = json.loads((tmp_path / "ours" / "manifest.json").read_text())
    assert manifest["compat"] == "reference" and manifest["totals"]["instances"] == total
    for shard in manifest["shards"]:
        data = (tmp_path / "ours" / shard["file"]).read_bytes()
        assert shard["content_sha256"] == hashlib.sha256(data).hexdigest()
    assert main(["validate", str(tmp_path / "ours")]) == 0


@pytest.mark.slow
def test_per_file_invocations_run_in_parallel_and_equal_one_reference_run_each(books, tmp_path):
    """MLPerf's layout: one reference run per part file, each with the same seed, here three
    invocations on two worker processes, two output files each."""
    flags = ["--max_seq_length=128", "--max_predictions_per_seq=20", "--dupe_factor=2"]
    out = tmp_path / "ours"
    code = main(
        [
            "instances",
            "--compat",
            "reference",
            "--invocations",
            "per-file",
            "--num-shards",
            "2",
            "--input",
            str(books[0].parent / "part-*.txt"),
            "--vocab",
            str(vocab_path()),
            "--output",
            str(out),
            *flags,
            "--direct_running_mode=multi_processing",
            "--direct_num_workers=2",
        ]
    )
    assert code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert [i["name"] for i in manifest["invocations"]] == ["part-0", "part-1", "part-2"]
    for part in books:
        names = [f"{part.stem}-0000{k}-of-00002.tfrecord" for k in range(2)]
        theirs = [tmp_path / "ref" / n for n in names]
        theirs[0].parent.mkdir(exist_ok=True)
        run_reference([part], theirs, *flags)
        for name, reference in zip(names, theirs, strict=True):
            assert decoded(out / name) == decoded(reference), name


def compat(tmp_path: Path, inputs: list[Path], vocab: Path, *extra: str, output=None) -> int:
    return main(
        [
            "instances",
            "--compat",
            "reference",
            *[a for p in inputs for a in ("--input", str(p))],
            "--vocab",
            str(vocab),
            "--output",
            str(output or tmp_path / "out"),
            "--dupe-factor",
            "2",
            *extra,
        ]
    )


def test_same_files_for_any_runner_mode_and_output_directory(
    tmp_path, sample_corpus_files, sample_vocab_path
):
    sums = []
    for i, mode in enumerate(
        ["--direct_running_mode=in_memory", "--direct_running_mode=multi_processing"]
    ):
        out = tmp_path / f"run{i}" / "deeper"
        assert compat(tmp_path, sample_corpus_files, sample_vocab_path, mode, output=out) == 0
        manifest = json.loads((out / "manifest.json").read_text())
        sums.append([(s["file"], s["content_sha256"]) for s in manifest["shards"]])
    assert sums[0] == sums[1] and sums[0][0][0] == "instances.tfrecord"


def test_records_read_back_through_tf_data(tmp_path, sample_corpus_files, sample_vocab_path):
    from tests.pipeline.shard_reading import read_shards

    assert compat(tmp_path, sample_corpus_files, sample_vocab_path, IN_MEMORY) == 0
    files = [tmp_path / "out" / "instances.tfrecord"]
    parsed = read_shards(files, 128, 20)
    raw = decoded(files[0])
    assert len(raw) == len(parsed["input_ids"]) > 50
    assert parsed["input_ids"][7].tolist() == raw[7]["input_ids"]
    assert parsed["masked_lm_weights"][7].tolist() == raw[7]["masked_lm_weights"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--masking", "dynamic"], "--masking 'dynamic': google-research/bert's script has no"),
        (["--compression", "gzip"], "--compression 'gzip'"),
        (["--bucket-size", "50"], "--bucket-size 50"),
        (["--input-mode", "full-sentences"], "--input-mode"),
        (["--max-seq-length", "4"], "needs at least 5"),
    ],
)
def test_options_the_reference_lacks_are_refused(
    tmp_path, capsys, sample_corpus_files, sample_vocab_path, flags, message
):
    assert compat(tmp_path, sample_corpus_files, sample_vocab_path, *flags) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_output_file_list_with_per_file_invocations_is_refused(tmp_path, capsys, sample_vocab_path):
    code = main(
        [
            "instances",
            "--compat",
            "reference",
            "--invocations",
            "per-file",
            "--input_file=a.txt",
            f"--output_file={tmp_path}/x.tfrecord",
            "--vocab",
            str(sample_vocab_path),
        ]
    )
    assert code == 2
    assert "--output_file names one invocation's files" in capsys.readouterr().err


def test_same_file_names_in_two_directories_are_refused(tmp_path, capsys, sample_vocab_path):
    for d in ("x", "y"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "part.txt").write_text("A sentence here.\nAnd another.\n")
    code = compat(
        tmp_path, [tmp_path / "x", tmp_path / "y"], sample_vocab_path, "--invocations", "per-file"
    )
    assert code == 2
    assert "would both write part.tfrecord" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"good line.\nbad \xff byte\n", "line 2: invalid UTF-8"),
        (b"\n\n   \n", "produced zero instances"),
    ],
)
def test_bad_input_fails_clearly_keeping_only_finished_invocations(
    tmp_path, capsys, sample_corpus_files, sample_vocab_path, content, message
):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content)
    code = compat(
        tmp_path,
        [*sample_corpus_files, bad],
        sample_vocab_path,
        "--invocations",
        "per-file",
        IN_MEMORY,
    )
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    out = tmp_path / "out"
    left = sorted(p.name for p in out.iterdir() if p.name != ".resume-compat")
    finished = sorted(p.stem for p in (out / ".resume-compat").glob("*.json"))
    # only invocations that finished (each with its marker) keep their files; no partials
    assert left == [f"{name}.tfrecord" for name in finished]
    assert "bad" not in finished


def test_per_input_invocations_group_patterns(tmp_path, sample_corpus_files, sample_vocab_path):
    code = compat(
        tmp_path,
        [sample_corpus_files[0], sample_corpus_files[1]],
        sample_vocab_path,
        "--invocations",
        "per-input",
        IN_MEMORY,
    )
    assert code == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert [(i["name"], len(i["inputs"])) for i in manifest["invocations"]] == [
        ("instances-0", 1),
        ("instances-1", 1),
    ]


def test_a_bucket_gives_the_same_files_as_local_disk(
    tmp_path, sample_corpus_files, sample_vocab_path
):
    """Inputs, vocab and output on gs:// (an emulated bucket): the same files, byte for byte."""
    pytest.importorskip("gcp_storage_emulator")
    from benchmarks.gcs_emulator import GcsEmulator
    from tests.pipeline.cloud_runs import bertprep

    flags = ["--compat", "reference", "--invocations", "per-file", "--dupe-factor", "2"]
    local = tmp_path / "local"
    assert (
        compat(
            tmp_path,
            sample_corpus_files,
            sample_vocab_path,
            "--invocations",
            "per-file",
            output=local,
        )
        == 0
    )
    with GcsEmulator(tmp_path / "emulator") as emulator:
        emulator.create_bucket("corpus")
        for f in [*sample_corpus_files, sample_vocab_path]:
            emulator.upload(f, f"gs://corpus/in/{f.name}")
        done = bertprep(
            "instances",
            *flags,
            "--input",
            "gs://corpus/in/part-*.txt",
            "--vocab",
            f"gs://corpus/in/{sample_vocab_path.name}",
            "--output",
            "gs://corpus/out",
            env=emulator.env(),
        )
        assert done.returncode == 0, done.stderr[-3000:]
        emulator.download_prefix("gs://corpus/out", tmp_path / "remote")
    names = sorted(p.name for p in local.glob("*.tfrecord"))
    assert names == [f"{f.stem}.tfrecord" for f in sample_corpus_files]
    for name in names:
        assert (tmp_path / "remote" / name).read_bytes() == (local / name).read_bytes(), name
    remote = json.loads((tmp_path / "remote" / "manifest.json").read_text())
    assert [s["content_sha256"] for s in remote["shards"]] == [
        s["content_sha256"] for s in json.loads((local / "manifest.json").read_text())["shards"]
    ]


@pytest.mark.slow
def test_a_glob_is_read_in_the_references_order(tmp_path, sample_corpus_files, sample_vocab_path):
    """``tf.gfile.Glob`` lists a local directory in the filesystem's order, not sorted; the
    documents' order decides the whole random stream, so the glob must be read the same way."""
    import glob

    lines = b"".join(f.read_bytes() for f in sample_corpus_files).split(b"\n\n")
    parts = tmp_path / "parts"
    parts.mkdir()
    names = [f"{c}{i}.txt" for i, c in enumerate("qwertyuiopasdfgh")]
    for i, name in enumerate(names):
        (parts / name).write_bytes(b"\n\n".join(lines[i :: len(names)]) + b"\n\n")
    listed = glob.glob(str(parts / "*.txt"))
    assert listed != sorted(listed), "the filesystem happens to list these sorted"
    flags = ["--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=2"]
    reference = tmp_path / "ref.tfrecord"
    run_reference([parts / "*.txt"], [reference], *flags, vocab=sample_vocab_path)
    ours = tmp_path / "ours" / "ref.tfrecord"
    code = main(
        [
            "instances",
            "--compat",
            "reference",
            f"--input_file={parts / '*.txt'}",
            f"--output_file={ours}",
            f"--vocab_file={sample_vocab_path}",
            *flags,
            IN_MEMORY,
        ]
    )
    assert code == 0
    assert decoded(ours) == decoded(reference)


def test_file_names_with_glob_characters_are_exact(
    tmp_path, sample_corpus_files, sample_vocab_path
):
    """An input ``data[1].txt`` writes ``data[1].tfrecord``: checked, listed and replaced as
    that exact name (not as a pattern that matches ``data1.tfrecord``)."""
    src = tmp_path / "in"
    src.mkdir()
    (src / "data[1].txt").write_bytes(sample_corpus_files[0].read_bytes())
    out = tmp_path / "out"
    out.mkdir()
    (out / "data1.tfrecord").write_bytes(b"someone else's file")
    for _ in range(2):  # the second run replaces the first's file
        code = compat(tmp_path, [src], sample_vocab_path, "--invocations", "per-file", IN_MEMORY)
        assert code == 0
    assert (out / "data1.tfrecord").read_bytes() == b"someone else's file"
    manifest = json.loads((out / "manifest.json").read_text())
    assert [s["file"] for s in manifest["shards"]] == ["data[1].tfrecord"]
    (out / "data1.tfrecord").unlink()
    assert main(["validate", str(out)]) == 0


def test_an_output_directory_with_another_tools_manifest_is_refused(
    tmp_path, capsys, sample_corpus_files, sample_vocab_path
):
    out = tmp_path / "shared"
    out.mkdir()
    (out / "manifest.json").write_text('{"format": "someone-else/1"}')
    (out / "other.partial-1234").write_text("another job's file in progress")
    code = main(
        [
            "instances",
            "--compat",
            "reference",
            f"--input_file={sample_corpus_files[0]}",
            f"--output_file={out / 'a.tfrecord'}",
            f"--vocab_file={sample_vocab_path}",
        ]
    )
    assert code == 2
    assert "is not a bertprep instances manifest" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "other.partial-1234"]


def _parts(tmp_path: Path, sample_corpus_files, count: int) -> Path:
    """``count`` input files, each the whole sample corpus (so each invocation takes a while)."""
    data = b"".join(f.read_bytes() for f in sample_corpus_files)
    parts = tmp_path / "parts"
    parts.mkdir(exist_ok=True)
    for i in range(count):
        (parts / f"part-{i}.txt").write_bytes(data)
    return parts


def _shards(out: Path) -> list[tuple[str, str]]:
    manifest = json.loads((out / "manifest.json").read_text())
    return [(s["file"], s["content_sha256"]) for s in manifest["shards"]]


def test_a_killed_job_resumes_with_the_invocations_it_finished(
    tmp_path, sample_corpus_files, sample_vocab_path
):
    """SIGKILL in the middle of a per-file job: the finished invocations keep their files and
    markers, the rerun runs only the rest, and the result equals an uninterrupted run's."""
    import signal
    import time

    from tests.pipeline.cloud_runs import bertprep

    parts = _parts(tmp_path, sample_corpus_files, 8)
    args = [
        "instances", "--compat", "reference", "--invocations", "per-file",
        "--input", str(parts / "*.txt"), "--vocab", str(sample_vocab_path),
        "--dupe-factor", "20", IN_MEMORY,
    ]  # fmt: skip
    clean = tmp_path / "clean"
    assert bertprep(*args, "--output", str(clean)).returncode == 0
    out = tmp_path / "killed"
    job = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", *args, "--output", str(out)],
        cwd=Path(__file__).resolve().parents[3],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    markers = out / ".resume-compat"
    deadline = time.monotonic() + 120
    while not (markers.exists() and any(markers.glob("*.json"))):
        assert job.poll() is None and time.monotonic() < deadline, "the job ended before a kill"
        time.sleep(0.02)
    os.killpg(job.pid, signal.SIGKILL)
    job.wait()
    assert not (out / "manifest.json").exists()
    kept = len(list(markers.glob("*.json")))
    assert 1 <= kept < 8
    again = bertprep(*args, "--output", str(out))
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"resuming: {kept} of 8 invocation(s) already written, kept" in again.stderr
    assert _shards(out) == _shards(clean)
    assert not markers.exists()
    assert not [p for p in out.iterdir() if ".partial-" in p.name]


def test_markers_of_other_settings_are_not_trusted(
    tmp_path, sample_corpus_files, sample_vocab_path
):
    parts = _parts(tmp_path, sample_corpus_files, 2)
    out = tmp_path / "out"
    base = ["--invocations", "per-file", IN_MEMORY]
    assert compat(tmp_path, [parts], sample_vocab_path, *base, output=out) == 0
    first = _shards(out)
    # a run killed after its invocations finished leaves markers and no manifest
    marker_dir = out / ".resume-compat"
    marker_dir.mkdir()
    manifest = json.loads((out / "manifest.json").read_text())
    for invocation in manifest["invocations"]:
        (marker_dir / f"{invocation['name']}.json").write_text(
            json.dumps({"fingerprint": "of another seed", "result": invocation})
        )
    (out / "manifest.json").unlink()
    assert compat(tmp_path, [parts], sample_vocab_path, *base, "--seed", "7", output=out) == 0
    assert _shards(out) != first and not marker_dir.exists()
