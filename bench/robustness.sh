#!/bin/bash
# Two costs that bad inputs used to hide, next to their fixed versions:
#
# 1. Compiling very deep models: mnemoc's time and peak memory for
#    examples/deep-mlp.mn at depth 1,000 to 10,000 (the documented repeat
#    limit). Memory grew quadratically with depth (1 GB at 1,000, out of
#    memory at 10,000) and must stay linear.
# 2. Masked attention: bench/masked_attention.mn (a BERT-style layer) on
#    batches whose second half is padding, masked with -inf or -1e9, next
#    to the same batches unmasked. exp of a masked score must be an exact 0
#    and the step threads flush denormals, so all three run at one speed.
#
# Usage: bench/robustness.sh [--steps N] [--depths "1000 2000 10000"]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/scripts/setup.sh"
STEPS=20
DEPTHS="1000 2000 4000 10000"
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) STEPS=$2; shift 2 ;;
    --depths) DEPTHS=$2; shift 2 ;;
    *) echo "usage: bench/robustness.sh [--steps N] [--depths LIST]" >&2; exit 2 ;;
  esac
done
mnemo_install_packages
mnemo_build
BIN=$MNEMO_BUILD/bin
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "mnemoc examples/deep-mlp.mn --memory-report, by depth ($(nproc) cores)"
printf "%8s  %10s  %12s\n" depth seconds "peak memory"
for depth in $DEPTHS; do
  /usr/bin/time -f "%e %M" -o "$WORK/time" "$BIN/mnemoc" "$ROOT/examples/deep-mlp.mn" \
    -D depth="$depth" --memory-report > /dev/null
  read -r seconds kib < "$WORK/time"
  printf "%8s  %10s  %9.0f MiB\n" "$depth" "$seconds" "$(echo "$kib / 1024" | bc -l)"
done

echo
"$BIN/mnemoc" "$ROOT/bench/masked_attention.mn" -o "$WORK/masked" > /dev/null
/usr/bin/python3 - "$WORK" "$STEPS" "$ROOT" <<'PY'
import os
import sys
import numpy as np
work, steps, root = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sys.path.insert(0, os.path.join(root, "test", "reference"))
import safetensors_numpy
rng = np.random.default_rng(0)
for name, fill in (("unmasked", 0.0), ("masked-inf", -np.inf), ("masked-1e9", -1e9)):
    tensors = {}
    for s in range(1, steps + 1):
        tensors[f"tokens.{s}"] = rng.integers(0, 1000, (8, 256)).astype(np.int32)
        pad = np.zeros((8, 256), np.float32)
        pad[:, 128:] = fill
        tensors[f"pad.{s}"] = pad
        tensors[f"label.{s}"] = rng.integers(0, 2, 8).astype(np.int32)
    safetensors_numpy.save(f"{work}/{name}.safetensors", tensors)
PY
echo "bench/masked_attention.mn: batch 8, context 256 (half of it padding), $STEPS steps, $(nproc) threads"
printf "%-26s  %10s  %10s\n" batches "ms/step" "final loss"
for name in unmasked masked-inf masked-1e9; do
  "$WORK/masked/train" --data "$WORK/$name.safetensors" --steps "$STEPS" --quiet \
    --summary-json "$WORK/$name.json" > /dev/null
  /usr/bin/python3 -c "import json; s = json.load(open('$WORK/$name.json')); print('%-26s  %10.2f  %10.4f' % ('$name', s['step_ms_median'], s['final_loss']))"
done
