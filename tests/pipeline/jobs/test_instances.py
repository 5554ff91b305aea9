"""The instances job end to end on real Beam runners, read back with tf.data."""

from __future__ import annotations

import bz2
import gzip
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pipeline.jobs.instances import (
    InstancesJobConfig,
    JobConfigError,
    NoInstancesError,
    run_instances_job,
    run_instances_jobs,
)
from pipeline.runtime.beam_options import make_pipeline_options
from tests.pipeline.shard_reading import read_shards
from tokenizer.vocab import Vocab


def run_job(
    tmp_path: Path,
    inputs: list[str],
    vocab: Path,
    mode: str = "in_memory",
    workers: int = 1,
    name: str = "out",
    **overrides,
) -> tuple[dict, Path]:
    settings = dict(num_shards=4, dupe_factor=2, seed=7)
    settings.update(overrides)
    out = tmp_path / name
    config = InstancesJobConfig(inputs=inputs, vocab=str(vocab), output=str(out), **settings)
    options = make_pipeline_options(
        [f"--direct_running_mode={mode}", f"--direct_num_workers={workers}"]
    )
    return run_instances_job(config, options, progress=lambda m: None), out


def shard_files(out: Path) -> list[Path]:
    return sorted(out.glob("instances-*-of-*.tfrecord*"))


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory, sample_corpus_files, sample_vocab_path):
    tmp = tmp_path_factory.mktemp("sample")
    manifest, out = run_job(
        tmp, [str(sample_corpus_files[0].parent / "*.txt")], sample_vocab_path, num_shards=5
    )
    return manifest, out


def test_shards_round_trip_through_tf_data(sample_run, sample_vocab_path):
    manifest, out = sample_run
    files = shard_files(out)
    assert [f.name for f in files] == [f"instances-{i:05d}-of-00005.tfrecord" for i in range(5)]
    data = read_shards(files, 128, 20)
    n = len(data["input_ids"])
    assert n == manifest["totals"]["instances"] > 0
    assert [s["records"] for s in manifest["shards"]] == [
        len(read_shards([f], 128, 20)["input_ids"]) for f in files
    ]
    vocab = Vocab.from_file(str(sample_vocab_path))
    lengths = data["input_mask"].sum(1)
    for i in range(n):
        length = int(lengths[i])
        ids = data["input_ids"][i]
        assert ids[0] == vocab.cls_id and ids[length - 1] == vocab.sep_id
        assert (ids[length:] == 0).all() and (data["input_mask"][i, :length] == 1).all()
        seps = np.nonzero(ids[:length] == vocab.sep_id)[0]
        assert len(seps) == 2
        assert (data["segment_ids"][i, : seps[0] + 1] == 0).all()
        assert (data["segment_ids"][i, seps[0] + 1 : length] == 1).all()
        k = int(data["masked_lm_weights"][i].sum())
        assert k == min(20, max(1, round(length * 0.15)))
        pos = data["masked_lm_positions"][i, :k]
        assert (np.diff(pos) > 0).all() and (pos > 0).all() and (pos < length).all()
        assert (data["masked_lm_positions"][i, k:] == 0).all()
        assert (data["masked_lm_ids"][i, k:] == 0).all()
        assert not np.isin(data["masked_lm_ids"][i, :k], [vocab.cls_id, vocab.sep_id, 0]).any()
    labels = data["next_sentence_labels"][:, 0]
    assert int((labels == 0).sum()) == manifest["totals"]["is_next"]


def test_manifest_records_config_inputs_shards_and_totals(sample_run, sample_vocab_path):
    manifest, out = sample_run
    on_disk = json.loads((out / "manifest.json").read_text())
    assert on_disk == json.loads(json.dumps(manifest))
    assert manifest["config"]["dupe_factor"] == 2 and manifest["config"]["seed"] == 7
    assert manifest["vocab"]["sha256"] == Vocab.from_file(str(sample_vocab_path)).sha256
    assert manifest["tokenizer"]["do_lower_case"] is True
    assert len(manifest["inputs"]) == 4 and all(i["size_bytes"] > 0 for i in manifest["inputs"])
    sizes = [s["records"] for s in manifest["shards"]]
    assert max(sizes) - min(sizes) <= 1
    t = manifest["totals"]
    assert t["documents"] > 100 and t["sentences"] > t["documents"] and t["tokens"] > t["sentences"]
    assert 0.3 < t["is_next_ratio"] < 0.7
    assert (out / "rejects.jsonl").exists()


