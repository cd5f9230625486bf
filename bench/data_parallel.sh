#!/usr/bin/env bash
# Data-parallel step time on 1, 2 and 4 ranks for the same global batch, per
# plugin, side by side in one run: the median step time, its share inside
# collectives (waiting for other ranks included), and the speed-up over one
# rank. DDP's all-reduce runs after backward, so none of it is hidden yet.
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
printf '%-16s %5s %14s %12s %10s\n' plugin ranks "step (median)" "in comm" speed-up
for plugin in torch_ddp low_level_zero torch_fsdp gemini; do
  precision=fp32
  [[ $plugin == gemini ]] && precision=bf16
  one=""
  for ranks in 1 2 4; do
    # Global batch 16 sequences of 128 tokens: 16 / ranks micro-batches of 1 on each rank.
    args=(train --model tiny-llama --plugin "$plugin" --precision "$precision" --micro-batch 1 --micro-batches $((16 / ranks)) --seq 128
          --steps "$steps" --out "$work/$plugin-$ranks")
    [[ $plugin == gemini ]] && args+=(--chunk-size $((1 << 18)))
    if [[ $ranks -eq 1 ]]; then "$tessera" "${args[@]}" > /dev/null
    else mpirun --allow-run-as-root --oversubscribe -np "$ranks" "$tessera" "${args[@]}" > /dev/null; fi
    read -r median comm < <(python3 - "$work/$plugin-$ranks/metrics.json" <<'PY'
import json, statistics, sys
m = json.load(open(sys.argv[1]))
steps = m["step_time_s"][2:] or m["step_time_s"]  # the first steps warm up
comm = sum(c["seconds"] for c in m["communication"].values())
print(statistics.median(steps), comm / sum(m["step_time_s"]))
PY
)
    [[ -z $one ]] && one=$median
    printf '%-16s %5d %12.1f ms %11.1f%% %9.2fx\n' "$plugin" "$ranks" "$(python3 -c "print($median*1000)")" \
      "$(python3 -c "print($comm*100)")" "$(python3 -c "print($one/$median)")"
  done
done
