#!/usr/bin/env bash
# ZeRO checkpoints cross between the engines, one GPU per rank: 2 GPU steps
# resumed on the CPU to step 4, and 2 CPU steps resumed on the GPUs.
#  - low_level_zero on 2 ranks, ZeRO stage 1, 2, and 2 with --cpu-offload:
#    both engines write the CPU engine's shard files
#    (engine/sharded_checkpoint.h: model.safetensors and one optimizer file
#    per rank);
#  - with 4 GPUs, hybrid_parallel's ZeRO on tp 2 × dp 2, stage 1, 2, and 1
#    with --sequence-parallel: both write the CPU engine's consolidated
#    checkpoint (engine/consolidated_checkpoint.h: each dp group's shards
#    gathered, then each tp group's parts, into whole tensors in
#    model.safetensors and optimizer.safetensors); and stage 1 on tp 2 ×
#    cp 2, whose shards are over the dp × cp ranks (gathered over them).
# So either engine resumes the other's. Skipped (77, one line) without 2
# GPUs; tools/gpu-check runs it. Never run on a GPU yet.
# Usage: zero_checkpoint_gpu.sh TESSERA MPIEXEC [GPU]
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
small=(--model tiny-gpt2 --precision bf16 --micro-batch 4 --seq 64)
failures=0
shard_file=optimizer-rank-00001-of-00002.safetensors
crosses 2 "ZeRO-1" "$shard_file" --plugin low_level_zero --zero-stage 1
crosses 2 "ZeRO-2" "$shard_file" --plugin low_level_zero --zero-stage 2
crosses 2 "ZeRO-2 offload" "$shard_file" --plugin low_level_zero --zero-stage 2 --cpu-offload
if [[ $gpus -lt 4 ]]; then
  echo "not run: hybrid_parallel's ZeRO on tp 2 × dp 2 needs 4 GPUs; this machine has $gpus"
else
  hybrid=(--plugin hybrid_parallel --tp 2 --dp 2)
  crosses 4 "hybrid ZeRO-1" optimizer.safetensors "${hybrid[@]}" --zero-stage 1
  crosses 4 "hybrid ZeRO-2" optimizer.safetensors "${hybrid[@]}" --zero-stage 2
  crosses 4 "hybrid ZeRO-1 sp" optimizer.safetensors "${hybrid[@]}" --zero-stage 1 --sequence-parallel
  crosses 4 "hybrid ZeRO-1 tp 2 cp 2" optimizer.safetensors --plugin hybrid_parallel --tp 2 --cp 2 --dp 1 --zero-stage 1
fi
exit $((failures > 0))
