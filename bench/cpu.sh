#!/bin/bash
# Mnemo's CPU trainer next to PyTorch (Debian's python3-torch, CPU) on the
# examples (the LSTM language model as word_language_model writes it;
# ResNet-18, the ViT, BERT and the U-Net on random arrays of their data's
# shapes; the CNN, the GPT, ResNet-18, the ViT and BERT also in bf16 against PyTorch's
# CPU autocast) and a GPT-2-class model (examples/gpt.mn at GPT-2 small's
# width and depth: 12 layers, dim 768, 12 heads, byte vocabulary; context 256
# at batch 2, and GPT-2's context, 1024, at batch 2): same model, batch,
# optimizer, initial weights, batches and thread count. Prints one table: median ms per step, peak RSS growth during
# training, and the loss after the same steps.
#
# Usage: bench/cpu.sh [--threads T] [--repeats R] [--only ROW] [--update-docs]
#   --threads T     threads for both (default: all cores)
#   --repeats R     runs per side (default 3)
#   --only ROW      measure one row (mlp, cnn, gpt, gpt2-class-256, ...); with
#                   --update-docs, replace only that row of the docs' table
#   --update-docs   also write the table into docs/performance.md
#
# Our side first runs once with --dump to record the initial weights and
# batches for PyTorch (the batches depend only on the seed, so every later
# run sees the same ones). Then both sides run R times, alternating, and
# each reports its fastest median: shared machines are noisy, and the
# fastest median is the least disturbed measurement of each. Memory growth
# and the loss come from the same run.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/scripts/setup.sh"
THREADS=$(nproc)
REPEATS=3
UPDATE_DOCS=0
ONLY=
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) THREADS=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --update-docs) UPDATE_DOCS=1; shift ;;
    *) echo "usage: bench/cpu.sh [--threads T] [--repeats R] [--only ROW] [--update-docs]" >&2; exit 2 ;;
  esac
done
mnemo_install_packages
mnemo_build >/dev/null

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
/usr/bin/python3 "$ROOT/scripts/make-tokens.py" "$WORK/tokens" >/dev/null
/usr/bin/python3 - "$WORK" <<'PY'
import os, sys
import numpy as np
work, rng = sys.argv[1], np.random.default_rng(0)
def save(name, arrays):
    os.makedirs(f"{work}/{name}/train", exist_ok=True)
    for key, value in arrays.items():
        np.save(f"{work}/{name}/train/{key}.npy", value)
save("cifar", {"image": rng.integers(0, 256, (2048, 3, 32, 32), dtype=np.uint8),
               "label": rng.integers(0, 10, 2048, dtype=np.int64)})
ids = rng.integers(1, 30522, (256, 128), dtype=np.int32)
labels = np.where(rng.random((256, 128)) < 0.15, ids, -100).astype(np.int32)
save("mlm", {"ids": ids, "labels": labels})
save("segmentation", {"image": rng.random((256, 3, 64, 64), dtype=np.float32),
                      "mask": rng.integers(0, 2, (256, 64, 64), dtype=np.int32)})
PY
FASHION=/usr/share/datasets/fashion-mnist

