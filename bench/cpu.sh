#!/bin/bash
# Mnemo's CPU trainer next to PyTorch (Debian's python3-torch, CPU) on the
# three examples: same model, batch, optimizer, initial weights, batches and
# thread count. Prints one table: median ms per step, peak RSS growth during
# training, and the loss after the same steps.
#
# Usage: bench/cpu.sh [--threads T] [--update-docs]
#   --threads T     threads for both (default: all cores)
#   --update-docs   also write the table into docs/performance.md
#
# Each model runs twice on our side: once with --dump to record the initial
# weights and batches for PyTorch, once clean for the figures (the batches
# are the same: they depend only on the seed).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/scripts/setup.sh"
THREADS=$(nproc)
UPDATE_DOCS=0
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) THREADS=$2; shift 2 ;;
    --update-docs) UPDATE_DOCS=1; shift ;;
    *) echo "usage: bench/cpu.sh [--threads T] [--update-docs]" >&2; exit 2 ;;
  esac
done
mnemo_install_packages
mnemo_build >/dev/null

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
/usr/bin/python3 "$ROOT/scripts/make-tokens.py" "$WORK/tokens" >/dev/null
FASHION=/usr/share/datasets/fashion-mnist

# model  data  steps
CASES=(
  "mlp $FASHION 200"
  "cnn $FASHION 60"
  "gpt $WORK/tokens/train.bin 40"
)
ROWS=()
for case in "${CASES[@]}"; do
  read -r name data steps <<<"$case"
  "$MNEMO_BUILD/bin/mnemoc" "$ROOT/examples/$name.mn" -o "$WORK/$name" >/dev/null
  train="$WORK/$name/train --data $data --steps $steps --threads $THREADS --quiet"
  $train --dump "$WORK/$name-dump" >/dev/null
  $train --summary-json "$WORK/$name-mnemo.json" >/dev/null
  /usr/bin/python3 "$ROOT/bench/cpu_pytorch.py" "$WORK/$name-dump" --threads "$THREADS" \
    --out "$WORK/$name-torch.json"
  ROWS+=("$(/usr/bin/python3 - "$name" "$steps" "$WORK/$name-mnemo.json" "$WORK/$name-torch.json" <<'PY'
import json, sys
name, steps, ours, theirs = sys.argv[1], int(sys.argv[2]), *map(lambda p: json.load(open(p)), sys.argv[3:5])
mib = lambda b: f"{b / 2**20:.1f} MiB"
o_ms, t_ms = ours["step_ms_median"], theirs["step_ms_median"]
o_rss, t_rss = ours["memory"]["rss_growth_bytes"], theirs["rss_growth_bytes"]
print(f"| {name} | {steps} | {o_ms:.2f} | {t_ms:.2f} | {o_ms / t_ms:.2f}x | "
      f"{mib(o_rss)} | {mib(t_rss)} | {o_rss / t_rss:.2f}x | {mib(ours['memory']['allocated_bytes'])} | "
      f"{ours['losses'][-1]:.4f} | {theirs['losses'][-1]:.4f} |")
PY
)")
done

TORCH=$(/usr/bin/python3 -c 'import torch; print(torch.__version__)')
TABLE="Mnemo CPU trainer vs PyTorch $TORCH (CPU, eager), $THREADS threads, $(lscpu | sed -n 's/^Model name: *//p' | head -1)

| model | steps | Mnemo ms/step | PyTorch ms/step | time ratio | Mnemo RSS growth | PyTorch RSS growth | memory ratio | Mnemo plan (allocated) | Mnemo loss | PyTorch loss |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for row in "${ROWS[@]}"; do TABLE+=$'\n'"$row"; done
echo "$TABLE"

if [ "$UPDATE_DOCS" = 1 ]; then
  /usr/bin/python3 - "$ROOT/docs/performance.md" "$TABLE" <<'PY'
import re, sys
path, table = sys.argv[1], sys.argv[2]
text = open(path).read()
begin, end = "<!-- bench/cpu.sh -->", "<!-- /bench/cpu.sh -->"
block = f"{begin}\n{table}\n{end}"
if begin in text:
    text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda m: block, text, flags=re.S)
else:
    text += f"\n## CPU training: Mnemo and PyTorch\n\n{block}\n"
open(path, "w").write(text)
PY
fi