def test_output_identical_in_memory_and_multi_process(
    tmp_path, sample_corpus_files, sample_vocab_path
):
    inputs = [str(p) for p in sample_corpus_files]
    a, out_a = run_job(tmp_path, inputs, sample_vocab_path, name="a", bucket_size=40)
    b, out_b = run_job(
        tmp_path,
        inputs,
        sample_vocab_path,
        mode="multi_processing",
        workers=2,
        name="b",
        bucket_size=40,
    )
    assert a["totals"]["buckets"] > 1
    assert a["shards"] == b["shards"]
    for fa, fb in zip(shard_files(out_a), shard_files(out_b), strict=True):
        assert fa.read_bytes() == fb.read_bytes()


def test_shards_larger_than_the_writer_buffer_are_written_in_passes_with_the_same_bytes(
    tmp_path, sample_run, sample_corpus_files, sample_vocab_path, monkeypatch
):
    import pipeline.files.shard_writer as shard_writer

    monkeypatch.setattr(shard_writer, "DEFAULT_BUFFER_BYTES", 20_000)  # ~15 passes per shard
    manifest, out = run_job(
        tmp_path, [str(sample_corpus_files[0].parent / "*.txt")], sample_vocab_path, num_shards=5
    )
    assert manifest["shards"] == sample_run[0]["shards"]


def test_spill_group_files_give_the_same_shards(tmp_path, sample_corpus_files, sample_vocab_path):
    inputs = [str(sample_corpus_files[0].parent / "*.txt")]
    runs = {
        (groups, mb): run_job(
            tmp_path,
            inputs,
            sample_vocab_path,
            name=f"{groups}-{mb}",
            num_shards=5,
            bucket_size=8,
            spill_groups=groups,
            spill_group_mb=mb,
        )
        for groups, mb in (("never", 256.0), ("always", 256.0), ("always", 0.02))
    }
    baseline = runs["never", 256.0][0]
    assert baseline["counts"]["buckets"] >= 4
    for (groups, mb), (manifest, out) in runs.items():
        assert manifest["shards"] == baseline["shards"], (groups, mb)
        assert not (out / ".spill").exists()


def test_jobs_sharing_stages_write_what_each_writes_alone(
    tmp_path, sample_run, sample_corpus_files, sample_vocab_path
):
    """Three jobs in one pipeline (``run_instances_jobs``: shared instance-creation and
    shard-writing stages), one of them with spill group files and one with a bad input line:
    each job's shards, counts, rejects and manifest totals are those of the job run alone."""
    corpus = str(sample_corpus_files[0].parent / "*.txt")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"A fine first line here.\nBroken \xff bytes.\nAnd a last line.\n")
    settings = {
        "a": dict(inputs=[corpus], num_shards=5),
        "b": dict(
            inputs=[corpus],
            num_shards=3,
            max_seq_length=64,
            dupe_factor=1,
            max_predictions_per_seq=10,
            spill_groups="always",
            bucket_size=8,
        ),
        "c": dict(inputs=[corpus, str(bad)], num_shards=2, seed=11),
    }
    configs = [
        InstancesJobConfig(
            vocab=str(sample_vocab_path),
            output=str(tmp_path / "together" / name),
            **{"dupe_factor": 2, "seed": 7, **kw},
        )
        for name, kw in settings.items()
    ]
    options = make_pipeline_options(
        ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
    )
    together = run_instances_jobs(configs, options, progress=lambda m: None)
    for config, manifest in zip(configs, together, strict=True):
        alone_config = replace(config, output=config.output.replace("together", "alone"))
        alone = run_instances_job(alone_config, make_pipeline_options([]), progress=lambda m: None)
        assert manifest["shards"] == alone["shards"]
        assert manifest["counts"] == alone["counts"]
        assert manifest["totals"] == alone["totals"]
        for name in ("rejects.jsonl",):
            assert (Path(config.output) / name).read_text() == (
                Path(alone_config.output) / name
            ).read_text()
    assert together[0]["shards"] == sample_run[0]["shards"]
    assert together[2]["skipped"]["skipped_invalid_utf8_line"] == 1
    assert (tmp_path / "together" / "a" / "rejects.jsonl").read_text() == ""
    assert (
        "skipped_invalid_utf8_line" in (tmp_path / "together" / "c" / "rejects.jsonl").read_text()
    )


