#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, then runs the lit
# tests (frontend, diagnostics, dialect, passes, the generated trainers), the
# GoogleTest units and bounded fuzzing runs of the frontend and of the
# trainer's file readers. Ends with one line: "N passed, M failed".
#
# MNEMO_FUZZ_SECONDS (default 60 and 30) bounds each fuzzing run.
set -uo pipefail
source "$(dirname "$0")/setup.sh"
cd "$MNEMO_ROOT"

mnemo_install_packages || exit 1
mnemo_build || exit 1

passed=0
failed=0

echo "== lit tests"
lit_log=$(mktemp)
/usr/bin/python3 "$LLVM_PREFIX/build/utils/lit/lit.py" -sv "$MNEMO_BUILD/test" >"$lit_log" 2>&1
lit_status=$?
grep -E "^(FAIL|XPASS|UNRESOLVED):|Passed|Failed|Total" "$lit_log"
lit_passed=$(grep -oE "Passed *: *[0-9]+" "$lit_log" | grep -oE "[0-9]+$" || echo 0)
lit_failed=$(grep -oE "Failed *: *[0-9]+" "$lit_log" | grep -oE "[0-9]+$" || echo 0)
if [ "$lit_status" -ne 0 ] && [ "${lit_failed:-0}" -eq 0 ]; then
  tail -n 40 "$lit_log"
  lit_failed=1
fi
[ "$lit_status" -ne 0 ] && grep -B2 -A30 "^FAIL:\|\*\*\*\* TEST" "$lit_log" | head -n 150
passed=$((passed + ${lit_passed:-0}))
failed=$((failed + ${lit_failed:-0}))
rm -f "$lit_log"

# ctest: the GoogleTest units, then the fuzzer.
run_ctest() {
  local label=$1 log
  shift
  echo "== $label"
  log=$(mktemp)
  (cd "$MNEMO_BUILD" && ctest --output-on-failure "$@") >"$log" 2>&1
  local status=$?
  grep -E "tests passed|tests failed|\*\*\*Failed|mnemo-fuzz-[a-z]*:" "$log" | grep -v "^ *[0-9]*/[0-9]* Test" || true
  if [ "$status" -ne 0 ]; then
    tail -n 60 "$log"
    # A fuzzer's finding in one line (sanitizer, kind, place), last: where
    # only the end of this output is shown, it still names the bug.
    grep -E "SUMMARY: " "$log" | sed 's/^[0-9]*: //' | awk '!seen[$0]++'
  fi
  local total fail
  total=$(grep -oE "tests failed out of [0-9]+" "$log" | grep -oE "[0-9]+$" || echo 0)
  fail=$(grep -oE "[0-9]+ tests failed out of" "$log" | grep -oE "^[0-9]+" || echo 0)
  if [ "$status" -ne 0 ] && [ "${fail:-0}" -eq 0 ]; then fail=1; fi
  passed=$((passed + ${total:-0} - ${fail:-0}))
  failed=$((failed + ${fail:-0}))
  rm -f "$log"
}
run_ctest "unit tests" -E '^fuzz-'
run_ctest "fuzzing the frontend (${MNEMO_FUZZ_SECONDS:-60}s) and the trainer's readers (${MNEMO_FUZZ_SECONDS:-30}s)" -V -R '^fuzz-'

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
