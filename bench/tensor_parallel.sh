#!/usr/bin/env bash
# Tensor against data parallelism on the same ranks and global batch, side by
# side in one run: tiny-gpt2 (4 heads, so tp 4 divides it), hybrid_parallel,
# 16 sequences of 64 tokens (its context) per step, fp32. For each layout: the median step
# time, the share of it rank 0 spent in tensor-parallel and in data-parallel
# calls (waiting for the other ranks included), and the tensor-parallel
# payload per step (planner/tp_traffic.h's formula; the tests hold the engine
# to it). Payloads count as nccl-tests does: an all-reduce's buffer once,
# though a ring moves twice what an all-gather of the same payload moves.
# "vs dp": the step time against pure data parallelism on as many ranks.
# Usage: bench/tensor_parallel.sh [build/cli/tessera] [steps]
# Needs mpirun and python3. On a 2-core machine 4 ranks share 2 cores
# (--oversubscribe, OMP_NUM_THREADS=1 per rank): the numbers show what each
# layout costs the engine here, not a cluster's scaling — tensor parallelism
# splits every GEMM into smaller ones and adds 4 collectives per block per
# micro-batch, which only pays where a model does not fit one device.
set -euo pipefail
tessera=${1:-build/cli/tessera}
steps=${2:-12}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1

# run NAME DP TP [options...]: prints the median step time (s), the tp and dp
# shares of the step time in collectives and the tp payload per step.
run() {
  local name=$1 dp=$2 tp=$3
  shift 3
  local ranks=$((dp * tp))
  local args=(train --model tiny-gpt2 --plugin hybrid_parallel --dp "$dp" --tp "$tp" --micro-batch 1 --micro-batches $((16 / dp)) --seq 64
              --precision fp32 --steps "$steps" --out "$work/$name" "$@")
  if [[ $ranks -eq 1 ]]; then "$tessera" "${args[@]}" > /dev/null
  else mpirun --allow-run-as-root --oversubscribe -np "$ranks" "$tessera" "${args[@]}" > /dev/null; fi
  python3 - "$work/$name/metrics.json" <<'PY'
import json, statistics, sys
m = json.load(open(sys.argv[1]))
steps = m["step_time_s"][2:] or m["step_time_s"]  # the first steps warm up
total = sum(m["step_time_s"])
tp = m.get("tensor_parallel_communication", {})
print(statistics.median(steps), sum(c["seconds"] for c in tp.values()) / total,
      sum(c["seconds"] for c in m["communication"].values()) / total, sum(c["bytes"] for c in tp.values()) / len(m["step_time_s"]))
PY
}

printf '%-18s %14s %9s %9s %16s %9s\n' layout "step (median)" "in tp" "in dp" "tp payload/step" "vs dp"
for layout in "1 1" "2 1" "1 2" "1 2 --sequence-parallel" "4 1" "2 2" "1 4" "1 4 --sequence-parallel"; do
  read -r dp tp extra <<< "$layout"
  read -r median tp_share dp_share tp_bytes < <(run "dp$dp-tp$tp${extra:+-sp}" "$dp" "$tp" ${extra:+$extra})
  [[ $tp -eq 1 ]] && base=$median
  name="dp $dp × tp $tp${extra:+ + sp}"
  printf '%-18s %11.1f ms %8.1f%% %8.1f%% %13.2f MB %8.2fx\n' "$name" "$(python3 -c "print($median*1000)")" "$(python3 -c "print($tp_share*100)")" \
    "$(python3 -c "print($dp_share*100)")" "$(python3 -c "print($tp_bytes/1e6)")" "$(python3 -c "print($median/$base)")"
done
