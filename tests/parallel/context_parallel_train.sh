#!/usr/bin/env bash
# `mpirun -np 4 tessera train --plugin hybrid_parallel --cp 2` on the real
# binary: dp 2 × cp 2 trains tiny-llama, the loss falls, every rank's measured
# peaks equal the planner's estimate in every category (0.0%: the ring's
# buffers are the planner's ring_* activation terms), and a dry run of rank 3
# alone books what rank 3 measured; cp 2 in bf16 (its fp32 running output) is booked as estimated too.
# Usage: context_parallel_train.sh TESSERA MPIEXEC
set -euo pipefail
source "$(dirname "$0")/setup.sh"
options=(--model tiny-llama --plugin hybrid_parallel --dp 2 --tp 1 --pp 1 --cp 2 --micro-batch 2 --seq 64 --zero-stage 1)
mpi 4 "$tessera" train "${options[@]}" --steps 6 --out "$work/run" > /dev/null
worst=$(largest_error_pct "$work/run")
losses=$(tr -d ' \n' < "$work/run/metrics.json" | grep -o '"loss":\[[^]]*\]')
echo "dp 2 × cp 2: largest error ${worst}%, $losses"
awk -v w="$worst" 'BEGIN {exit !(w == 0)}' || { echo "an estimate differs from the measured peak"; exit 1; }
first=$(echo "$losses" | sed 's/"loss":\[\([^,]*\),.*/\1/')
last=$(echo "$losses" | sed 's/.*,\([^,]*\)\]$/\1/')
awk -v a="$first" -v b="$last" 'BEGIN {exit !(b < a)}' || { echo "the loss did not fall: $first -> $last"; exit 1; }
# metrics.json's ring traffic: rank 0 sends cp − 1 = 1 key/value block per layer forward and 2 backward
# (planner::ring_sends, recompute none), each 2 · b · s/cp · kv_width elements of fp32, one micro-batch a step.
python3 - "$work/run/metrics.json" <<'PY' || { echo "metrics.json's context_parallel_communication is not the ring's traffic"; exit 1; }
import json, sys
metrics = json.load(open(sys.argv[1]))
sent, model = metrics["context_parallel_communication"]["send"], metrics["model"]
layers = model["num_layers"]
kv_width = model["num_key_value_heads"] * model["hidden_size"] // model["num_attention_heads"]
calls, block_bytes = 6 * layers * 3, 2 * 2 * 32 * kv_width * 4
print(f"ring: {sent['calls']} sends of {sent['bytes']} bytes; expected {calls} of {calls * block_bytes}")
sys.exit(0 if sent["calls"] == calls and sent["bytes"] == calls * block_bytes else 1)
PY
"$tessera" train "${options[@]}" --dry-run --rank 3 --out "$work/dry" > /dev/null
real_row=$("$tessera" compare "$work/run/plan.json" "$work/run/metrics.json" --format json | tr -d ' \n' | grep -o '{"categories":\[[^]]*\],"rank":3}')
dry_row=$("$tessera" compare "$work/dry/plan.json" "$work/dry/metrics.json" --format json | tr -d ' \n' | grep -o '{"categories":\[[^]]*\],"rank":3}')
[[ -n "$real_row" && "$real_row" == "$dry_row" ]] || { echo "the dry run of rank 3 differs from the run's rank 3"; echo "$real_row"; echo "$dry_row"; exit 1; }
echo "the dry run of rank 3 books what rank 3 measured"
# bf16 storage adds the ring's fp32 running output (ring_merged_output): booked as the planner counts it.
mpi 2 "$tessera" train --model tiny-llama --plugin hybrid_parallel --dp 1 --tp 1 --pp 1 --cp 2 --micro-batch 2 --seq 64 --precision bf16 \
  --steps 2 --out "$work/bf16" > /dev/null
worst=$(largest_error_pct "$work/bf16")
echo "cp 2 in bf16: largest error ${worst}%"
awk -v w="$worst" 'BEGIN {exit !(w == 0)}' || { echo "a bf16 estimate differs from the measured peak"; exit 1; }
