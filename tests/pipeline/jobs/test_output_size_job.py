"""Before the phases run: the bytes they will write, checked against the free space of a real
(small, tmpfs) filesystem, and the shard count that follows the data; measured against real runs
on the sample corpus at seq128 and seq512."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.jobs.instances import (
    InstancesJobConfig,
    JobConfigError,
    run_instances_job,
)
from pipeline.jobs.run import run_all
from pipeline.jobs.run_config import load_run_config
from pipeline.runtime.beam_options import make_pipeline_options
from transforms.output_size import MIN_SHARDS, SPILL_KEY_BYTES

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "configs" / "sample.yaml"
WITHIN = (0.5, 2.0)
"""The stated accuracy of the estimate: between half and twice what a run writes."""
SEQ = {128: 20, 512: 80}


def options():
    return make_pipeline_options(["--direct_running_mode=in_memory", "--direct_num_workers=1"])


def job(tmp_path: Path, corpus: list[Path], vocab: Path, out: Path, **settings):
    config = InstancesJobConfig(
        inputs=[str(corpus[0].parent / "*.txt")], vocab=str(vocab), output=str(out), **settings
    )
    messages: list[str] = []
    return config, messages, lambda: run_instances_job(config, options(), messages.append)


@contextmanager
def small_filesystem(path: Path, size: str):
    """A tmpfs of ``size`` mounted at ``path`` (root only; the test skips elsewhere)."""
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


class PeakUsage:
    """The most bytes used on the filesystem of ``path`` while running, sampled every ms."""

    def __init__(self, path: Path) -> None:
        self._path, self.peak, self._stop = path, 0, threading.Event()
        self._base = shutil.disk_usage(path).used
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, shutil.disk_usage(self._path).used - self._base)
            time.sleep(0.001)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def shard_bytes(manifest: dict) -> int:
    return sum(s["bytes"] for s in manifest["shards"])


def test_run_phases_estimate_their_bytes_and_default_shards_follow_the_data(tmp_path):
    """The sample config, with seq128's num_shards dropped: its train side gets the data's
    count (old default: 256), every explicit count stays exact, and every estimate is within
    the stated factor of the shard bytes written and of everything written (the spills hold
    each framed record and its 8-byte key: shard bytes + 8 per record, uncompressed)."""
    config = load_run_config(SAMPLE, [f"output={tmp_path / 'out'}", "phases.0.num_shards=null"])
    assert config.phases[0].num_shards is None
    lines: list[str] = []
    run_all(config, options, progress=lines.append)
    out = tmp_path / "out"
    manifests = {
        str(p.parent.relative_to(out)): json.loads(p.read_text())
        for p in out.glob("seq*/*/manifest.json")
    }
    assert set(manifests) == {"seq128/train", "seq128/eval", "seq512/train", "seq512/eval"}
    for name, m in manifests.items():
        written = shard_bytes(m)
        total = 2 * written + SPILL_KEY_BYTES * m["totals"]["instances"]
        est = m["estimate"]
        for expected, actual in ((est["shard_bytes"], written), (est["total_bytes"], total)):
            assert WITHIN[0] <= expected / actual <= WITHIN[1], (name, expected, actual)
        assert WITHIN[0] <= est["instances"] / m["totals"]["instances"] <= WITHIN[1], name
    train = manifests["seq128/train"]
    assert len(train["shards"]) == MIN_SHARDS == train["config"]["num_shards"]
    assert min(s["records"] for s in train["shards"]) > 0
    assert train["num_shards_reason"].startswith("16 shards: ~1.5 MiB expected ÷ 128 MiB")
    assert any(train["num_shards_reason"] in line for line in lines)
    assert [
        len(manifests[n]["shards"]) for n in ("seq128/eval", "seq512/train", "seq512/eval")
    ] == [
        1,
        2,
        1,
    ]
    assert manifests["seq512/train"]["num_shards_reason"] == "2 shards (explicit)"


@pytest.mark.parametrize("seq,compression", [(128, "none"), (512, "none"), (128, "gzip")])
def test_estimate_is_within_a_factor_of_two_of_the_peak_bytes_written(
    tmp_path, seq, compression, sample_corpus_files, sample_vocab_path
):
    """`bertprep instances` on the sample text (dupe 10): the peak bytes on a filesystem of its
    own (token spill, task spills and shards, before the spills go) against the estimate."""
    with small_filesystem(tmp_path / "fs", "256m") as fs:
        _, messages, run = job(
            tmp_path,
            sample_corpus_files,
            sample_vocab_path,
            fs / "out",
            max_seq_length=seq,
            max_predictions_per_seq=SEQ[seq],
            num_shards=4,
            compression=compression,
        )
        with PeakUsage(fs) as usage:
            manifest = run()
    estimate = manifest["estimate"]
    assert WITHIN[0] <= estimate["total_bytes"] / usage.peak <= WITHIN[1], (estimate, usage.peak)
    assert WITHIN[0] <= estimate["shard_bytes"] / shard_bytes(manifest) <= WITHIN[1]
    assert not any(m.startswith("warning") for m in messages)


def test_too_little_free_space_warns_naming_path_estimate_and_free_bytes(
    tmp_path, sample_corpus_files, sample_vocab_path
):
    """Less free space than the estimate (but not hopelessly less): a warning line up front; the
    run goes on (and here, sure enough, runs out of space)."""
    with small_filesystem(tmp_path / "fs", "1500k") as fs:
        out = fs / "out"
        _, messages, run = job(tmp_path, sample_corpus_files, sample_vocab_path, out, dupe_factor=2)
        with pytest.raises(Exception, match="No space left on device"):
            run()
    warnings = [m for m in messages if m.startswith("warning:")]
    assert len(warnings) == 1, messages
    assert str(out) in warnings[0] and "bytes free" in warnings[0]
    assert "expected to write ~1,8" in warnings[0] and "has 1,536,000 bytes free" in warnings[0]


def test_hopelessly_little_free_space_is_refused_before_output_is_touched(
    tmp_path, sample_corpus_files, sample_vocab_path
):
    with small_filesystem(tmp_path / "fs", "1m") as fs:
        out = fs / "out"
        out.mkdir()
        (out / "manifest.json").write_text("{}")  # an earlier run's output stays
        _, _, run = job(tmp_path, sample_corpus_files, sample_vocab_path, out)
        with pytest.raises(JobConfigError, match=r"^not enough disk space: .*bytes free"):
            run()
        assert [p.name for p in out.iterdir()] == ["manifest.json"]


def test_instances_default_shards_follow_the_data_and_say_why(
    tmp_path, capsys, sample_corpus_files, sample_vocab_path
):
    base = [
        "instances",
        "--input",
        str(sample_corpus_files[0].parent / "*.txt"),
        "--vocab",
        str(sample_vocab_path),
        "--direct_running_mode=in_memory",
    ]
    assert main([*base, "--output", str(tmp_path / "auto")]) == 0
    err = capsys.readouterr().err
    manifest = json.loads((tmp_path / "auto" / "manifest.json").read_text())
    assert len(manifest["shards"]) == 16 and min(s["records"] for s in manifest["shards"]) > 0
    reason = manifest["num_shards_reason"]
    assert reason.startswith("16 shards: ~5.6 MiB expected ÷ 128 MiB target = 1")
    assert f"shards                {reason}" in err  # the summary says why
    assert main([*base, "--output", str(tmp_path / "exact"), "--num-shards", "3"]) == 0
    assert "shards                3 shards (explicit)" in capsys.readouterr().err
    assert len(list((tmp_path / "exact").glob("instances-*.tfrecord"))) == 3


def test_a_tiny_input_gets_fewer_shards_and_none_empty(tmp_path, sample_vocab_path):
    lines = Path(sample_vocab_path).read_text().split()[200:260]
    text = "\n\n".join(
        "\n".join(" ".join(lines[(d * 7 + s) % 50 : (d * 7 + s) % 50 + 6]) for s in range(3))
        for d in range(4)
    )
    (tmp_path / "tiny.txt").write_text(text + "\n")
    config = InstancesJobConfig(
        inputs=[str(tmp_path / "tiny.txt")],
        vocab=str(sample_vocab_path),
        output=str(tmp_path / "out"),
        dupe_factor=1,
    )
    manifest = run_instances_job(config, options(), lambda m: None)
    records = [s["records"] for s in manifest["shards"]]
    assert 1 <= len(records) < MIN_SHARDS and min(records) > 0, records
    assert "instances expected, at least 2 per shard" in manifest["num_shards_reason"]
