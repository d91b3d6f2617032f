#!/usr/bin/env bash
# Runs the frontend fuzzer for a bounded time, seeded with the project's model
# files. Usage: run-fuzzer.sh FUZZER SECONDS CORPUS_DIR DICT SEED_DIR...
# Exits non-zero if the fuzzer found a crash, a hang, a leak or a verifier
# disagreement (the reproducer is left in the corpus directory's parent).
set -euo pipefail
fuzzer=$1 seconds=${MNEMO_FUZZ_SECONDS:-$2} corpus=$3 dict=$4
shift 4
mkdir -p "$corpus"
artifacts=$(dirname "$corpus")/artifacts
mkdir -p "$artifacts"
log=$(dirname "$corpus")/fuzz.log
# -timeout: any single input taking 10 s counts as a hang.
# -rss_limit_mb: any input needing 2 GiB counts as a memory blow-up.
if "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
     -max_len=8192 -dict="$dict" -print_final_stats=1 \
     -artifact_prefix="$artifacts/" "$corpus" "$@" >"$log" 2>&1; then
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  echo "fuzz-frontend: $runs inputs in ${seconds}s, no crashes"
else
  echo "fuzz-frontend: FAILED; the last lines of $log:"
  tail -n 40 "$log"
  exit 1
fi