def test_seed_changes_output_and_rerun_replaces_previous(
    tmp_path, sample_corpus_files, sample_vocab_path
):
    inputs = [str(sample_corpus_files[0])]
    a, _ = run_job(tmp_path, inputs, sample_vocab_path, name="x", num_shards=3, seed=1)
    b, out = run_job(tmp_path, inputs, sample_vocab_path, name="x", num_shards=2, seed=2)
    assert a["shards"][0]["content_sha256"] != b["shards"][0]["content_sha256"]
    assert len(shard_files(out)) == 2  # the three shards of the first run are gone


def test_gzip_output_and_compressed_inputs(tmp_path, sample_corpus_files, sample_vocab_path):
    raw = sample_corpus_files[0].read_bytes()
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt.gz").write_bytes(gzip.compress(raw))
    (tmp_path / "in" / "b.txt.bz2").write_bytes(bz2.compress(sample_corpus_files[1].read_bytes()))
    manifest, out = run_job(
        tmp_path, [str(tmp_path / "in" / "*")], sample_vocab_path, compression="gzip"
    )
    files = shard_files(out)
    assert all(f.name.endswith(".tfrecord.gz") for f in files)
    data = read_shards(files, 128, 20, compression="GZIP")
    assert len(data["input_ids"]) == manifest["totals"]["instances"] > 0
    assert manifest["totals"]["input_files"] == 2


def test_bad_lines_are_counted_and_recorded(tmp_path, sample_vocab_path):
    text = (
        b"The first sentence is here.\nAnd a second one follows it.\n\n"
        b"Broken \xff\xfe bytes on this line.\nA fine line.\nAnother fine line.\n\n"
        + b"word " * 30000
        + b"\n\nOnly one sentence in this document.\n"
    )
    (tmp_path / "bad.txt").write_bytes(text)
    (tmp_path / "empty.txt").write_bytes(b"")
    manifest, out = run_job(
        tmp_path, [str(tmp_path / "*.txt")], sample_vocab_path, max_sentence_chars=1000
    )
    skipped = manifest["skipped"]
    assert skipped["skipped_invalid_utf8_line"] == 1
    assert skipped["split_overlong_sentence"] == 1
    assert skipped["empty_input_file"] == 1
    assert manifest["totals"]["one_sentence_documents"] >= 1
    rejects = [json.loads(x) for x in (out / "rejects.jsonl").read_text().splitlines()]
    reasons = sorted(r["reason"] for r in rejects)
    assert reasons == ["empty_input_file", "skipped_invalid_utf8_line", "split_overlong_sentence"]
    assert any("bad.txt:line 4" in r["location"] for r in rejects)


def test_zero_documents_fails_with_reason(tmp_path, sample_vocab_path):
    (tmp_path / "a.txt").write_bytes(b"")
    (tmp_path / "b.txt").write_bytes(b"\n\n\n")
    with pytest.raises(NoInstancesError, match="no documents were read: 2 input file"):
        run_job(tmp_path, [str(tmp_path / "*.txt")], sample_vocab_path)
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_single_document_fails_unless_reference_random_next(tmp_path, sample_vocab_path):
    (tmp_path / "one.txt").write_text("Just one sentence, and no other document.\n")
    with pytest.raises(NoInstancesError, match="--reference-random-next"):
        run_job(tmp_path, [str(tmp_path / "one.txt")], sample_vocab_path)
    manifest, _ = run_job(
        tmp_path,
        [str(tmp_path / "one.txt")],
        sample_vocab_path,
        name="ref",
        reference_random_next=True,
    )
    assert manifest["totals"]["instances"] == 2  # one per dupe pass


