#!/usr/bin/env bash
# Issue 16: killing one of 4 ranks of `tessera train` ends all of them, non-zero,
# within the communication timeout; no process is left behind.
# Usage: killed_rank.sh TESSERA MPIEXEC
set -uo pipefail
source "$(dirname "$0")/setup.sh"
timeout_s=20
start=$(date +%s)
# Launched directly (not through `mpi`, a function, which would run in a subshell): $! is mpirun.
"$mpiexec" -np 4 --allow-run-as-root --oversubscribe "$tessera" train --steps 100000 --micro-batch 1 --seq 32 \
  --comm-timeout "$timeout_s" --out "$work/run" > "$work/out" 2> "$work/err" &
launcher=$!
# Wait for the four ranks, let them train a moment, then kill one.
for _ in $(seq 100); do
  ranks=$(pgrep -P "$launcher" -f "train --steps 100000" | tr '\n' ' ')
  [[ $(wc -w <<< "$ranks") -eq 4 ]] && break
  sleep 0.1
done
[[ $(wc -w <<< "$ranks") -eq 4 ]] || { echo "the 4 ranks did not start: $ranks"; kill -9 "$launcher"; pkill -9 -f "$work/run"; exit 1; }
sleep 2
victim=$(awk '{print $2}' <<< "$ranks")
kill -9 "$victim"
wait "$launcher"
code=$?
elapsed=$(( $(date +%s) - start ))
left=$(pgrep -f "$work/run" | wc -l)
echo "killed rank pid $victim: mpirun exited $code after ${elapsed}s, $left processes left"
[[ $code -ne 0 ]] || { echo "expected a non-zero exit"; exit 1; }
(( elapsed <= timeout_s + 10 )) || { echo "took longer than the timeout"; exit 1; }
[[ $left -eq 0 ]] || { echo "processes left behind"; pkill -9 -f "$work/run"; exit 1; }
