#!/bin/bash
# The GPU machine's checks, in three commands that each fit the device
# tool's lease (15 minutes in all, start-up included; under 4 minutes each
# on an H200), prepared here and checked here by a dry run.
#
#   scripts/gpu-check.sh --prepare [DIR]   here (needs mnemoc): writes DIR
#       (default gpu-inputs/, git-ignored): a --emit=project tree per model,
#       the Debian packages a CUDA-only machine lacks (nlohmann-json,
#       OpenBLAS, zlib, as .deb files repacked from this machine's installed
#       ones), and the data. Say what travels with the device tool's
#       carry: ["gpu-inputs"] (scripts/gpu-check.sh --dry-run checks its size).
#   scripts/gpu-check.sh --dry-run [DIR]   here, and in the test suite: every
#       step of the three commands up to the first CUDA call (unpacking the
#       packages, configuring and building the trainers for sm_90 with CMake
#       as the GPU machine will, the paths, the size of what travels, and
#       the $OUT layout), so that the first command on a GPU works; and the
#       CPU side of build's comparisons (each model's CPU run, the inference
#       program's CPU figures), into DIR/cpu-reference, which travels: the
#       GPU commands run only GPU work. Run it before the GPU commands.
#   scripts/gpu-check.sh build [DIR]       on the GPU: builds every trainer
#       (in $MNEMO_GPU_WORK, default /tmp/mnemo-gpu-check) and test/gpu's
#       checks; checks cuDNN's fused attention against a double-precision
#       reference (test/gpu/attention_cudnn_check.cu); trains each model
#       50 steps on the GPU from the seed of the dry run's CPU run (same
#       weights, same batches, --matmul-precision highest) and checks that
#       the losses track (and, for a model on cuDNN's attention, that the
#       GPU's losses with Mnemo's own attention kernels track them too;
#       and for the GPT's data-parallel plan with ZeRO-1 on one rank, that
#       its collectives went through NCCL inside the captured graph);
#       runs the inference program on the int8/int4/CSR weights the dry
#       run trained and checks that its figures agree with the CPU's.
#   scripts/gpu-check.sh sanitize [DIR]    on the GPU: compute-sanitizer's
#       memcheck over a few steps of every small model (and inference),
#       racecheck and synccheck over the MLP, the CNN and the GPT.
#   scripts/gpu-check.sh bench [DIR]       on the GPU: the table of
#       docs/performance.md: per example and for a GPT-2-small-sized GPT
#       (f32 with TF32, and bf16), ms/step, tokens or images/s and peak
#       memory of the Mnemo trainer next to PyTorch eager (with
#       scaled_dot_product_attention) and torch.compile on the same weights
#       and batches.
#
# A shorter lease can run a part: MNEMO_GPU_MODELS (the models build
# tracks, default all), MNEMO_GPU_BENCH (the bench rows' models, default
# all) and MNEMO_GPU_TORCH_MODES (default "eager compile").
#
# Each GPU command builds what it needs if an earlier one has not (the
# machine keeps /tmp while it stays warm), and writes only small files to
# $OUT: STAGE.log (the summary) and STAGE-logs.tar.gz (the full logs), and
# for bench gpu-check.md (the table). Exit status 1 when a check fails, 2
# when the inputs or the machine are wrong.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STAGE=${1:-}
case "$STAGE" in
  --prepare | --dry-run | build | sanitize | bench) ;;
  *)
    sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
DIR=$(realpath -m "${2:-$ROOT/gpu-inputs}")

# What the commands run on: the models (tracked and sanitized), the
# inference program, and the benchmark's GPT-2-small-sized GPT.
MODELS="mlp cnn gpt gpt8 mlpprune mlpqat mlpinfer attn cls gptbf16 gptnccl"
BENCH_MODELS="gpt2 gpt2bf16"
PROJECTS="$MODELS infer $BENCH_MODELS"
DEBS="nlohmann-json3-dev libopenblas0-pthread libopenblas-pthread-dev libgfortran5 libquadmath0 zlib1g zlib1g-dev"
# GPT-2 small's sizes: 12 layers, dim 768, 12 heads, context 1024, batch 8,
# GPT-2's vocabulary (the byte-level token file uses ids < 256 of it); the
# example's 512 MiB budget lifted (120 GiB: nothing is recomputed), counted
# on the GPU.
GPT2_SIZES="-D batch=8 -D context=1024 -D vocab=50257 -D dim=768 -D heads=12 -D layers=12 --device=cuda --memory-budget=120GiB"
# The device tool's limits on what travels and what comes back.
TRAVEL_LIMIT=$((64 << 20))
OUT_FILES_LIMIT=8

#===------------------------------------------------------------------===#
# --prepare: on a machine with mnemoc
#===------------------------------------------------------------------===#

