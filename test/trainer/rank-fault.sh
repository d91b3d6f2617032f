#!/bin/bash
# Starts a data-parallel run under mpirun, waits until it trains, then
# stops (SIGSTOP: a hung rank) or kills (SIGKILL: a dead rank) one rank, and
# prints how the run ended and how long the others took to stop.
# Usage: rank-fault.sh LOG STOP|KILL RANK mpirun ARGS...
log=$1
signal=$2
rank=$3
shift 3
# The trainer's path: the launcher's argument that ends in /train.
program=
for arg in "$@"; do
  case "$arg" in */train) program=$(readlink -f "$arg") ;; esac
done
# This run's ranks (other tests' trainers may be running too).
ranks() {
  for pid in $(pgrep -x train); do
    [ "$(readlink -f /proc/"$pid"/exe 2>/dev/null)" = "$program" ] && echo "$pid"
  done
}
"$@" > "$log" 2>&1 &
launcher=$!
for _ in $(seq 600); do
  grep -q "^training steps" "$log" && break
  sleep 0.05
done
sleep 0.5
# The rank's process: Open MPI tells each its rank in its environment.
target=
for pid in $(ranks); do
  if tr '\0' '\n' < /proc/"$pid"/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$rank"; then
    target=$pid
  fi
done
if [ -z "$target" ]; then
  echo "no process of rank $rank"
  kill -9 "$launcher"
  exit 1
fi
start=$(date +%s)
kill -"$signal" "$target"
# Bounded: a run that is still there after 60 s has hung.
for _ in $(seq 600); do
  kill -0 "$launcher" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$launcher" 2>/dev/null; then
  echo "the run is still there 60 s after rank $rank was sent SIG$signal"
  kill -9 "$launcher"
  ranks | xargs -r kill -9
  exit 1
fi
wait "$launcher"
status=$?
echo "exit status $status after $(( $(date +%s) - start )) s"
[ -n "$(ranks)" ] && echo "ranks left running"
exit 0
