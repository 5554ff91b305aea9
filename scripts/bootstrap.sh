#!/usr/bin/env bash
# Creates ./.venv (if missing or stale) and installs the pinned dependencies and bertprep itself.
# Idempotent: a second call with an unchanged requirements.lock/setup.py does nothing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
python="${PYTHON:-python3}"
stamp="$venv/.bertprep-installed"
want="$(cat "$root/requirements.lock" "$root/setup.py" | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
echo "bootstrap: creating $venv and installing pinned dependencies (about a minute)..." >&2
"$python" -m venv "$venv"
# pip's output (index warnings, setuptools' "Editable installation" banner from the build backend)
# is shown only when a step fails.
quietly() {
  local log
  log="$(mktemp)"
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
}
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
quietly "${pip[@]}" --upgrade "pip>=24"
quietly "${pip[@]}" -r "$root/requirements.lock"
quietly "${pip[@]}" --no-deps -e "$root"
"$venv/bin/python" -c "import apache_beam, tokenizers, pipeline.cli" >/dev/null
# The instance phases' compiled kernels, compiled once into numba's cache (~10 s), not by every
# worker of the first job.
quietly "$venv/bin/python" -m transforms.kernel_cache
# The project's own byte code, compiled once (an editable install compiles nothing, and where
# PYTHONDONTWRITEBYTECODE is set every process would recompile every module it imports: ~50 ms
# for each job's launcher and worker zygote).
quietly "$venv/bin/python" -m compileall -q -j 0 "$root/pipeline" "$root/transforms" \
  "$root/tokenizer" "$root/shards" "$root/trainer"
echo "$want" > "$stamp"