# A Debian package as a .deb, repacked from this machine's installed files
# (the version the project was built and tested with; no network needed).
repack_deb() {
  local pkg=$1 into=$2 stage
  stage=$(mktemp -d)
  mkdir -p "$stage/DEBIAN"
  dpkg-query -W -f='Package: ${Package}\nVersion: ${Version}\nArchitecture: ${Architecture}\nMaintainer: ${Maintainer}\nDescription: ${binary:Summary}\n' "$pkg" > "$stage/DEBIAN/control" || return 1
  dpkg -L "$pkg" | while read -r path; do
    # Files and links to files (a folder, or a link to one such as /lib on
    # a merged-/usr system, is made by the files in it).
    [ -d "$path" ] && continue
    if [ -f "$path" ] || [ -L "$path" ]; then
      mkdir -p "$stage$(dirname "$path")"
      cp -P "$path" "$stage$path"
    fi
  done
  dpkg-deb --root-owner-group -Zxz --build "$stage" "$into/$pkg.deb" > /dev/null || return 1
  rm -rf "$stage"
}

# The first `count` images (or labels) of an IDX file, gzip-compressed.
idx_subset() {
  /usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import gzip, struct, sys
src, dst, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = gzip.open(src).read()
rank = data[3]
dims = list(struct.unpack(">%dI" % rank, data[4:4 + 4 * rank]))
item = 1
for d in dims[1:]:
    item *= d
dims[0] = min(dims[0], count)
body = data[4 + 4 * rank:4 + 4 * rank + dims[0] * item]
with gzip.open(dst, "wb", compresslevel=9) as f:
    f.write(data[:4] + struct.pack(">%dI" % rank, *dims) + body)
PY
}

if [ "$STAGE" = --prepare ]; then
  set -e
  # MNEMO_MNEMOC: a mnemoc already built (the test suite's); else the
  # project is set up and built first.
  MNEMOC=${MNEMO_MNEMOC:-}
  if [ -z "$MNEMOC" ]; then
    source "$ROOT/scripts/setup.sh"
    mnemo_install_packages
    mnemo_build > /dev/null
    MNEMOC="$MNEMO_BUILD/bin/mnemoc"
  fi
  rm -rf "$DIR" && mkdir -p "$DIR/data/fashion-mnist" "$DIR/deps" "$DIR/kernels"
  # A project, and its kernels alone (the dry run compiles them with NVRTC
  # for sm_90, as the trainer will at start-up).
  emit() {
    local name=$1 model=$2
    shift 2
    "$MNEMOC" "$model" "$@" --emit=project -o "$DIR/$name" > /dev/null
    "$MNEMOC" "$model" "$@" --emit=cuda-kernels -o "$DIR/kernels/$name.cu" > /dev/null
  }
  for model in mlp cnn gpt; do
    emit "$model" "$ROOT/examples/$model.mn"
  done
  # gpt8: the GPT with adamw8bit, for the 8-bit optimizer's CUDA kernel.
  sed 's/optimizer = adamw(/optimizer = adamw8bit(/' "$ROOT/examples/gpt.mn" > "$DIR/gpt8.mn"
  # mlpprune: gradual magnitude pruning (an update every step from step 2)
  # and one-shot 2:4, for the one-block mask kernel; mlpqat: int8
  # quantization-aware training, for the observer and fake-quant kernels.
  sed 's/^  train {$/  train {\n    prune fc1.weight = magnitude(sparsity = 0.5, start = 2, end = 30, every = 1)\n    prune fc2.weight = nm(n = 2, m = 4, start = 1)/' \
    "$ROOT/examples/mlp.mn" > "$DIR/mlpprune.mn"
  sed 's/^  train {$/  train {\n    quantize fc1.weight = qat(bits = 8, observer = moving_average)\n    quantize fc2.weight = qat(bits = 4, per_tensor, affine)/' \
    "$ROOT/examples/mlp.mn" > "$DIR/mlpqat.mn"
  # mlpinfer: an int8 GEMM (cuBLASLt), int4 and CSR weights; its trainer
  # exports the weights the inference program reads.
  cp "$ROOT/test/trainer/inference-gpu.mn" "$DIR/mlpinfer.mn"
  # attn: fused attention in every variant the op takes (grouped key/value
  # heads, dropout, boolean and additive masks, causal, partial tiles), on
  # the batches and weights the reference interpreter dumps.
  cp "$ROOT/test/reference/models/attention.mn" "$DIR/attn.mn"
  "$(dirname "$(command -v "$MNEMOC")")/mnemo-interp" "$DIR/attn.mn" --steps 20 --dump "$DIR/data/attn" > /dev/null
  rm -f "$DIR/data/attn/final.safetensors" "$DIR/data/attn/losses.safetensors"
  # cls: the fused classifier loss with a bias (a tied head plus its own
  # bias, in chunks of 64 rows, a fifth of the targets ignored), on the
  # interpreter's batches as attn.
  cp "$ROOT/test/reference/models/classifier-loss-bias.mn" "$DIR/cls.mn"
  "$(dirname "$(command -v "$MNEMOC")")/mnemo-interp" "$DIR/cls.mn" --steps 20 --ignored-targets 0.2 --dump "$DIR/data/cls" > /dev/null
  rm -f "$DIR/data/cls/final.safetensors" "$DIR/data/cls/losses.safetensors"
  for model in gpt8 mlpprune mlpqat mlpinfer attn cls; do
    emit "$model" "$DIR/$model.mn"
  done
  # gptbf16: the GPT in bf16, whose attention runs on cuDNN's fused
  # flash-attention engines (lang/ops/attention/AttentionCudnn.h).
  emit gptbf16 "$ROOT/examples/gpt.mn" --precision=bf16
  # gptnccl: the GPT's data-parallel plan with ZeRO-1 on one rank (one
  # GPU): its gradient buckets (64 KiB: about 30) are reduced by NCCL on
  # their own stream, inside the captured graph, while the backward goes
  # on; the updates read their rank's rows of the sharded tables, the
  # norm's sum and the parameters' all-gather go through NCCL on the
  # step's stream. One rank owns the one part, so it trains as the GPT.
  emit gptnccl "$ROOT/examples/gpt.mn" --world-size 1 --shard-optimizer --gradient-bucket 64KiB
  emit infer "$DIR/mlpinfer.mn" --mode=inference
  # The benchmark's GPT-2-small-sized GPT, f32 and bf16; their plans on a
  # GPU, as mnemoc reports them (--device=cuda counts the CUDA workspace).
  emit gpt2 "$ROOT/examples/gpt.mn" $GPT2_SIZES
  emit gpt2bf16 "$ROOT/examples/gpt.mn" $GPT2_SIZES --precision=bf16
  "$MNEMOC" "$ROOT/examples/gpt.mn" $GPT2_SIZES --memory-report > "$DIR/gpt2.memory.txt"
  "$MNEMOC" "$ROOT/examples/gpt.mn" $GPT2_SIZES --precision=bf16 --memory-report > "$DIR/gpt2bf16.memory.txt"
  # Data: 20,000 training images (the longest run, 300 steps of 128, wraps
  # around) and the test set; the token file.
  FM=/usr/share/datasets/fashion-mnist
  idx_subset "$FM/train-images-idx3-ubyte.gz" "$DIR/data/fashion-mnist/train-images-idx3-ubyte.gz" 20000
  idx_subset "$FM/train-labels-idx1-ubyte.gz" "$DIR/data/fashion-mnist/train-labels-idx1-ubyte.gz" 20000
  cp "$FM"/t10k-*-ubyte.gz "$DIR/data/fashion-mnist/"
  /usr/bin/python3 "$ROOT/scripts/make-tokens.py" "$DIR/data/tokens" > /dev/null
  for pkg in $DEBS; do
    repack_deb "$pkg" "$DIR/deps"
  done
  git -C "$ROOT" rev-parse --short HEAD > "$DIR/COMMIT" 2> /dev/null || true
  echo "gpu-check: inputs in $DIR ($(du -sh "$DIR" | cut -f1)); on the GPU machine run scripts/gpu-check.sh build|sanitize|bench $(realpath --relative-to="$ROOT" "$DIR")"
  exit 0
