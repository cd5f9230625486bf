#!/usr/bin/env bash
# Issue 16's --comm-timeout on 4 ranks (mpi_timeout_job.cpp): rank 1 is
# SIGKILLed (killed) or stops calling (stuck) at iteration 20 while the others
# all-reduce with a 3 s timeout. The job must end non-zero within 20 s and
# leave no process behind. A rank that prints its error prints one line naming
# itself and the call it waited in; when rank 1 is stuck, at least one does
# (after 3 s; mpirun then ends the rest). When rank 1 is killed, mpirun ends
# the job at once, usually before any timeout (mpi.h).
# Usage: mpi_timeout.sh MPIEXEC JOB killed|stuck
set -uo pipefail
mpiexec=$1
job=$2
failure=$3
tag="mpi-timeout-$failure-$$"  # on the job's command line, for pgrep
log=$(mktemp)
cleanup() {
  for pid in $(pgrep -f -- "$tag"); do kill -KILL "$pid" 2>/dev/null; done
  rm -f "$log"
}
trap cleanup EXIT
fail() {
  echo "mpi_timeout $failure: $*"
  cat "$log"
  exit 1
}

start=$(date +%s.%N)
timeout -s KILL 50 "$mpiexec" -np 4 --allow-run-as-root --oversubscribe "$job" "$failure" 3 "$tag" > "$log" 2>&1
status=$?
elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {printf "%.1f", e - s}')
[[ $status -ne 0 ]] || fail "mpirun exited 0 after $elapsed s"
awk -v e="$elapsed" 'BEGIN {exit !(e < 20)}' || fail "mpirun took $elapsed s (limit 20 s)"

# Ranks that mpirun ends still run for a moment; zombies do not match pgrep -f.
for _ in $(seq 50); do
  [[ -z $(pgrep -f -- "$tag") ]] && break
  sleep 0.1
done
[[ -z $(pgrep -f -- "$tag") ]] && left=0 || left=1
[[ $left -eq 0 ]] || fail "processes left over: $(pgrep -a -f -- "$tag")"

# The ranks' own lines: exactly the one message, at most once per rank.
expected="^all_reduce on 'world' \(rank ([023]) of 4, world rank \1\): MPI_Ialltoallv of 3\.91 KiB did not complete within 3 s \(--comm-timeout\); another rank has died or is stuck, or did not make this call$"
timeouts=$(grep -c -- '--comm-timeout' "$log")
wellformed=$(grep -cE -- "$expected" "$log")
ranks=$(grep -E -- "$expected" "$log" | sed -E 's/^all_reduce on .world. \(rank ([0-9]).*/\1/' | sort -u | wc -l)
[[ $timeouts -eq $wellformed && $ranks -eq $wellformed ]] || fail "a malformed or repeated timeout line"
if [[ $failure == stuck ]]; then
  [[ $timeouts -ge 1 ]] || fail "no rank reported the timeout"
  awk -v e="$elapsed" 'BEGIN {exit !(e >= 3)}' || fail "ended after $elapsed s, before the 3 s timeout"
fi
echo "$failure: mpirun exited $status after $elapsed s; $timeouts of the 3 other ranks printed the timeout line"
