#!/bin/bash
# How long a model takes to become a trainer: `mnemoc MODEL -o DIR` (the
# plan, the generated C++ and its compile and link against the prebuilt
# runtime) and NVRTC's compile of its CUDA kernels for sm_90, as the
# trainer does at its first start on a GPU. Next to them, how many loops the
# CPU step calls and kernels the CUDA step launches, and how many of each
# are distinct: each distinct one is compiled once (codegen/CppEmitter.cpp's
# LoopFunctions, codegen/CudaEmitter.cpp's KernelSet).
#
# Usage: bench/compile_times.sh [--update-docs]
#   --update-docs   also write the table into docs/performance.md
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/scripts/setup.sh"
UPDATE_DOCS=0
case "${1:-}" in
  --update-docs) UPDATE_DOCS=1 ;;
  "") ;;
  *) echo "usage: bench/compile_times.sh [--update-docs]" >&2; exit 2 ;;
esac
mnemo_install_packages
mnemo_build >/dev/null
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# row  example  [mnemoc options]: GPT-2 small's sizes as gpu-check builds
# them, and the examples with the most repeated code (the LSTM's scan is
# unrolled over its time steps; ResNet-18 repeats its blocks).
GPT2="-D batch=8 -D context=1024 -D vocab=50257 -D dim=768 -D heads=12 -D layers=12 --device=cuda --memory-budget=120GiB"
CASES=(
  "gpt2 gpt $GPT2"
  "gpt2bf16 gpt $GPT2 --precision=bf16"
  "lstm lstm"
  "resnet18 resnet18"
)
seconds() { /usr/bin/python3 -c 'import sys; print(f"{float(sys.argv[2]) - float(sys.argv[1]):.1f}")' "$@"; }
ROWS=()
for case in "${CASES[@]}"; do
  read -r name example options <<<"$case"
  # shellcheck disable=SC2086 # the options are words
  start=$(date +%s.%N)
  "$MNEMO_BUILD/bin/mnemoc" "$ROOT/examples/$example.mn" $options -o "$WORK/$name" >/dev/null
  built=$(seconds "$start" "$(date +%s.%N)")
  # shellcheck disable=SC2086
  "$MNEMO_BUILD/bin/mnemoc" "$ROOT/examples/$example.mn" $options --emit=cuda-kernels -o "$WORK/$name.cu"
  start=$(date +%s.%N)
  "$MNEMO_BUILD/bin/mnemo-nvrtc" --arch sm_90 "$WORK/$name.cu" >/dev/null
  nvrtc=$(seconds "$start" "$(date +%s.%N)")
  loops=$(grep -c '^void loop[0-9]*(' "$WORK/$name/model.cpp" || true)
  calls=$(grep -cE '^    loop[0-9]+\(' "$WORK/$name/model.cpp" || true)
  kernels=$(grep -c '__global__' "$WORK/$name.cu" || true)
  # shellcheck disable=SC2086
  launches=$("$MNEMO_BUILD/bin/mnemoc" "$ROOT/examples/$example.mn" $options --emit=cuda | grep -c 'L\.launch(' || true)
  ROWS+=("| $name | $calls / $loops | $launches / $kernels | $built | $nvrtc |")
done

CPU="$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
TABLE="Generated code's compile times on $CPU ($(g++ --version | head -1); NVRTC $(sed -n 's/^#define CUDA_VERSION \([0-9]*\).*/\1/p' /usr/local/cuda/include/cuda.h)).

| model | CPU loops called / distinct | CUDA launches / distinct kernels | mnemoc -o (s) | NVRTC sm_90 (s) |
|---|---|---|---|---|
$(printf '%s\n' "${ROWS[@]}")"
echo "$TABLE"

if [ "$UPDATE_DOCS" = 1 ]; then
  /usr/bin/python3 - "$ROOT/docs/performance.md" "$TABLE" <<'PY'
import re, sys
path, table = sys.argv[1], sys.argv[2]
text = open(path).read()
begin, end = "<!-- bench/compile_times.sh -->", "<!-- /bench/compile_times.sh -->"
if begin not in text:
    sys.exit("bench/compile_times.sh: docs/performance.md has no " + begin + " block")
block = f"{begin}\n{table}\n{end}"
text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda m: block, text, flags=re.S)
open(path, "w").write(text)
PY
fi