def test_file_without_blank_lines_is_one_document_cut_to_the_limit(tmp_path, sample_vocab_path):
    lines = [f"Sentence number {i} of a file that never ends a document." for i in range(300)]
    (tmp_path / "flat.txt").write_text("\n".join(lines) + "\n")
    manifest, _ = run_job(
        tmp_path, [str(tmp_path / "flat.txt")], sample_vocab_path, max_document_sentences=100
    )
    assert manifest["totals"]["documents"] == 3
    assert manifest["skipped"]["split_overlong_document"] == 2


def test_vocab_without_specials_is_a_clear_error(tmp_path, sample_corpus_files):
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\nthe\n")
    with pytest.raises(JobConfigError, match=r"\[SEP\], \[MASK\]"):
        run_job(tmp_path, [str(sample_corpus_files[0])], tmp_path / "vocab.txt")


def test_too_few_predictions_is_a_clear_error(tmp_path, sample_corpus_files, sample_vocab_path):
    with pytest.raises(JobConfigError, match="a full sequence needs 19 predictions"):
        run_job(
            tmp_path, [str(sample_corpus_files[0])], sample_vocab_path, max_predictions_per_seq=10
        )


def test_missing_input_is_a_clear_error(tmp_path, sample_vocab_path):
    from pipeline.files.input_files import NoInputFilesError

    with pytest.raises(NoInputFilesError, match="matched no files"):
        run_job(tmp_path, [str(tmp_path / "nothing-*.txt")], sample_vocab_path)


def test_whole_word_masking_masks_whole_words(tmp_path, sample_corpus_files, sample_vocab_path):
    manifest, out = run_job(
        tmp_path, [str(p) for p in sample_corpus_files], sample_vocab_path, whole_word_mask=True
    )
    data = read_shards(shard_files(out), 128, 20)
    vocab = Vocab.from_file(str(sample_vocab_path))
    continuation = vocab.continuation_mask()
    words_checked = 0
    for i in range(len(data["input_ids"])):
        k = int(data["masked_lm_weights"][i].sum())
        positions = data["masked_lm_positions"][i, :k]
        original = data["input_ids"][i].copy()
        original[positions] = data["masked_lm_ids"][i, :k]
        masked = set(positions.tolist())
        for p in positions.tolist():
            nxt = p + 1
            if nxt < 128 and continuation[original[nxt]] and original[p] != vocab.sep_id:
                assert nxt in masked, (i, p)  # the rest of the word goes with it
                words_checked += 1
            # ... and so does its start, unless the word was cut by truncation at a segment edge.
            if continuation[original[p]] and original[p - 1] not in (vocab.cls_id, vocab.sep_id):
                assert p - 1 in masked, (i, p)
    assert words_checked > 100
    assert manifest["config"]["whole_word_mask"] is True


def test_spill_trees_of_earlier_runs_go_through_the_one_tree_deletion(
    tmp_path, sample_corpus_files, sample_vocab_path
):
    """An interrupted run's spill directory (files, a nested directory) is gone after the next
    run, and ``_remove_spills`` is ``scaffold.delete_tree`` on it, not a second copy of it."""
    from pipeline.jobs import instances

    names = instances._remove_spills.__code__.co_names
    assert "delete_tree" in names and "match" not in names and "delete" not in names
    spill = tmp_path / "out" / ".spill"
    (spill / "nested").mkdir(parents=True)
    (spill / "task-000000-0000.spill").write_bytes(b"old")
    (spill / "nested" / "x.tmp").write_bytes(b"old")
    run_job(tmp_path, [str(sample_corpus_files[0])], sample_vocab_path, dupe_factor=1)
    assert not spill.exists()
