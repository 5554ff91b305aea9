"""One module per ``bertprep`` subcommand: each defines ``register(subparsers)``."""
