#!/bin/bash
# Starts a trainer, waits until it trains, sends Ctrl-C (SIGINT) and
# prints its exit status. Usage: interrupt.sh LOG TRAIN_ARGS...
log=$1
shift
"$@" > "$log" 2>&1 &
pid=$!
for _ in $(seq 600); do
  grep -q "^training steps" "$log" && break
  sleep 0.05
done
sleep 0.3
kill -INT "$pid"
wait "$pid"
echo "exit status $?"
