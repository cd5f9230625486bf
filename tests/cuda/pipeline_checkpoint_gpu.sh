#!/usr/bin/env bash
# Pipeline checkpoints cross between the engines on 2 ranks, one GPU each:
# `mpirun -np 2 tessera train --gpu NAME --plugin hybrid_parallel --pp 2` for
# 2 steps, resumed on the CPU engine's pipeline to step 4, and 2 CPU steps
# resumed on the GPUs, with 1F1B and GPipe, and interleaved with 2 model
# chunks per stage (tiny-gpt2 with 4 blocks, one a chunk). Both write the CPU engine's
# consolidated checkpoint (engine/consolidated_checkpoint.h: whole tensors,
# the tied embedding once), and each stage loads its tensors from it, so
# either engine resumes the other's. Skipped (77, one line) without 2 GPUs;
# tools/gpu-check runs it. Never run on a GPU yet.
# Usage: pipeline_checkpoint_gpu.sh TESSERA MPIEXEC [GPU]
set -uo pipefail
source "$(dirname "$0")/../parallel/setup.sh"
gpu=${3:-h100-80g}
gpus=0
command -v nvidia-smi >/dev/null 2>&1 && gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [[ $gpus -lt 2 ]]; then
  echo "skipped: 2 ranks need 2 GPUs, one each; this machine has $gpus"
  exit 77
fi
small=(--precision bf16 --micro-batch 4 --seq 64 --plugin hybrid_parallel --dp 1 --pp 2 --micro-batches 4)
deep="$work/tiny-gpt2-4-blocks.json"
sed 's/"n_layer": 2,/"n_layer": 4,/' "$(dirname "$0")/../../models/tiny-gpt2.json" >"$deep"
failures=0
for schedule in 1f1b gpipe interleaved; do
  layout=(--model tiny-gpt2 --pp-schedule "$schedule")
  [[ $schedule == interleaved ]] && layout=(--model "$deep" --pp-schedule interleaved --model-chunks 2)
  for direction in gpu-cpu cpu-gpu; do
    first=(--gpu "$gpu"); second=(--gpu cpu)
    [[ $direction == cpu-gpu ]] && { first=(--gpu cpu); second=(--gpu "$gpu"); }
    out="$work/pp-$schedule-$direction"
    if ! mpi 2 "$tessera" train "${small[@]}" "${layout[@]}" "${first[@]}" --steps 2 --out "$out" >"$out.log" 2>&1; then
      echo "FAILED: pp 2 $schedule $direction, the first 2 steps:"; tail -n 3 "$out.log"; failures=$((failures + 1)); continue
    fi
    if ! mpi 2 "$tessera" train "${small[@]}" "${layout[@]}" "${second[@]}" --steps 4 --resume --out "$out" >"$out.resumed.log" 2>&1 ||
       ! grep -q "trained steps 3-4" "$out.resumed.log"; then
      echo "FAILED: pp 2 $schedule $direction, resumed to step 4:"; tail -n 3 "$out.resumed.log"; failures=$((failures + 1)); continue
    fi
    echo "ok: pp 2 $schedule $direction: $(grep 'trained steps' "$out.resumed.log")"
  done
done
exit $((failures > 0))