# row  example  data  steps  [mnemoc options]
# gpt.mn's own 512 MiB budget is for its small default; none binds here.
GPT2_CLASS="-D dim=768 -D heads=12 -D layers=12 -D batch=2 --memory-budget=64GiB"
CASES=(
  "mlp mlp $FASHION 200"
  "cnn cnn $FASHION 60"
  # bf16 against torch.autocast("cpu", bfloat16), as resnet18-bf16 below.
  "cnn-bf16 cnn $FASHION 60 --precision=bf16"
  "gpt gpt $WORK/tokens/train.bin 40"
  "gpt-bf16 gpt $WORK/tokens/train.bin 40 --precision=bf16"
  # Without dropout, so that PyTorch draws no masks of its own.
  "lstm lstm $WORK/tokens/train.bin 40 -D drop=0.0"
  # Named arrays of random data in the examples' shapes (the CIFAR-10 and
  # segmentation files are not on these machines); reduced batches keep
  # PyTorch's side within a minute.
  "resnet18 resnet18 $WORK/cifar 10 -D batch=32"
  # The same in bf16, against torch.autocast("cpu", bfloat16).
  "resnet18-bf16 resnet18 $WORK/cifar 10 -D batch=32 --precision=bf16"
  "vit vit $WORK/cifar 10 -D batch=32 -D drop_path=0.0"
  "vit-bf16 vit $WORK/cifar 10 -D batch=32 -D drop_path=0.0 --precision=bf16"
  "bert bert $WORK/mlm 10 -D batch=8 -D drop=0.0"
  "bert-bf16 bert $WORK/mlm 10 -D batch=8 -D drop=0.0 --precision=bf16"
  "unet unet $WORK/segmentation 10"
  "gpt2-class-256 gpt $WORK/tokens/train.bin 12 -D context=256 $GPT2_CLASS"
  # PyTorch takes about 36 s a step here: 5 steps (an odd count, so the
  # median is one step's time) keep the row within a few minutes.
  "gpt2-class-1024 gpt $WORK/tokens/train.bin 5 -D context=1024 $GPT2_CLASS"
)
ROWS=()
for case in "${CASES[@]}"; do
  read -r name example data steps options <<<"$case"
  [ -z "$ONLY" ] || [ "$name" = "$ONLY" ] || continue
  # shellcheck disable=SC2086 # the options are words
  "$MNEMO_BUILD/bin/mnemoc" "$ROOT/examples/$example.mn" $options -o "$WORK/$name" >/dev/null
  train="$WORK/$name/train --data $data --steps $steps --threads $THREADS --quiet"
  $train --dump "$WORK/$name-dump" >/dev/null
  autocast=()
  case " $options " in *" --precision=bf16 "*) autocast=(--autocast bf16) ;; esac
  for r in $(seq "$REPEATS"); do
    $train --summary-json "$WORK/$name-mnemo-$r.json" >/dev/null
    /usr/bin/python3 "$ROOT/bench/cpu_pytorch.py" "$WORK/$name-dump" --threads "$THREADS" \
      --out "$WORK/$name-torch-$r.json" "${autocast[@]}"
  done
  ROWS+=("$(/usr/bin/python3 - "$name" "$steps" "$WORK" "$REPEATS" <<'PY'
import json, sys
name, steps, work, repeats = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
def fastest(side):
    runs = [json.load(open(f"{work}/{name}-{side}-{r}.json")) for r in range(1, repeats + 1)]
    return min(runs, key=lambda run: run["step_ms_median"])
ours, theirs = fastest("mnemo"), fastest("torch")
mib = lambda b: f"{b / 2**20:.1f} MiB"
o_ms, t_ms = ours["step_ms_median"], theirs["step_ms_median"]
o_rss, t_rss = ours["memory"]["rss_growth_bytes"], theirs["rss_growth_bytes"]
print(f"| {name} | {steps} | {o_ms:.2f} | {t_ms:.2f} | {o_ms / t_ms:.2f}x | "
      f"{mib(o_rss)} | {mib(t_rss)} | {o_rss / t_rss:.2f}x | "
      f"{mib(ours['memory']['allocated_bytes'])} | "
      f"{ours['losses'][-1]:.4f} | {theirs['losses'][-1]:.4f} |")
PY
)")
done

TORCH=$(/usr/bin/python3 -c 'import torch; print(torch.__version__)')
# A virtual machine's model name may be just "AMD EPYC": the family and
# model numbers tell its generations apart (family 25 is Zen 3/4, 26 Zen 5).
CPU="$(lscpu | sed -n 's/^Model name: *//p' | head -1) (family $(sed -n 's/^cpu family\s*: *//p' /proc/cpuinfo | head -1), model $(sed -n 's/^model\s*: *//p' /proc/cpuinfo | head -1))"
TABLE="Mnemo CPU trainer vs PyTorch $TORCH (CPU, eager): $THREADS threads on $CPU, fastest median of $REPEATS runs each.

| model | steps | Mnemo ms/step | PyTorch ms/step | time ratio | Mnemo RSS growth | PyTorch RSS growth | memory ratio | Mnemo plan (allocated) | Mnemo loss | PyTorch loss |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
if [ ${#ROWS[@]} -eq 0 ]; then
  echo "bench/cpu.sh: no row named '$ONLY'" >&2
  exit 2
fi
for row in "${ROWS[@]}"; do TABLE+=$'\n'"$row"; done
echo "$TABLE"

if [ "$UPDATE_DOCS" = 1 ]; then
  /usr/bin/python3 - "$ROOT/docs/performance.md" "$TABLE" "$ONLY" <<'PY'
import re, sys
path, table, only = sys.argv[1], sys.argv[2], sys.argv[3]
text = open(path).read()
begin, end = "<!-- bench/cpu.sh -->", "<!-- /bench/cpu.sh -->"
block = f"{begin}\n{table}\n{end}"
if only:
    # One row measured again (same threads and repeats as the table says).
    # Only inside this table's block: other tables have rows named alike.
    row = table.splitlines()[-1]
    pattern = re.compile(r"^\| " + re.escape(only) + r" \|.*$", re.M)
    start, stop = text.find(begin), text.find(end)
    inside = text[start:stop] if 0 <= start < stop else ""
    if not pattern.search(inside):
        sys.exit(f"bench/cpu.sh: docs/performance.md's table has no row '{only}' to replace")
    text = text[:start] + pattern.sub(lambda m: row, inside, count=1) + text[stop:]
elif begin in text:
    text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda m: block, text, flags=re.S)
else:
    text += f"\n## CPU training: Mnemo and PyTorch\n\n{block}\n"
open(path, "w").write(text)
PY
fi
