#!/usr/bin/env bash
# Runs a fuzzer for a bounded time, seeded with the project's files (model
# files for the frontend, checkpoints and data files for the runtime).
# Usage: run-fuzzer.sh FUZZER SECONDS CORPUS_DIR DICT SEED_DIR...
# (DICT may be empty.)
# Exits non-zero if the fuzzer found a crash, a hang, a leak, undefined
# behaviour or a verifier disagreement (the reproducer is left in the
# corpus directory's parent).
set -euo pipefail
fuzzer=$1 seconds=${MNEMO_FUZZ_SECONDS:-$2} corpus=$3 dict=$4
shift 4
name=$(basename "$fuzzer")
dict_option=()
[ -n "$dict" ] && dict_option=(-dict="$dict")
mkdir -p "$corpus"
artifacts=$corpus-artifacts
mkdir -p "$artifacts"
log=$corpus.log
# -timeout: any single input taking 10 s counts as a hang.
# -rss_limit_mb: any input needing 2 GiB counts as a memory blow-up.
if "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
     -max_len=8192 "${dict_option[@]}" -print_final_stats=1 \
     -artifact_prefix="$artifacts/" "$corpus" "$@" >"$log" 2>&1; then
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  echo "$name: $runs inputs in ${seconds}s, no crashes"
else
  echo "$name: FAILED; the last lines of $log:"
  tail -n 40 "$log"
  exit 1
fi
