"""The one shard resolver: which files a set of patterns names, their manifests, and their sizes.

Used by the shard tools (``bertprep inspect/stats/validate``, through Beam's FileSystems) and the
trainer (through ``tf.io.gfile``); both pass their ``shards.files.FileAccess``. The rules:

- **Files** (``expand_shard_paths``): files, globs or directories; a directory stands for the
  shards ``shards_of_directory`` finds; manifests, markers, rejects, reports and hidden files
  never count (``is_shard_name``).
- **Manifests** (``manifests_beside``): the ``manifest.json`` in each directory that holds one of
  the shards, or the one manifest the caller names.
- **File sizes** (``size_mismatches``): a shard whose size on disk differs from the ``bytes``
  its manifest recorded (a copy cut short); manifests written before sizes were recorded have
  none, and their shards are not checked.
- **Sizes and kind** (``settle_sizes``): every manifest that states sizes must agree with the
  others (``max_seq_length``, ``max_predictions_per_seq``, ``masking``, ``input_mode``, the
  vocabulary); without one, they come from the first record of the first shard that has a record
  (google-research/bert's shards have no manifest), and unmasked records cannot be read that way.

What a caller was told (flags, a trainer configuration) is its own business: the tools read with
the given sizes, the trainer compares them and refuses.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from shards.files import FileAccess, LocalFiles, ShardPathError
from shards.reader import Frames, RecordSizes, open_shard
from transforms.example_encoding import decode_example
from transforms.features import FULL_SENTENCES, MANIFEST, SENTENCE_PAIRS, STATIC

GZIP_MAGIC = b"\x1f\x8b"
NOT_SHARD_NAMES = (MANIFEST, "stage.json", "run_summary.json", "trainer_config.json")
NOT_SHARD_PREFIXES = (".", "_", "rejects")
NOT_SHARD_SUFFIXES = (".json", ".jsonl", ".yaml", ".yml", ".md", ".html", ".png", ".parquet")
PHASE_SIDE = "train"
"""A ``bertprep run`` phase directory (``OUT/seq128``) stands for its training shards."""


def is_shard_name(path: str) -> bool:
    """Whether a file could be a shard: not a manifest, marker, summary, rejects list, report,
    hidden or temporary file (bertprep writes all of those beside its shards)."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return not (
        name in NOT_SHARD_NAMES
        or name.startswith(NOT_SHARD_PREFIXES)
        or name.endswith(NOT_SHARD_SUFFIXES)
    )


def _shards_in(directory: str, fs: FileAccess) -> list[str]:
    base = directory.rstrip("/")
    return sorted(
        p for p in fs.glob(f"{base}/*.tfrecord*") if is_shard_name(p) and not fs.is_dir(p)
    )


def _phase_dirs(directory: str, fs: FileAccess) -> list[str]:
    """Sub-directories of a ``bertprep run`` output that are phases (hold ``train/`` shards)."""
    found = []
    for entry in fs.list_dir(directory):
        side = entry.rstrip("/") + "/" + PHASE_SIDE
        if fs.is_dir(entry) and fs.is_dir(side) and _shards_in(side, fs):
            found.append(entry.rstrip("/"))
    return sorted(found)


def shards_of_directory(directory: str, fs: FileAccess | None = None) -> list[str]:
    """The shard files a directory stands for, in this order of lookup:

    1. its own ``*.tfrecord*`` files (an instances output, or ``PHASE/train``, ``PHASE/eval``);
    2. a phase directory of ``bertprep run`` (``OUT/seq128``): the shards of its ``train/``;
    3. a run directory (``OUT``) with one phase: that phase's ``train/`` shards; with several,
       ShardPathError naming them (their sequence lengths differ: choose one);
    4. otherwise every file in it that can be a shard (``is_shard_name``: google-research/bert's
       output files may have any name).

    Non-shard files (manifest.json, stage.json, rejects.jsonl, hidden files...) never count.
    """
    fs = fs or LocalFiles()
    base = directory.rstrip("/")
    own = _shards_in(base, fs)
    if own:
        return own
    side = f"{base}/{PHASE_SIDE}"
    if fs.is_dir(side) and _shards_in(side, fs):
        return _shards_in(side, fs)
    phases = _phase_dirs(base, fs)
    if len(phases) == 1:
        return _shards_in(f"{phases[0]}/{PHASE_SIDE}", fs)
    if len(phases) > 1:
        names = ", ".join(p.rsplit("/", 1)[-1] for p in phases)
        raise ShardPathError(
            f"{directory} is a run directory with several phases ({names}): name one, "
            f"e.g. {phases[0]} (its train shards) or {phases[0]}/eval"
        )
    return sorted(p for p in fs.list_dir(base) if is_shard_name(p) and not fs.is_dir(p))


