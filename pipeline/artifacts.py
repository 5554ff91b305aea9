"""Small artifact helpers shared by the jobs: JSON files (atomic when they mark completion) and
the dead-letter ``rejects.jsonl`` writer."""

from __future__ import annotations

import json

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems


def write_json(path: str, payload: object) -> None:
    """Writes ``payload`` as indented, key-sorted UTF-8 JSON (local or remote path)."""
    with FileSystems.create(path) as f:
        f.write(json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False).encode("utf-8"))


def write_json_atomically(path: str, payload: object) -> None:
    """Writes through a temporary name and renames, so a reader never sees half a file."""
    temp = path + ".tmp"
    write_json(temp, payload)
    if FileSystems.exists(path):
        FileSystems.delete([path])
    FileSystems.rename([temp], [path])


def read_json(path: str) -> dict:
    with FileSystems.open(path) as f:
        return json.loads(f.read().decode("utf-8"))


class WriteRejects(beam.PTransform):
    """A PCollection of Reject dicts → ``<output>/rejects.jsonl`` (one JSON object per line)."""

    def __init__(self, output: str) -> None:
        super().__init__()
        self._output = output

    def expand(self, rejects):
        return (
            rejects
            | "RejectsJson" >> beam.Map(lambda r: json.dumps(r, sort_keys=True, ensure_ascii=False))
            | "WriteRejects"
            >> beam.io.WriteToText(
                FileSystems.join(self._output, "rejects"),
                file_name_suffix=".jsonl",
                shard_name_template="",
            )
        )
