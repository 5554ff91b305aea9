"""One module per ``bertprep`` subcommand: each defines ``register(subparsers)``.

``SUMMARIES`` holds each command's one-line help, in the order ``bertprep --help`` lists them,
so that the command line can list every command while importing only the one it runs (the
``instances`` module alone imports numba and the shard writer: ~0.3 s).
"""

SUMMARIES: dict[str, str] = {
    "run": "run every stage from raw inputs to training shards; finished stages are skipped",
    "clean": "clean raw corpora into sentence-split documents (Parquet + BERT text export)",
    "vocab": "train a BERT WordPiece vocab.txt on the cleaned corpus, with a report",
    "instances": "create BERT pretraining instances (sentence pairs + masks) as sharded TFRecords",
    "inspect": "show decoded records: segments A and B, masked tokens, the next-sentence label",
    "stats": "measure shards: counts, IsNext ratio, lengths, padding, 80/10/10, [UNK] rate, "
    "top tokens",
    "validate": "check every record against the feature contract, the manifest and a trainer "
    "config",
    "train": "pretrain a BERT encoder on the shards (Keras + keras-hub; TPU, GPU or CPU)",
}
"""Command name → its one-line help (each command module's ``HELP``)."""