def expand_shard_paths(patterns: Sequence[str], fs: FileAccess | None = None) -> list[str]:
    """Shard files named by ``patterns`` (files, globs or directories), sorted, deduplicated.

    A directory stands for the shards ``shards_of_directory`` finds; a glob keeps only files that
    can be shards (``is_shard_name``). Raises ShardPathError naming a pattern that matched nothing.
    """
    fs = fs or LocalFiles()
    found: set[str] = set()
    for pattern in patterns:
        if fs.is_dir(pattern):
            matched = shards_of_directory(pattern, fs)
        else:
            matched = [p for p in fs.glob(pattern) if is_shard_name(p) and not fs.is_dir(p)]
        if not matched:
            raise ShardPathError(f"no shard files match {pattern}")
        found.update(matched)
    return sorted(found)


def parent_of(path: str) -> str:
    """The directory part of a ``/``-separated path (``.`` for a bare name)."""
    return path.rsplit("/", 1)[0] if "/" in path else "."


def read_manifest(path: str, fs: FileAccess | None = None) -> dict:
    """A manifest's JSON object; ShardPathError when it is not one."""
    with (fs or LocalFiles()).open(path) as f:
        text = f.read().decode("utf-8")
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ShardPathError(f"{path}: not valid JSON ({e})") from e
    if not isinstance(data, dict):
        raise ShardPathError(f"{path}: not a manifest (a JSON object)")
    return data


def manifests_beside(files: Sequence[str], fs: FileAccess | None = None) -> dict[str, dict]:
    """Path → manifest of every ``manifest.json`` in a directory that holds one of ``files``."""
    fs = fs or LocalFiles()
    found = {}
    for parent in sorted({parent_of(f) for f in files}):
        path = f"{parent}/{MANIFEST}"
        if fs.exists(path):
            found[path] = read_manifest(path, fs)
    return found


def agree(label: str, values: Mapping[str, object]) -> object:
    """The one value all named sources give (ignoring None), or a ShardPathError naming them."""
    given = {source: v for source, v in values.items() if v is not None}
    if len(set(given.values())) > 1:
        said = ", ".join(f"{source} says {v}" for source, v in given.items())
        raise ShardPathError(f"{label} disagrees: {said}")
    return next(iter(given.values()), None)


@dataclass(frozen=True)
class FirstRecord:
    """The first record of a shard set: the shard it is in, its bytes, its decoded features."""

    shard: str
    data: bytes
    features: dict

    @property
    def unmasked(self) -> bool:
        """Whether the record carries word starts instead of masks (``masking=dynamic``)."""
        return "word_starts" in self.features and "masked_lm_positions" not in self.features


def first_record(files: Sequence[str], fs: FileAccess | None = None) -> FirstRecord:
    """The first record of the first shard that has one. ShardPathError when a shard before it
    cannot be read, the record is not a BERT pretraining record, or every shard is empty."""
    for shard in files:
        with open_shard(shard, fs) as stream:
            frames = Frames(stream, shard)
            for _, _, data in frames:
                try:
                    features = decode_example(data)
                except ValueError as e:
                    raise ShardPathError(
                        f"{shard}: the first record is not a tf.train.Example ({e})"
                    ) from e
                found = FirstRecord(shard, data, features)
                if "input_ids" not in features or (
                    "masked_lm_positions" not in features and not found.unmasked
                ):
                    raise ShardPathError(
                        f"{shard}: the first record is not a BERT pretraining record"
                    )
                return found
            if frames.problem:
                raise ShardPathError(
                    f"{shard}: not a readable TFRecord file ({frames.problem.message})"
                )
    raise ShardPathError("every shard is empty: no record to read sizes from")


def sizes_of_first_record(first: FirstRecord) -> RecordSizes:
    """Sizes and kind a manifest-less record shows: static masks; NSP labels → sentence pairs,
    none → full sentences (the packing is not known). Unmasked records need their manifest."""
    if first.unmasked:
        raise ShardPathError(
            f"{first.shard}: unmasked records (masking=dynamic) need the manifest.json written "
            "beside them (it says how to mask them)"
        )
    f = first.features
    if "instance_ids" in f:
        raise ShardPathError(
            f"{first.shard}: packed rows (several instances per row) need the manifest.json "
            "written beside them (it says how many prediction slots each instance has)"
        )
    return RecordSizes(
        len(f["input_ids"]),
        len(f["masked_lm_positions"]),
        STATIC,
        SENTENCE_PAIRS if "next_sentence_labels" in f else FULL_SENTENCES,
    )


@dataclass(frozen=True)
class Settled:
    """Sizes, kind and vocabulary of a shard set, and where they came from."""

    sizes: RecordSizes
    from_manifests: bool
    vocab_size: int | None = None
    vocab_sha256: str | None = None
    notes: tuple[str, ...] = field(default=())


