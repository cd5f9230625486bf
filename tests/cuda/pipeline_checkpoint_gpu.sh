#!/usr/bin/env bash
# Pipeline checkpoints cross between the engines on 2 ranks, one GPU each:
# `mpirun -np 2 tessera train --gpu NAME --plugin hybrid_parallel --pp 2` for
# 2 steps, resumed on the CPU engine's pipeline to step 4, and 2 CPU steps
# resumed on the GPUs, with 1F1B and GPipe, and interleaved with 2 model
# chunks per stage (tiny-gpt2 with 4 blocks, one a chunk); with 4 GPUs, pp 2 ×
# cp 2 at ZeRO-1 (1F1B; the shards over each stage's cp ranks). Both write the CPU engine's
# consolidated checkpoint (engine/consolidated_checkpoint.h: whole tensors,
# the tied embedding once), and each stage loads its tensors from it, so
# either engine resumes the other's. Skipped (77, one line) without 2 GPUs;
# tools/gpu-check runs it. Never run on a GPU yet.
# Usage: pipeline_checkpoint_gpu.sh TESSERA MPIEXEC [GPU]
set -uo pipefail
source "$(dirname "$0")/../parallel/setup.sh"
source "$(dirname "$0")/checkpoint_crosses.sh"
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
  crosses 2 "pp 2 $schedule" optimizer.safetensors "${layout[@]}"
done
if [[ $gpus -lt 4 ]]; then
  echo "not run: pp 2 × cp 2 needs 4 GPUs; this machine has $gpus"
else
  crosses 4 "pp 2 cp 2 ZeRO-1" optimizer.safetensors --model tiny-gpt2 --pp-schedule 1f1b --cp 2 --zero-stage 1
fi
exit $((failures > 0))
