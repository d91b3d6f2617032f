#!/bin/bash
# Everything GPU-side, in one script of under five minutes, for the GPU
# machine (CUDA toolkit, CMake, Ninja, PyTorch; no LLVM, no network).
#
#   scripts/gpu-check.sh --prepare [DIR]   on a machine with mnemoc: writes
#                                          DIR (default gpu-inputs/, git-
#                                          ignored): a --emit=project tree per
#                                          example (and gpt8: the GPT with
#                                          adamw8bit; mlpprune and mlpqat:
#                                          the MLP pruned and with QAT;
#                                          mlpinfer and infer: a compressed
#                                          MLP's trainer and its inference
#                                          program), and the data
#   scripts/gpu-check.sh [DIR]             on the GPU machine, from the
#                                          repository root with DIR copied
#                                          along (the device tool: carry
#                                          ["gpu-inputs"])
#
# On the GPU it: builds each example's trainer with CMake alone (printing
# where it found CUDA and cuDNN); trains 50 steps on the CPU and 50 on the
# GPU from the same seed (same weights, same batches) and checks that the
# losses track (scripts/compare-losses.py); runs compute-sanitizer's
# memcheck over 3 steps of each (gpt8 too); runs the inference program on
# exported int8/int4/CSR weights on the CPU and the GPU (cuBLASLt's int8
# GEMM) and checks they agree; and prints a table next to
# PyTorch (mlp, cnn, gpt) on the
# same GPU, eager and torch.compile, same model, batch and precision (f32):
# median ms per step and peak device memory (ours: the one cudaMalloc, and
# what cudaMemGetInfo says the process holds beyond its context; PyTorch's:
# torch.cuda.max_memory_allocated). With $OUT set, the table and logs go
# there too. Exit status 1 when a check fails.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

