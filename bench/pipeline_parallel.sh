#!/usr/bin/env bash
# Pipeline and tensor against data parallelism on 2 ranks, side by side in one
# run: a small GPT-2 written here (2 blocks of 384 hidden, 4 heads, byte
# vocabulary, 3.7M parameters: big enough that a micro-batch's compute, not
# MPI's latency, dominates; pp 2 puts one block on each stage, so the plan is
# plain 1F1B: with two blocks a stage the planner picks interleaving), 8
# sequences of 128 tokens per step, fp32, micro-batch 1 (8 micro-batches).
# For each layout the median measured step time next to the simulator's
# prediction for the same plan, and then the 1F1B bubble: the share of the
# stages' time spent idle, measured in the run's trace.json and in the
# simulator's predicted_trace.json by one metric.
#
# The prediction runs on a GPU profile of this machine (`tessera plan --gpu
# FILE`, which plan.json carries whole): its peak and memory bandwidth are
# calibrated so that the simulator's one-rank passes and optimizer step take
# what the trace of a one-rank step measured here (one measurement, the same
# run); the rest is `tessera gpus --profile cpu` (planner/src/cpu_backend.cpp).
# Usage: bench/pipeline_parallel.sh [build/cli/tessera] [steps]
#   LAYOUTS="dp2 pp2" runs only those layouts (pp2 last gives the bubble line);
#   BUBBLE_TOLERANCE=0.2 exits 1 when the measured bubble is further than that
#   from the predicted one (tests/parallel/pipeline_bubble.sh); BUBBLE_RUNS=7
#   measures 7 runs of pp 2 and takes the median of their bubbles; MPIEXEC names mpirun; KEEP_WORK=DIR copies the runs'
#   plans, metrics and traces there.
# Needs mpirun and python3. On a 2-core machine each rank has a core; the
# numbers show what each layout costs the engine here, not a cluster's scaling.
set -euo pipefail
tessera=$(realpath "${1:-build/cli/tessera}")
steps=${2:-8}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap '[[ -n ${KEEP_WORK:-} ]] && cp -r "$work" "$KEEP_WORK"; rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
model=$work/bench-gpt2.json
sed -e 's/"n_embd": 128/"n_embd": 384/' -e 's/"n_ctx": 64/"n_ctx": 128/' \
  -e 's/"n_positions": 64/"n_positions": 128/' -e '/_comment/d' "$here/../models/tiny-gpt2.json" > "$model"
shape=(--model "$model" --global-batch 8 --seq 128 --precision fp32 --micro-batch 1 --recompute none)
metrics=$here/pipeline_metrics.py

# train NAME: trains plan NAME on 2 ranks and prints its median step time (s).
train() {
  "${MPIEXEC:-mpirun}" --oversubscribe -np 2 "$tessera" train --plan "$work/$1.json" --steps "$steps" --out "$work/$1" > /dev/null
  python3 "$metrics" step "$work/$1/metrics.json"
}

# plan NAME GPUS [options...]: the plan of this layout on this CPU's profile.
plan() {
  local name=$1 gpus=$2
  shift 2
  "$tessera" plan "${shape[@]}" --gpu "$work/cpu.json" --gpus "$gpus" --gpus-per-node "$gpus" --top 1 "$@" \
    --output "$work/$name.json" > /dev/null
}

# 1. The one-rank step, measured and simulated: calibrates the profile.
"$tessera" train --model "$model" --plugin torch_ddp --micro-batch 1 --micro-batches 8 --seq 128 --precision fp32 --steps "$steps" --out "$work/one" > /dev/null
one_measured=$(python3 "$metrics" step "$work/one/metrics.json")
echo "one rank: $(python3 -c "print(f\"{1e3 * $one_measured:.1f}\")") ms a step (its trace calibrates the profile)"
"$tessera" gpus --profile cpu > "$work/cpu.json"
plan one 1 --plugin torch_ddp
python3 "$metrics" calibrate "$work/cpu.json" "$work/one.json" "$work/one/trace.json" > "$work/cpu-calibrated.json"
mv "$work/cpu-calibrated.json" "$work/cpu.json"

# 2. Each layout on 2 ranks: measured and predicted step time.
wanted=${LAYOUTS:-dp2 tp2 tp2-sp pp2}
printf '%-20s %14s %14s %10s %8s\n' layout "step (median)" "predicted" "error" "vs ${wanted%% *}"
for layout in "dp2:--plugin torch_ddp --dp 2" "tp2:--plugin hybrid_parallel --tp 2 --sequence-parallel off" \
  "tp2-sp:--plugin hybrid_parallel --tp 2 --sequence-parallel on" "pp2:--plugin hybrid_parallel --pp 2"; do
  name=${layout%%:*}
  [[ " $wanted " == *" $name "* ]] || continue
  read -r -a options <<< "${layout#*:}"
  plan "$name" 2 "${options[@]}"
  measured=$(train "$name")
  base=${base:-$measured}  # the first layout run (dp 2 by default) is the ratios' base
  python3 "$metrics" row "$name" "$work/$name.json" "$measured" "$base"
done

# 3. The 1F1B bubble of the pp 2 run, measured against predicted: of
# BUBBLE_RUNS runs (3 unless set), the median. Something else on the machine
# moves the bubble of the run it disturbs, either way; the median leaves that
# run out.
if [[ -d $work/pp2 ]]; then
  mv "$work/pp2" "$work/pp2-1"
  traces=$work/pp2-1/trace.json
  for run in $(seq 2 "${BUBBLE_RUNS:-3}"); do
    train pp2 > /dev/null
    mv "$work/pp2" "$work/pp2-$run"
    traces+=,$work/pp2-$run/trace.json
  done
  python3 "$metrics" bubble "$traces" "$work/pp2-1/predicted_trace.json" ${BUBBLE_TOLERANCE:+"$BUBBLE_TOLERANCE"}
fi
