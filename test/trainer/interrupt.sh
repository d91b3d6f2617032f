#!/bin/bash
# Starts a trainer, waits until it trains, sends Ctrl-C (SIGINT, or the
# signal named last: TERM, HUP) and prints its exit status.
# Usage: interrupt.sh LOG TRAIN_ARGS... [TERM|HUP]
log=$1
shift
signal=INT
case "${@: -1}" in
  TERM | HUP) signal=${@: -1}; set -- "${@:1:$#-1}" ;;
esac
"$@" > "$log" 2>&1 &
pid=$!
for _ in $(seq 600); do
  grep -q "^training steps" "$log" && break
  sleep 0.05
done
sleep 0.3
kill -"$signal" "$pid"
wait "$pid"
echo "exit status $?"
