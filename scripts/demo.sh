#!/usr/bin/env bash
# The main job end to end on the project's own embedded sample corpus: sets up ./.venv (pinned),
# then builds 128-token pretraining shards into ./bertprep-out/seq128 and prints the summary.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/bootstrap.sh
export TF_CPP_MIN_LOG_LEVEL=2
.venv/bin/bertprep instances \
  --input 'sample/corpus/*.txt' --vocab sample/vocab.txt --output bertprep-out/seq128 \
  --max-seq-length 128 --max-predictions-per-seq 20 --masked-lm-prob 0.15 \
  --dupe-factor 5 --short-seq-prob 0.1 --seed 12345 --num-shards 4 "$@"
echo "shards: $(ls bertprep-out/seq128/*.tfrecord* | wc -l) in bertprep-out/seq128 (manifest.json beside them)"
