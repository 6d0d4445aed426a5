#!/usr/bin/env bash
# The one-GPU node check (bench/gpu_check/main.py): installs BUNDLE offline into OUT/site,
# runs the checks in priority order inside 8 minutes, writes OUT/results.jsonl + summary.
#   bash bench/gpu_check.sh BUNDLE [--out DIR] [--only a,b] [--spawn-all]
#   bash bench/gpu_check.sh --current-env [--out DIR]   (this interpreter's own packages)
# PYTHON picks the interpreter (default python3: on the node, the one with CUDA torch).
set -euo pipefail
started=$(date +%s)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ $# -eq 0 ]; then
  sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
exec "${PYTHON:-python3}" "$here/gpu_check/main.py" --started "$started" "$@"