fi

#===------------------------------------------------------------------===#
# The GPU commands (and their dry run)
#===------------------------------------------------------------------===#

DRY=0
[ "$STAGE" = --dry-run ] && DRY=1
WORK=${MNEMO_GPU_WORK:-/tmp/mnemo-gpu-check}
OUT=${OUT:-$WORK/out}
mkdir -p "$WORK/logs" "$OUT"
export MNEMO_CACHE_DIR="$WORK/nvrtc-cache"
NAME=${STAGE#--}
LOG="$OUT/$NAME.log"
: > "$LOG"
FAILED=0
START=$(date +%s)
say() { echo "gpu-check: $*" | tee -a "$LOG"; }
fail() {
  say "FAIL: $*"
  FAILED=1
}
elapsed() { echo "$(($(date +%s) - START)) s"; }
# Each command must end within the device tool's budget (under 4 minutes):
# past DEADLINE seconds, the remaining runs are skipped and the log says
# which, rather than the command being killed with nothing to show.
DEADLINE=${MNEMO_GPU_DEADLINE:-200}
in_time() {
  if [ $(($(date +%s) - START)) -gt "$DEADLINE" ]; then
    say "skipped (past ${DEADLINE} s of this command): $*"
    return 1
  fi
}
# The PyTorch machine's python3 (with torch) runs the comparisons; they
# need nothing but the standard library (and torch for the benchmark).
PYTHON=$(command -v python3 || echo /usr/bin/python3)
# Logs travel back as one small archive.
finish() {
  tar -czf "$OUT/$NAME-logs.tar.gz" -C "$WORK" logs 2> /dev/null || true
  say "$NAME done in $(elapsed); $([ $FAILED = 0 ] && echo 'all checks passed' || echo 'some checks FAILED')"
  exit $FAILED
}

if [ ! -d "$DIR/mlp" ] || [ ! -d "$DIR/deps" ] || [ ! -d "$DIR/kernels" ]; then
  echo "gpu-check: no inputs in $DIR: run scripts/gpu-check.sh --prepare on a machine with mnemoc first" >&2
  exit 2
fi
for project in $PROJECTS; do
  if [ ! -f "$DIR/$project/CMakeLists.txt" ]; then
    echo "gpu-check: $DIR/$project is missing: run scripts/gpu-check.sh --prepare again" >&2
    exit 2
  fi
done
say "inputs from commit $(cat "$DIR/COMMIT" 2> /dev/null || echo '?'), $(du -sh "$DIR" | cut -f1)"

# The Debian packages, unpacked (dpkg-deb where there is one; else the .deb
# read as the ar archive it is, by Python; MNEMO_DPKG_DEB=none forces that,
# and the test suite's dry run uses it so that both ways are tried).
unpack_deps() {
  local deps="$WORK/deps" deb
  [ -f "$deps/.unpacked" ] && return 0
  rm -rf "$deps" && mkdir -p "$deps"
  for deb in "$DIR"/deps/*.deb; do
    if [ "${MNEMO_DPKG_DEB:-}" != none ] && command -v dpkg-deb > /dev/null; then
      dpkg-deb -x "$deb" "$deps" || return 1
    else
      "$PYTHON" - "$deb" "$deps" <<'PY' || return 1
import io, sys, tarfile
deb, into = sys.argv[1], sys.argv[2]
data = open(deb, "rb").read()
assert data[:8] == b"!<arch>\n", deb + " is not a .deb"
at = 8
while at < len(data):
    name = data[at:at + 16].decode().strip().rstrip("/")
    size = int(data[at + 48:at + 58].decode().strip())
    body = data[at + 60:at + 60 + size]
    if name.startswith("data.tar"):
        # The packages' own links (libz.so is an absolute one) as they are.
        trusted = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
        tarfile.open(fileobj=io.BytesIO(body)).extractall(into, **trusted)
    at += 60 + size + (size & 1)
PY
    fi
  done
  touch "$deps/.unpacked"
}

# Configures a project's tree SOURCE in BUILD as a machine with only the
# CUDA toolkit, CMake, Ninja and a C++ compiler would: the system's copies
# of the host libraries are hidden and the carried packages used, here as
# on the GPU machine, so that the dry run rehearses the real build.
configure_project() {
  local source=$1 build=$2 log=$3
  shift 3
  cmake -S "$source" -B "$build" -G Ninja -DMNEMO_DEPS_DIR="$WORK/deps" \
    -DCMAKE_DISABLE_FIND_PACKAGE_OpenBLAS=ON -DCMAKE_DISABLE_FIND_PACKAGE_ZLIB=ON \
    -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON -DMNEMO_ONEDNN=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90 "$@" > "$log" 2>&1
}

# The runtime does not depend on the model, and every project carries the
# same copy: it is built once, in $WORK/build-runtime from the MLP's tree,
# and each project links it (-DMNEMO_RUNTIME_FROM, which checks that the
# copies and settings match; runtime/MnemoProject.cmake). A dozen trainers
# build in about the time of two.
RUNTIME_BUILD="$WORK/build-runtime"
build_runtime() {
  local jobs=$1
  if [ ! -f "$RUNTIME_BUILD/build.ninja" ]; then
    configure_project "$DIR/mlp" "$RUNTIME_BUILD" "$WORK/logs/configure-runtime.log" || return 1
  fi
  cmake --build "$RUNTIME_BUILD" -j "$jobs" --target mnemo_runtime mnemo_train_main mnemo_cuda \
    > "$WORK/logs/build-runtime.log" 2>&1
}

# Runs FUNCTION ITEM for each ITEM, at most LIMIT (at least 1) at once: with
# a dozen builds of two jobs each at once on a machine of 2 cores, the test
# suite's other tests beside the dry run ran 30 to 80 times slower than
# alone.
for_each_at_once() {
  local limit=$1 function=$2 item running=0
  shift 2
  [ "$limit" -ge 1 ] || limit=1
  for item in "$@"; do
    if [ "$running" -ge "$limit" ]; then
      wait -n
      running=$((running - 1))
    fi
    "$function" "$item" &
    running=$((running + 1))
  done
  wait
}

# Configures and builds one project in $WORK/build-NAME, on the runtime
# built once, with 2 jobs.
build_project() {
  local project=$1 build="$WORK/build-$1"
  if [ ! -f "$build/build.ninja" ]; then
    configure_project "$DIR/$project" "$build" "$WORK/logs/configure-$project.log" \
      -DMNEMO_RUNTIME_FROM="$RUNTIME_BUILD" || return 1
  fi
  cmake --build "$build" -j 2 > "$WORK/logs/build-$project.log" 2>&1
}

# Builds the projects given, in parallel; fails for each that did not.
build_all() {
  local projects="$*" project
  unpack_deps || {
    fail "unpacking the Debian packages in $DIR/deps"
    return
  }
  if ! build_runtime "$(nproc)"; then
    fail "the runtime did not build"
    tail -20 "$WORK/logs/configure-runtime.log" "$WORK/logs/build-runtime.log" 2> /dev/null | tee -a "$LOG"
    return
  fi
  for_each_at_once $(($(nproc) / 2)) build_project $projects
  for project in $projects; do
    local program=train
    [ "$project" = infer ] && program=infer
    if [ ! -x "$WORK/build-$project/$program" ]; then
      fail "$project did not build"
      tail -20 "$WORK/logs/configure-$project.log" "$WORK/logs/build-$project.log" 2> /dev/null | tee -a "$LOG"
    fi
  done
  grep -h "Mnemo:" "$WORK/logs/configure-mlp.log" 2> /dev/null | sed 's/^-- //' | tee -a "$LOG"
  say "built $projects in $(elapsed)"
}

data_of() {
  case "$1" in
    gpt | gpt8 | gptbf16 | gptnccl | gpt2 | gpt2bf16) echo "$DIR/data/tokens/train.bin" ;;
    attn | cls) echo "$DIR/data/$1/batches.safetensors --init $DIR/data/$1/init.safetensors" ;;
    *) echo "$DIR/data/fashion-mnist" ;;
  esac
}

# Steps of a tracking run (the attention and classifier models' dumps
# have 20 batches).
steps_of() {
  case "$1" in
    attn | cls) echo 20 ;;
    *) echo 50 ;;
  esac
}

# How closely the GPU's losses track the CPU's. f32 models: 2e-3, far
# above summation order (1e-7 to 1e-5 seen on an H200). mlpinfer rounds
# fc2's weights to 16 int4 levels every step and prunes fc3 by magnitude:
# a weight one f32 ulp from a rounding boundary or a pruning tie moves by a
# whole int4 step on one side only, so after tens of steps the losses
# drift apart by up to about 5e-3 (seen: 5.3e-3 at step 47 of 50) while
# the trained weights' inference agrees to 1e-3 (checked below): 1e-2.
# gptbf16 keeps bf16 activations on both sides, and each side rounds its
# own f32 sums to bf16 (2^-8 relative: a different order moves a value
# across a rounding boundary now and then); cuDNN's attention also rounds
# the probabilities to bf16 before their product with V, where the CPU
# keeps f32. Expected a few 1e-3 over 50 steps; 2e-2 leaves room, and a
# wrong pointer, scale or mask is off by far more from the first step.
rtol_of() {
  case "$1" in
    mlpinfer | gptbf16) echo 2e-2 ;;
    *) echo 2e-3 ;;
  esac
}

# The end of the dry run, and where the GPU commands start using the GPU.
first_cuda_call() {
  if [ $DRY = 1 ]; then
    return 0
  fi
  if ! nvidia-smi -L > /dev/null 2>&1; then
    echo "gpu-check: no GPU here (nvidia-smi finds none): $STAGE is for the GPU machine; --dry-run checks it here" >&2
    exit 2
  fi
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$LOG"
}

# The projects' kernels compiled for sm_90 into the trainers' NVRTC cache,
# one per core at once: the trainers would compile them one at a time at start-up
# (the GPT-2-sized ones take 15-30 s each), and the later commands find
# them while the machine stays warm.
cache_kernels() {
  "$WORK/build-$1/mnemo-nvrtc" --cache --arch sm_90 "$DIR/kernels/$1.cu" > "$WORK/logs/nvrtc-cache-$1.log" 2>&1
}
warm_kernels() {
  local project
  for_each_at_once "$(nproc)" cache_kernels "$@"
  for project in "$@"; do
    grep -q "sm_90 cubin" "$WORK/logs/nvrtc-cache-$project.log" ||
      fail "$project's kernels do not compile here: $(tail -3 "$WORK/logs/nvrtc-cache-$project.log")"
  done
  say "kernels for sm_90 in the cache at $(elapsed)"
}

# test/gpu's checks of the CUDA libraries' paths (cuDNN's attention), as
# their own CMake project.
build_gpu_checks() {
  local build="$WORK/build-gpu-checks"
  if cmake -S "$ROOT/test/gpu" -B "$build" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 \
    > "$WORK/logs/configure-gpu-checks.log" 2>&1 &&
    cmake --build "$build" > "$WORK/logs/build-gpu-checks.log" 2>&1; then
    say "built test/gpu's checks (attention-cudnn-check)"
  else
    fail "test/gpu's checks did not build: $(tail -3 "$WORK/logs/build-gpu-checks.log" "$WORK/logs/configure-gpu-checks.log" 2> /dev/null)"
  fi
}

# The CPU side of the tracking, recorded by the dry run here (where CPU
# time is free) into $DIR/cpu-reference, which travels with the inputs: the
# GPU commands run only GPU work. (On a lease of 2026-12-04 the GPU
# machine's CPU runs of the small GPT did not finish in 120 s, where they
# take 3 s here; not diagnosed, and device time is better spent anyway.)
REFERENCE="$DIR/cpu-reference"
record_cpu_side() {
  local model train
  mkdir -p "$REFERENCE"
  for model in "$@"; do
    [ "$model" = infer ] && continue
    train="$WORK/build-$model/train --data $(data_of $model) --steps $(steps_of $model) --quiet"
    timeout 300 $train --device cpu --summary-json "$REFERENCE/$model.json" > "$REFERENCE/$model.log" 2>&1 ||
      fail "$model on the CPU: $(tail -2 "$REFERENCE/$model.log")"
  done
  # The inference check's weights and the CPU's figures on them.
  if [[ " $* " = *" infer "* ]]; then
    local fm="$DIR/data/fashion-mnist"
    if timeout 300 "$WORK/build-mlpinfer/train" --data "$fm" --steps 300 --device cpu --quiet \
      --export "$REFERENCE/mlpinfer.safetensors" > "$REFERENCE/mlpinfer-export.log" 2>&1; then
      timeout 120 "$WORK/build-infer/infer" --weights "$REFERENCE/mlpinfer.safetensors" --data "$fm" \
        --device cpu > "$REFERENCE/infer.log" 2>&1 || fail "inference on the CPU: $(tail -2 "$REFERENCE/infer.log")"
    else
      fail "mlpinfer: training and export: $(tail -2 "$REFERENCE/mlpinfer-export.log")"
    fi
  fi
  say "CPU side of the tracking recorded in $(realpath --relative-to="$ROOT" "$REFERENCE" 2> /dev/null || echo "$REFERENCE") at $(elapsed)"
}

stage_build() {
  local models=${MNEMO_GPU_MODELS:-$MODELS} inference="" model
  [[ " $models " = *" mlpinfer "* ]] && inference=infer
  build_all $models $inference
  build_gpu_checks
  [ "$FAILED" = 0 ] || return
  if [ $DRY = 1 ]; then
    record_cpu_side $models $inference
    return
  fi
  for model in $models; do
    [ -f "$REFERENCE/$model.json" ] ||
      fail "no CPU reference for $model in $REFERENCE: run scripts/gpu-check.sh --dry-run before the GPU commands"
  done
  [ "$FAILED" = 0 ] || return
  first_cuda_call
  # cuDNN's fused attention against a double-precision reference, every
  # variant the executor may hand it (causal, odd lengths, head 128, f16,
  # grouped-query heads, dropout), and its time at GPT-2 small's size.
  if in_time "the cuDNN attention check"; then
    timeout 120 "$WORK/build-gpu-checks/attention-cudnn-check" > "$WORK/logs/attention-cudnn-check.log" 2>&1 ||
      fail "attention-cudnn-check: $(grep -h 'FAIL\|no plan\|error' "$WORK/logs/attention-cudnn-check.log" | head -3)"
    tee -a "$LOG" < "$WORK/logs/attention-cudnn-check.log"
  fi
  warm_kernels $models $inference
  # The GPU from the seed the CPU reference started from: same weights,
  # same batches; f32 GEMMs on the GPU (--matmul-precision highest), as
  # the CPU computes.
  for model in $models; do
    in_time "$model's CPU/GPU tracking" || continue
    local train="$WORK/build-$model/train --data $(data_of $model) --steps $(steps_of $model) --quiet"
    cp "$REFERENCE/$model.json" "$WORK/$model-cpu.json"
    cp "$REFERENCE/$model.log" "$WORK/logs/$model-cpu.log"
    timeout 120 $train --device cuda --matmul-precision highest --summary-json "$WORK/$model-cuda.json" > "$WORK/logs/$model-cuda.log" 2>&1 || fail "$model on the GPU: $(tail -3 "$WORK/logs/$model-cuda.log")"
    grep -h "device:\|memory:\|^gpu:" "$WORK/logs/$model-cuda.log" | sed "s/^/$model: /" | tee -a "$LOG"
    # The data-parallel plan sums through NCCL, inside the captured graph.
    if [ "$model" = gptnccl ]; then
      grep -q "^device: .*NCCL [0-9]" "$WORK/logs/$model-cuda.log" ||
        fail "gptnccl: the step did not sum its gradients through NCCL"
      ! grep -q "capturing the step as a CUDA graph failed" "$WORK/logs/$model-cuda.log" ||
        fail "gptnccl: the step with NCCL's sums was not captured as a CUDA graph"
    fi
    # Pruning reaches the same sparsity on both (the counts follow the
    # schedule; which elements go may differ with the GEMMs' rounding).
    if [ "$(grep -h '^pruned:' "$WORK/logs/$model-cpu.log" | awk '{print $2, $3}')" != \
      "$(grep -h '^pruned:' "$WORK/logs/$model-cuda.log" | awk '{print $2, $3}')" ]; then
      fail "$model: the GPU's sparsity differs from the CPU's"
    fi
    [ -f "$WORK/$model-cuda.json" ] && [ -f "$WORK/$model-cpu.json" ] || continue
    "$PYTHON" "$ROOT/scripts/compare-losses.py" "$WORK/$model-cpu.json" "$WORK/$model-cuda.json" --rtol "$(rtol_of $model)" |
      sed "s/^/$model: /" | tee -a "$LOG"
    [ "${PIPESTATUS[0]}" = 0 ] || fail "$model: the GPU's losses do not track the CPU's"
    # A model on cuDNN's attention also runs with Mnemo's own kernels on
    # the GPU (MNEMO_CUDNN_ATTENTION=0): the two paths track each other.
    grep -q "^gpu: attention .*: cuDNN" "$WORK/logs/$model-cuda.log" || continue
    MNEMO_CUDNN_ATTENTION=0 timeout 120 $train --device cuda --matmul-precision highest \
      --summary-json "$WORK/$model-cuda-own.json" > "$WORK/logs/$model-cuda-own.log" 2>&1 ||
      fail "$model on the GPU with Mnemo's attention: $(tail -3 "$WORK/logs/$model-cuda-own.log")"
    [ -f "$WORK/$model-cuda-own.json" ] || continue
    "$PYTHON" "$ROOT/scripts/compare-losses.py" "$WORK/$model-cuda-own.json" "$WORK/$model-cuda.json" --rtol "$(rtol_of $model)" |
      sed "s/^/$model, cuDNN vs Mnemo's attention on the GPU: /" | tee -a "$LOG"
    [ "${PIPESTATUS[0]}" = 0 ] || fail "$model: cuDNN's attention does not track Mnemo's"
  done
  say "tracking checked at $(elapsed)"
  # Inference on compressed weights: the CPU's (recorded) and the GPU's
  # (cuBLASLt's int8 GEMM, int4 dequantization, CSR) test loss and accuracy
  # on the same trained weights agree.
  [ -n "$inference" ] || return
  in_time "the inference check" || return
  if [ -f "$REFERENCE/mlpinfer.safetensors" ] && [ -f "$REFERENCE/infer.log" ]; then
    timeout 60 "$WORK/build-infer/infer" --weights "$REFERENCE/mlpinfer.safetensors" --data "$DIR/data/fashion-mnist" \
      --device cuda > "$WORK/logs/infer-cuda.log" 2>&1 || fail "inference on the GPU: $(tail -2 "$WORK/logs/infer-cuda.log")"
    grep -h "device:\|test " "$REFERENCE/infer.log" "$WORK/logs/infer-cuda.log" | tee -a "$LOG"
    "$PYTHON" "$ROOT/test/reference/check_inference.py" "$REFERENCE/infer.log" "$WORK/logs/infer-cuda.log" \
      --loss 1e-3 --accuracy 1e-3 | sed "s/^/inference: /" | tee -a "$LOG"
    [ "${PIPESTATUS[0]}" = 0 ] || fail "inference: the GPU's figures differ from the CPU's"
  else
    fail "no recorded CPU inference in $REFERENCE: run scripts/gpu-check.sh --dry-run first"
  fi
}

stage_sanitize() {
  build_all $MODELS infer
  [ "$FAILED" = 0 ] || return
  local sanitizer
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  [ -x "$sanitizer" ] || [ $DRY = 1 ] || {
    fail "no compute-sanitizer"
    return
  }
  first_cuda_call
  [ $DRY = 1 ] && return
  warm_kernels $MODELS infer
  # Step 1 runs eagerly, steps 2-3 replay the captured graph.
  run_tool() {
    local tool=$1 what=$2
    shift 2
    if timeout 90 "$sanitizer" --tool "$tool" --error-exitcode 9 "$@" \
      > "$WORK/logs/$what-$tool.log" 2>&1; then
      say "$what: $tool: $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$WORK/logs/$what-$tool.log" | head -1)"
    else
      fail "$what: $tool: $(grep -h 'ERROR SUMMARY\|Invalid\|hazard\|Barrier\|error:' "$WORK/logs/$what-$tool.log" | head -3)"
    fi
  }
  # Most telling first: memcheck over the examples, then racecheck and
  # synccheck over them, then memcheck over the rest.
  local runs=() run tool model
  for model in mlp cnn gpt attn gptbf16 gptnccl; do runs+=("memcheck $model 3"); done
  for model in mlp cnn gpt attn; do runs+=("racecheck $model 2" "synccheck $model 2"); done
  for model in gpt8 mlpprune mlpqat mlpinfer; do runs+=("memcheck $model 3"); done
  for run in "${runs[@]}"; do
    read -r tool model steps <<< "$run"
    in_time "$tool over $model" || continue
    run_tool "$tool" "$model" "$WORK/build-$model/train" --data $(data_of $model) --steps "$steps" --device cuda --quiet
  done
  in_time "memcheck over the inference program" || return
  if [ -f "$REFERENCE/mlpinfer.safetensors" ]; then
    run_tool memcheck infer "$WORK/build-infer/infer" --weights "$REFERENCE/mlpinfer.safetensors" \
      --data "$DIR/data/fashion-mnist" --device cuda --batches 3
  else
    fail "no trained inference weights in $REFERENCE: run scripts/gpu-check.sh --dry-run first"
  fi
}

stage_bench() {
  local models=${MNEMO_GPU_BENCH:-mlp cnn gpt $BENCH_MODELS}
  build_all $models
  [ "$FAILED" = 0 ] || return
  first_cuda_call
  [ $DRY = 1 ] && return
  warm_kernels $models
  # Rows: model, steps, what a step processes, PyTorch's precision.
  local all=("mlp 300 128 tf32" "cnn 100 128 tf32" "gpt 100 1024 tf32" "gpt2 30 8192 tf32" "gpt2bf16 30 8192 bf16")
  local rows=() row model steps items precision mode
  for row in "${all[@]}"; do
    [[ " $models " = *" ${row%% *} "* ]] && rows+=("$row")
  done
  # Ours first, then PyTorch eager (SDPA attention), then torch.compile,
  # GPT-2 first: cold compilations are the slow part; past the deadline the
  # rest are skipped and the log says so.
  for row in "${rows[@]}"; do
    read -r model steps items precision <<< "$row"
    in_time "the Mnemo run of $model" || continue
    timeout 150 "$WORK/build-$model/train" --data $(data_of $model) --steps "$steps" --device cuda --quiet \
      --dump "$WORK/$model-dump" --summary-json "$WORK/$model-bench.json" > "$WORK/logs/$model-bench.log" 2>&1 ||
      fail "$model benchmark run: $(tail -2 "$WORK/logs/$model-bench.log")"
  done
  for mode in ${MNEMO_GPU_TORCH_MODES:-eager compile}; do
    for model in gpt2 gpt2bf16 gpt cnn mlp; do
      for row in "${rows[@]}"; do
        read -r m steps items precision <<< "$row"
        [ "$m" = "$model" ] || continue
        [ -d "$WORK/$model-dump" ] || continue
        in_time "PyTorch $mode on $model" || continue
        timeout 150 "$PYTHON" "$ROOT/bench/gpu_pytorch.py" "$WORK/$model-dump" --mode $mode \
          --precision "$precision" --attention sdpa --out "$WORK/$model-torch-$mode.json" \
          > "$WORK/logs/$model-torch-$mode.log" 2>&1 ||
          fail "$model: PyTorch $mode: $(tail -2 "$WORK/logs/$model-torch-$mode.log")"
      done
    done
  done
  "$PYTHON" "$ROOT/bench/gpu_table.py" "$WORK" "${rows[@]}" > "$OUT/gpu-check.md" ||
    fail "making the table"
  cat "$OUT/gpu-check.md" | tee -a "$LOG"
}

# The dry run: what travels and what comes back, then each command up to
# its first CUDA call, with $OUT as it will be.
if [ $DRY = 1 ]; then
  size=$(cd "$ROOT" && git ls-files -z -co --exclude-standard 2> /dev/null |
    xargs -0 -r du -cb 2> /dev/null | tail -1 | cut -f1)
  size=$((${size:-0} + $(du -sb "$DIR" | cut -f1)))
  if [ "$size" -gt $TRAVEL_LIMIT ]; then
    fail "what travels (the working tree and $DIR) is $((size >> 20)) MiB, over the device tool's 64 MiB"
  else
    say "travels: $((size >> 20)) MiB of 64 (the working tree and $(realpath --relative-to="$ROOT" "$DIR" 2> /dev/null || echo "$DIR"))"
  fi
  # Every project's kernels compile for sm_90 with its own NVRTC build (the
  # trainer compiles them at start-up on the GPU): registers, shared memory
  # and spills as ptxas reports them.
  compile_kernels() {
    local project=$1
    "$WORK/build-$project/mnemo-nvrtc" --arch sm_90 --resources "$DIR/kernels/$project.cu" \
      > "$WORK/logs/nvrtc-$project.log" 2>&1
  }
  for stage in build sanitize bench; do
    # shellcheck disable=SC2030
    (
      NAME=$stage
      LOG="$OUT/$NAME.log"
      : > "$LOG"
      "stage_$stage"
      [ "$FAILED" = 0 ] && say "$stage: ready for the GPU (stopped before the first CUDA call) at $(elapsed)"
      tar -czf "$OUT/$NAME-logs.tar.gz" -C "$WORK" logs 2> /dev/null
      exit $FAILED
    ) || FAILED=1
  done
  for_each_at_once "$(nproc)" compile_kernels $PROJECTS
  for project in $PROJECTS; do
    if grep -q "sm_90: [0-9]* kernels" "$WORK/logs/nvrtc-$project.log"; then
      sed "s|^$DIR/kernels/||" "$WORK/logs/nvrtc-$project.log" | sed 's/; stack frames:.*//' | tee -a "$LOG"
    else
      fail "$project's kernels do not compile for sm_90: $(tail -5 "$WORK/logs/nvrtc-$project.log")"
    fi
  done
  # What each command leaves in $OUT must come back: at most 8 plain
  # files, named in letters, digits, '.', '_' and '-', under 16 MiB.
  count=$(find "$OUT" -type f | wc -l)
  bad=$(find "$OUT" -mindepth 1 \( -type d -o -size +16M -o -regex '.*/[^/]*[^A-Za-z0-9._/-][^/]*' \) | head -3)
  per_command=$((count / 3 + 1))
  if [ "$per_command" -gt $OUT_FILES_LIMIT ] || [ -n "$bad" ]; then
    fail "\$OUT would not come back: $count files for 3 commands ${bad:+($bad)}"
  else
    say "\$OUT: $(find "$OUT" -type f -printf '%f\n' | sort | tr '\n' ' ')($count files for 3 commands, at most $OUT_FILES_LIMIT each)"
  fi
  finish
fi

"stage_$STAGE"
finish
