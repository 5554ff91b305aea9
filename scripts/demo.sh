#!/usr/bin/env bash
# The main job end to end on the project's own embedded sample corpus (a small MediaWiki dump and
# three book-style files): sets up ./.venv (pinned), then `bertprep run` cleans, splits off a
# held-out set, trains a vocabulary and writes 128- and 512-token shards into ./bertprep-out,
# ending with a summary table (also in bertprep-out/run_summary.json). Rerunning skips every
# stage that is already current.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/bootstrap.sh
# bertprep keeps Beam's and TensorFlow's start-up logging quiet itself (-v shows it).
.venv/bin/bertprep run "$@"