def settle_sizes(
    files: Sequence[str],
    manifests: Mapping[str, dict],
    fs: FileAccess | None = None,
    first: FirstRecord | None = None,
) -> Settled:
    """Sizes, kind and vocabulary by the module's rule: manifests stating sizes must agree;
    without one, the first record (``first``, else ``first_record``; ``sizes_of_first_record``)."""
    stating = {p: m for p, m in manifests.items() if "max_seq_length" in m}
    if not stating:
        sizes = sizes_of_first_record(first or first_record(files, fs))
        return Settled(
            sizes,
            False,
            notes=(
                "no manifest.json: sizes inferred from the first record: "
                f"max_seq_length={sizes.max_seq_length}, "
                f"max_predictions_per_seq={sizes.max_predictions_per_seq}",
            ),
        )
    kinds = {p: RecordSizes.from_manifest(m) for p, m in stating.items()}
    if len({(k.masking, k.input_mode, k.max_instances_per_row) for k in kinds.values()}) > 1:
        said = ", ".join(
            f"{p} says {k.masking}/{k.input_mode}/{k.max_instances_per_row}"
            for p, k in kinds.items()
        )
        raise ShardPathError(
            "the shards are of different kinds (masking/input_mode/instances per row, 0: "
            f"unpacked): {said}"
        )
    agree("max_seq_length", {p: k.max_seq_length for p, k in kinds.items()})
    agree("max_predictions_per_seq", {p: k.max_predictions_per_seq for p, k in kinds.items()})
    vocabs = {p: m.get("vocab") or {} for p, m in stating.items()}
    if len({v["sha256"] for v in vocabs.values() if v.get("sha256")}) > 1:
        raise ShardPathError("the shards were made with different vocabularies (manifests)")
    vocab_size = agree("vocab size", {p: v.get("size") for p, v in vocabs.items()})
    notes = ()
    if len({parent_of(f) for f in files}) > len(manifests):
        notes = ("some shard directories have no manifest.json",)
    return Settled(
        next(iter(kinds.values())),
        True,
        vocab_size,  # type: ignore[arg-type]
        next((v["sha256"] for v in vocabs.values() if v.get("sha256")), None),
        notes,
    )


def listed_records(files: Sequence[str], manifests: Mapping[str, dict]) -> int | None:
    """Records the manifests list for ``files`` (each shard in its own directory's manifest),
    None without a manifest."""
    if not manifests:
        return None
    total = 0
    for path, m in manifests.items():
        listed = {s["file"]: s.get("records", 0) for s in m.get("shards", [])}
        here = parent_of(path)
        total += sum(listed.get(f.rsplit("/", 1)[-1], 0) for f in files if parent_of(f) == here)
    return total


@dataclass(frozen=True)
class SizeMismatch:
    """A shard whose size differs from the one its manifest recorded; sizes in bytes."""

    shard: str
    manifest: str
    expected: int
    actual: int

    def __str__(self) -> str:
        how = "cut short" if self.actual < self.expected else "longer than written"
        return (
            f"{self.shard}: {self.actual:,} bytes, the manifest says {self.expected:,} "
            f"({how}: an interrupted copy, or changed since it was written)"
        )


def recorded_sizes(
    files: Sequence[str], manifests: Mapping[str, dict], named: bool = False
) -> dict[str, tuple[str, int, str | None]]:
    """Shard → (manifest path, recorded bytes, compression written: ``none``/``gzip``/None) for
    each of ``files`` its manifest lists with a size: the manifest in the shard's directory, or
    with ``named`` (a manifest the caller named) any manifest, by file name. Manifests from
    before sizes were recorded give none."""
    found = {}
    for path, m in manifests.items():
        listed = {
            s["file"]: s["bytes"]
            for s in m.get("shards", [])
            if isinstance(s, dict) and isinstance(s.get("bytes"), int)
        }
        compression = (m.get("config") or {}).get("compression")
        here = parent_of(path)
        for f in files:
            name = f.rsplit("/", 1)[-1]
            if (named or parent_of(f) == here) and name in listed:
                found[f] = (path, listed[name], compression)
    return found


def _is_gzip(path: str, fs: FileAccess) -> bool:
    with fs.open(path) as f:
        return f.read(2) == GZIP_MAGIC


def size_mismatches(
    files: Sequence[str],
    manifests: Mapping[str, dict],
    fs: FileAccess | None = None,
    threads: int = 16,
    named: bool = False,
) -> list[SizeMismatch]:
    """Every shard of ``files`` whose size (``fs.size``, one metadata call each, ``threads`` at
    a time) differs from the ``bytes`` its manifest recorded (``recorded_sizes``), in ``files``
    order. Not checked: shards without a recorded size, and shards compressed otherwise than
    written (gzipped or unzipped since: their size says nothing; the content checksum does)."""
    fs = fs or LocalFiles()
    recorded = recorded_sizes(files, manifests, named)
    if not recorded:
        return []
    checked = [f for f in files if f in recorded]

    def mismatch(shard: str) -> SizeMismatch | None:
        manifest, expected, compression = recorded[shard]
        actual = fs.size(shard)
        if actual == expected:
            return None
        recompressed = compression in ("none", "gzip") and actual >= len(GZIP_MAGIC)
        if recompressed and _is_gzip(shard, fs) != (compression == "gzip"):
            return None
        return SizeMismatch(shard, manifest, expected, actual)

    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(checked)))) as pool:
        return [m for m in pool.map(mismatch, checked) if m is not None]