if [ "${1:-}" = "--prepare" ]; then
  set -e
  DIR=$(realpath -m "${2:-$ROOT/gpu-inputs}")
  source "$ROOT/scripts/setup.sh"
  mnemo_install_packages
  mnemo_build >/dev/null
  rm -rf "$DIR" && mkdir -p "$DIR/data/fashion-mnist"
  for model in mlp cnn gpt; do
    "$MNEMO_BUILD/bin/mnemoc" "$ROOT/examples/$model.mn" --emit=project -o "$DIR/$model" >/dev/null
  done
  # gpt8: the GPT with adamw8bit, for the 8-bit optimizer's CUDA kernel.
  sed 's/optimizer = adamw(/optimizer = adamw8bit(/' "$ROOT/examples/gpt.mn" > "$DIR/gpt8.mn"
  "$MNEMO_BUILD/bin/mnemoc" "$DIR/gpt8.mn" --emit=project -o "$DIR/gpt8" >/dev/null
  # mlpprune: gradual magnitude pruning (an update every step from step 2)
  # and one-shot 2:4, for the one-block mask kernel; mlpqat: int8
  # quantization-aware training, for the observer and fake-quant kernels.
  sed 's/^  train {$/  train {\n    prune fc1.weight = magnitude(sparsity = 0.5, start = 2, end = 30, every = 1)\n    prune fc2.weight = nm(n = 2, m = 4, start = 1)/' \
    "$ROOT/examples/mlp.mn" > "$DIR/mlpprune.mn"
  sed 's/^  train {$/  train {\n    quantize fc1.weight = qat(bits = 8, observer = moving_average)\n    quantize fc2.weight = qat(bits = 4, per_tensor, affine)/' \
    "$ROOT/examples/mlp.mn" > "$DIR/mlpqat.mn"
  for model in mlpprune mlpqat; do
    "$MNEMO_BUILD/bin/mnemoc" "$DIR/$model.mn" --emit=project -o "$DIR/$model" >/dev/null
  done
  # mlpinfer: an int8 GEMM (cuBLASLt), int4 and CSR weights; its trainer
  # (in MODELS) exports the weights the inference program reads.
  cp "$ROOT/test/trainer/inference-gpu.mn" "$DIR/mlpinfer.mn"
  "$MNEMO_BUILD/bin/mnemoc" "$DIR/mlpinfer.mn" --emit=project -o "$DIR/mlpinfer" >/dev/null
  "$MNEMO_BUILD/bin/mnemoc" "$DIR/mlpinfer.mn" --mode=inference --emit=project -o "$DIR/infer" >/dev/null
  cp /usr/share/datasets/fashion-mnist/*-ubyte.gz "$DIR/data/fashion-mnist/"
  /usr/bin/python3 "$ROOT/scripts/make-tokens.py" "$DIR/data/tokens" >/dev/null
  git -C "$ROOT" rev-parse --short HEAD > "$DIR/COMMIT" 2>/dev/null || true
  echo "gpu-check: inputs in $DIR ($(du -sh "$DIR" | cut -f1)); on the GPU machine run scripts/gpu-check.sh $(realpath --relative-to="$ROOT" "$DIR")"
  exit 0
fi

DIR=$(realpath -m "${1:-$ROOT/gpu-inputs}")
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
LOG="$OUT/gpu-check.log"
FAILED=0
say() { echo "gpu-check: $*" | tee -a "$LOG"; }
fail() { say "FAIL: $*"; FAILED=1; }
START=$(date +%s)
if [ ! -d "$DIR/mlp" ]; then
  echo "gpu-check: no inputs in $DIR: run scripts/gpu-check.sh --prepare on a machine with mnemoc first" >&2
  exit 2
fi
if ! nvidia-smi -L > /dev/null 2>&1; then
  echo "gpu-check: no GPU here (nvidia-smi finds none); this script is for the GPU machine" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$LOG"
say "inputs from commit $(cat "$DIR/COMMIT" 2>/dev/null || echo '?')"

MODELS="mlp cnn gpt gpt8 mlpprune mlpqat mlpinfer"

# 1. Build every trainer (and the inference program) with CMake alone, in
#    parallel.
for model in $MODELS infer; do
  (cmake -S "$DIR/$model" -B "$OUT/build-$model" -G Ninja > "$OUT/configure-$model.log" 2>&1 &&
   cmake --build "$OUT/build-$model" > "$OUT/build-$model.log" 2>&1) &
done
wait
for model in $MODELS infer; do
  program=train; [ "$model" = infer ] && program=infer
  if [ ! -x "$OUT/build-$model/$program" ]; then
    fail "$model did not build"; tail -30 "$OUT/configure-$model.log" "$OUT/build-$model.log"
  fi
done
grep -h "Mnemo:" "$OUT/configure-mlp.log" | tee -a "$LOG"
[ "$FAILED" = 0 ] || exit 1
say "built in $(( $(date +%s) - START )) s"

data_of() {
  case "$1" in
    gpt | gpt8) echo "$DIR/data/tokens/train.bin" ;;
    *) echo "$DIR/data/fashion-mnist" ;;
  esac
}

# 2. CPU and GPU from the same seed: same weights, same batches.
for model in $MODELS; do
  train="$OUT/build-$model/train --data $(data_of $model) --steps 50 --quiet"
  timeout 120 $train --device cpu --summary-json "$OUT/$model-cpu.json" > "$OUT/$model-cpu.log" 2>&1 || fail "$model on the CPU"
  timeout 120 $train --device cuda --summary-json "$OUT/$model-cuda.json" > "$OUT/$model-cuda.log" 2>&1 || fail "$model on the GPU: $(tail -3 "$OUT/$model-cuda.log")"
  grep -h "device:\|memory:" "$OUT/$model-cuda.log" | tee -a "$LOG"
  # Pruning reaches the same sparsity on both (the counts follow the
  # schedule; which elements go may differ with the GEMMs' rounding).
  if [ "$(grep -h '^pruned:' "$OUT/$model-cpu.log" | awk '{print $2, $3}')" != \
       "$(grep -h '^pruned:' "$OUT/$model-cuda.log" | awk '{print $2, $3}')" ]; then
    fail "$model: the GPU's sparsity differs from the CPU's"
  fi
  grep -h "^pruned:" "$OUT/$model-cuda.log" | sed "s/^/$model (GPU) /" | tee -a "$LOG"
  [ -f "$OUT/$model-cuda.json" ] || continue
  python3 "$ROOT/scripts/compare-losses.py" "$OUT/$model-cpu.json" "$OUT/$model-cuda.json" --rtol 2e-3 \
    | sed "s/^/$model: /" | tee -a "$LOG"
  [ "${PIPESTATUS[0]}" = 0 ] || fail "$model: the GPU's losses do not track the CPU's"
done
say "tracking checked at $(( $(date +%s) - START )) s"

# 3. compute-sanitizer's memcheck over a few steps (eager and graph).
SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for model in $MODELS; do
  if timeout 150 "$SANITIZER" --tool memcheck --error-exitcode 9 \
      "$OUT/build-$model/train" --data "$(data_of $model)" --steps 3 --device cuda --quiet \
      > "$OUT/$model-memcheck.log" 2>&1; then
    say "$model: compute-sanitizer memcheck: $(grep -h 'ERROR SUMMARY' "$OUT/$model-memcheck.log")"
  else
    fail "$model: compute-sanitizer: $(grep -h 'ERROR SUMMARY\|Invalid' "$OUT/$model-memcheck.log" | head -3)"
  fi
done
say "sanitized at $(( $(date +%s) - START )) s"

# 3b. Inference on compressed weights: the CPU's and the GPU's (cuBLASLt's
#     int8 GEMM, int4 dequantization, CSR) test loss and accuracy agree,
#     and memcheck finds nothing.
FM="$DIR/data/fashion-mnist"
INFER="$OUT/build-infer/infer --weights $OUT/mlpinfer.safetensors --data $FM"
if timeout 120 "$OUT/build-mlpinfer/train" --data "$FM" --steps 300 --device cpu --quiet \
     --export "$OUT/mlpinfer.safetensors" > "$OUT/mlpinfer-export.log" 2>&1; then
  timeout 60 $INFER --device cpu > "$OUT/infer-cpu.log" 2>&1 || fail "inference on the CPU: $(tail -2 "$OUT/infer-cpu.log")"
  timeout 60 $INFER --device cuda > "$OUT/infer-cuda.log" 2>&1 || fail "inference on the GPU: $(tail -2 "$OUT/infer-cuda.log")"
  grep -h "device:\|memory:\|test " "$OUT/infer-cpu.log" "$OUT/infer-cuda.log" | tee -a "$LOG"
  python3 "$ROOT/test/reference/check_inference.py" "$OUT/infer-cpu.log" "$OUT/infer-cuda.log" \
    --loss 1e-3 --accuracy 1e-3 | sed "s/^/inference: /" | tee -a "$LOG"
  [ "${PIPESTATUS[0]}" = 0 ] || fail "inference: the GPU's figures differ from the CPU's"
  if timeout 120 "$SANITIZER" --tool memcheck --error-exitcode 9 $INFER --device cuda --batches 3 \
      > "$OUT/infer-memcheck.log" 2>&1; then
    say "infer: compute-sanitizer memcheck: $(grep -h 'ERROR SUMMARY' "$OUT/infer-memcheck.log")"
  else
    fail "infer: compute-sanitizer: $(grep -h 'ERROR SUMMARY\|Invalid' "$OUT/infer-memcheck.log" | head -3)"
  fi
else
  fail "mlpinfer: training and export: $(tail -2 "$OUT/mlpinfer-export.log")"
fi
say "inference checked at $(( $(date +%s) - START )) s"

# 4. The benchmark: ours, then PyTorch eager and torch.compile on our run's
#    weights and batches.
ROWS=()
for case in "mlp 300" "cnn 100" "gpt 100"; do
  read -r model steps <<<"$case"
  timeout 120 "$OUT/build-$model/train" --data "$(data_of $model)" --steps "$steps" --device cuda --quiet \
    --dump "$OUT/$model-dump" --summary-json "$OUT/$model-bench.json" > "$OUT/$model-bench.log" 2>&1 \
    || { fail "$model benchmark run"; continue; }
  for mode in eager compile; do
    timeout 240 python3 "$ROOT/bench/gpu_pytorch.py" "$OUT/$model-dump" --mode $mode \
      --out "$OUT/$model-torch-$mode.json" > "$OUT/$model-torch-$mode.log" 2>&1 \
      || fail "$model: PyTorch $mode: $(tail -2 "$OUT/$model-torch-$mode.log")"
  done
  ROWS+=("$(python3 - "$OUT" "$model" <<'PY'
import json, os, sys
out, model = sys.argv[1], sys.argv[2]
def load(name):
    path = os.path.join(out, name)
    return json.load(open(path)) if os.path.exists(path) else None
ours = load(model + "-bench.json")
eager = load(model + "-torch-eager.json")
compiled = load(model + "-torch-compile.json")
mib = lambda b: "%.1f" % (b / 2**20)
ms = lambda r: "%.3f" % r["step_ms_median"] if r else "n/a"
mem = ours["memory"]
ratio_t = ("%.2fx" % (ours["step_ms_median"] / compiled["step_ms_median"])) if compiled else "n/a"
ratio_m = ("%.2fx" % (mem["device_measured_bytes"] / eager["peak_bytes"])) if eager else "n/a"
print("| %s | %s | %s | %s | %s | %s / %s | %s | %s | %s |" % (
    model, ms(ours), ms(eager), ms(compiled), ratio_t,
    mib(mem["device_allocated_bytes"]), mib(mem["device_measured_bytes"]),
    mib(eager["peak_bytes"]) if eager else "n/a",
    mib(compiled["peak_bytes"]) if compiled else "n/a", ratio_m))
PY
)")
done
{
  echo
  echo "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); PyTorch $(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null); f32 (no TF32) on both sides"
  echo
  echo "| model | Mnemo ms/step | eager ms/step | compile ms/step | time vs compile | Mnemo MiB (cudaMalloc / measured) | eager peak MiB | compile peak MiB | memory vs eager |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for row in "${ROWS[@]}"; do echo "$row"; done
} | tee -a "$LOG" > "$OUT/gpu-check.md"
cat "$OUT/gpu-check.md"
say "done in $(( $(date +%s) - START )) s; $( [ $FAILED = 0 ] && echo 'all checks passed' || echo 'some checks FAILED')"
exit $FAILED
