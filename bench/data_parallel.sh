#!/usr/bin/env bash
# Data-parallel step time on 1, 2 and 4 ranks for the same global batch, per
# plugin, side by side in one run: the median step time, its share inside
# collectives (waiting for other ranks included), and the speed-up over one
# rank. Then DDP's overlap: the time rank 0 waits for the all-reduce per step
# when its 6 buckets (0.25 MB each, tiny-llama's 1.4 MB of gradients) start
# inside backward, against one 25 MB bucket that can only start after
# backward (the median of 5 runs each, alternated); the share hidden under
# backward is 1 - the first / the second. On a shared 2-core machine the wait
# is mostly the other ranks' lateness, not the transfer, so this share is noise
# there; tests/parallel/data_parallel_test.cpp proves the buckets start in backward.
# Usage: bench/data_parallel.sh [build/cli/tessera] [steps]
# Needs mpirun and python3 (to read metrics.json); on a 2-core machine 4 ranks
# share 2 cores (--oversubscribe, OMP_NUM_THREADS=1 per rank), so the numbers
# measure the engine's overheads, not a cluster's scaling.
set -euo pipefail
tessera=${1:-build/cli/tessera}
steps=${2:-12}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1

# run NAME RANKS PLUGIN [options...]: trains into $work/NAME and prints the
# median step time (s), the share of step time in collectives and rank 0's
# all-reduce wait per step (s).
run() {
  local name=$1 ranks=$2 plugin=$3
  shift 3
  local precision=fp32
  [[ $plugin == gemini ]] && precision=bf16
  # Global batch 16 sequences of 128 tokens: 16 / ranks micro-batches of 1 on each rank.
  local args=(train --model tiny-llama --plugin "$plugin" --precision "$precision" --micro-batch 1 --micro-batches $((16 / ranks)) --seq 128
              --steps "$steps" --out "$work/$name" "$@")
  if [[ $ranks -eq 1 ]]; then "$tessera" "${args[@]}" > /dev/null
  else mpirun --allow-run-as-root --oversubscribe -np "$ranks" "$tessera" "${args[@]}" > /dev/null; fi
  python3 - "$work/$name/metrics.json" <<'PY'
import json, statistics, sys
m = json.load(open(sys.argv[1]))
steps = m["step_time_s"][2:] or m["step_time_s"]  # the first steps warm up
comm = sum(c["seconds"] for c in m["communication"].values())
print(statistics.median(steps), comm / sum(m["step_time_s"]), m["communication"]["all_reduce"]["seconds"] / len(m["step_time_s"]))
PY
}

printf '%-16s %5s %14s %12s %10s\n' plugin ranks "step (median)" "in comm" speed-up
for plugin in torch_ddp low_level_zero torch_fsdp gemini; do
  options=()
  [[ $plugin == gemini ]] && options=(--chunk-size $((1 << 18)))
  [[ $plugin == torch_ddp ]] && options=(--bucket-mb 0.25)
  one=""
  for ranks in 1 2 4; do
    read -r median comm _ < <(run "$plugin-$ranks" "$ranks" "$plugin" "${options[@]}")
    [[ -z $one ]] && one=$median
    printf '%-16s %5d %12.1f ms %11.1f%% %9.2fx\n' "$plugin" "$ranks" "$(python3 -c "print($median*1000)")" \
      "$(python3 -c "print($comm*100)")" "$(python3 -c "print($one/$median)")"
  done
done

echo
printf '%-10s %5s %24s %24s %8s\n' "DDP" ranks "wait, buckets in backward" "wait, one after backward" hidden
median() { python3 -c "import statistics, sys; print(statistics.median(map(float, sys.argv[1:])))" "$@"; }
for ranks in 2 4; do
  overlapped=() after=()
  for repeat in 1 2 3 4 5; do
    read -r _ _ wait < <(run "ddp-overlap-$ranks-$repeat" "$ranks" torch_ddp --bucket-mb 0.25) && overlapped+=("$wait")
    read -r _ _ wait < <(run "ddp-after-$ranks-$repeat" "$ranks" torch_ddp --bucket-mb 25) && after+=("$wait")
  done
  overlapped=$(median "${overlapped[@]}") after=$(median "${after[@]}")
  printf '%-10s %5d %21.2f ms %21.2f ms %7.0f%%\n' all_reduce "$ranks" "$(python3 -c "print($overlapped*1000)")" \
    "$(python3 -c "print($after*1000)")" "$(python3 -c "print(100*(1-$overlapped/$after))")"
done
