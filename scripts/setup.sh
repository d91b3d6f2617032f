# Shared set-up for scripts/test.sh and scripts/demo.sh; source it.
#
# mnemo_install_packages: installs the Debian packages Mnemo needs, only
#   those missing (quiet when everything is there; needs root to install).
# mnemo_build: configures build/ with Ninja against Debian's LLVM/MLIR 19
#   (clang when present, for the fuzzer) and builds everything.

MNEMO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MNEMO_BUILD=${MNEMO_BUILD:-$MNEMO_ROOT/build}
LLVM_PREFIX=/usr/lib/llvm-19

# What the compiler and its tests need. Later stages add to this list.
MNEMO_PACKAGES=(
  cmake ninja-build clang libclang-rt-14-dev python3
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  libgtest-dev zlib1g-dev nlohmann-json3-dev
  python3-numpy python3-torch   # the reference peer for numerics
  dataset-fashion-mnist         # real data, /usr/share/datasets/fashion-mnist
  libopenblas-dev g++           # the CPU backend: GEMMs, and the trainer's compiler
  libdnnl-dev                   # oneDNN: the CPU backend's convolutions
  coinor-libcbc-dev             # the MILP solver behind --remat=optimal
  libopenmpi-dev openmpi-bin    # data parallelism: MPI collectives, mpirun
  fortunes                      # ~2.5 MB of English for the GPT example
  libboost-context-dev          # the CUDA emulator's fibers (test/cuda-emulator)
)

mnemo_install_packages() {
  local missing=() pkg
  for pkg in "${MNEMO_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "mnemo: missing packages: ${missing[*]}; install them as root (apt-get install ${missing[*]})" >&2
    return 1
  fi
  echo "mnemo: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  local log
  log=$(mktemp)
  if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    echo "mnemo: apt-get failed:" >&2
    tail -n 30 "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
}

mnemo_build() {
  if [ ! -f "$MNEMO_BUILD/build.ninja" ]; then
    local cc=cc cxx=c++
    if command -v clang >/dev/null && command -v clang++ >/dev/null; then
      cc=clang cxx=clang++
    fi
    echo "mnemo: configuring $MNEMO_BUILD"
    CC=$cc CXX=$cxx cmake -G Ninja -S "$MNEMO_ROOT" -B "$MNEMO_BUILD" \
      -DCMAKE_BUILD_TYPE=Release \
      -DMLIR_DIR="$LLVM_PREFIX/lib/cmake/mlir" \
      -DLLVM_EXTERNAL_LIT="$LLVM_PREFIX/build/utils/lit/lit.py" >"$MNEMO_BUILD.configure.log" 2>&1 || {
      echo "mnemo: cmake failed:" >&2
      tail -n 40 "$MNEMO_BUILD.configure.log" >&2
      return 1
    }
  fi
  echo "mnemo: building"
  ninja -C "$MNEMO_BUILD" >"$MNEMO_BUILD.build.log" 2>&1 || {
    echo "mnemo: the build failed:" >&2
    grep -E "error|FAILED" -A5 "$MNEMO_BUILD.build.log" | head -n 60 >&2
    return 1
  }
}
