"""``bertprep inspect``: decoded pretraining records, readable by a person (or as JSON)."""

from __future__ import annotations

import argparse
import json
import sys

from pipeline.commands import SUMMARIES
from pipeline.commands.shard_set import add_shard_command, command_shard_set
from transforms.errors import UserError

HELP = SUMMARIES["inspect"]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_shard_command(
        subparsers, "inspect", HELP, "Works on bertprep's shards and on google-research/bert's."
    )
    p.add_argument("-n", type=int, default=5, help="records to show")
    p.add_argument("--index", type=int, help="show only the record at this global index")
    p.add_argument("--json", action="store_true", help="one JSON object per record")
    p.set_defaults(run=run)


def instances_of(features: dict, sizes) -> list[dict]:
    """The record's instances: itself, or each instance of a packed row, unpacked (a row that
    breaks the packed layout raises ValueError)."""
    if not sizes.packed:
        return [features]
    from transforms.instance_packing import unpack_row

    return [
        {name: values.tolist() for name, values in one.items()}
        for one in unpack_row(features, sizes.max_predictions_per_seq)
    ]


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from shards.reader import Frames, open_shard
    from transforms.example_encoding import decode_example
    from transforms.record_view import describe_record, render_record

    shard_set = command_shard_set(args, extra)
    if not args.json:
        for note in shard_set.notes:
            print(f"note: {note}", file=sys.stderr)
    ids = shard_set.ids
    wanted = range(args.index, args.index + 1) if args.index is not None else range(args.n)
    shown = 0
    global_index = 0
    status = 0
    for shard in shard_set.paths:
        with open_shard(shard, shard_set.files) as stream:
            frames = Frames(stream, shard)
            for index, offset, data in frames:
                if global_index in wanted:
                    try:
                        features = decode_example(data)
                        descriptions = [
                            describe_record(one, shard_set.tokens, ids)
                            for one in instances_of(features, shard_set.sizes)
                        ]
                    except (ValueError, KeyError, IndexError) as e:
                        print(
                            f"{shard}: record {index} at byte {offset}: not a pretraining "
                            f"record ({e})",
                            file=sys.stderr,
                        )
                        status = 1
                    else:
                        where = {"shard": shard, "record": index, "index": global_index}
                        packed = shard_set.sizes.packed
                        if args.json and packed:
                            print(json.dumps(where | {"instances": descriptions}))
                        elif args.json:
                            print(json.dumps(descriptions[0] | where, ensure_ascii=False))
                        for k, description in enumerate(descriptions if not args.json else []):
                            title = f"#{global_index}  {shard} record {index}"
                            if packed:
                                title += f", instance {k + 1} of {len(descriptions)}"
                            print(render_record(description, title) + "\n")
                    shown += 1
                global_index += 1
                if global_index >= wanted.stop:
                    return status
            if frames.problem:
                print(f"bertprep inspect: {frames.problem}", file=sys.stderr)
                return 1
    if args.index is not None and shown == 0:
        raise UserError(f"index {args.index} is past the last record ({global_index} records)")
    return status
