#!/usr/bin/env bash
# ZeRO checkpoints cross between the engines on 2 ranks, one GPU each:
# `mpirun -np 2 tessera train --gpu NAME --plugin low_level_zero` for 2 steps,
# resumed on the CPU's low_level_zero to step 4, and 2 CPU steps resumed on
# the GPUs, for ZeRO stage 1, 2, and 2 with --cpu-offload. Both write the CPU engine's shard files
# (engine/sharded_checkpoint.h: model.safetensors and one optimizer file per
# rank), so either resumes the other's. Skipped (77, one line) without 2
# GPUs; tools/gpu-check runs it. Never run on a GPU yet.
# Usage: zero_checkpoint_gpu.sh TESSERA MPIEXEC [GPU]
set -uo pipefail
source "$(dirname "$0")/../parallel/setup.sh"
gpu=${3:-h100-80g}
gpus=0
command -v nvidia-smi >/dev/null 2>&1 && gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [[ $gpus -lt 2 ]]; then
  echo "skipped: 2 ranks need 2 GPUs, one each; this machine has $gpus"
  exit 77
fi
small=(--model tiny-gpt2 --precision bf16 --micro-batch 4 --seq 64)
failures=0
for variant in 1 2 2-offload; do
  stage=${variant%%-*}
  for direction in gpu-cpu cpu-gpu; do
    first=(--gpu "$gpu"); second=(--gpu cpu)
    [[ $direction == cpu-gpu ]] && { first=(--gpu cpu); second=(--gpu "$gpu"); }
    out="$work/zero$variant-$direction"
    zero=(--plugin low_level_zero --zero-stage "$stage")
    [[ $variant == *offload ]] && zero+=(--cpu-offload)
    if ! mpi 2 "$tessera" train "${small[@]}" "${zero[@]}" "${first[@]}" --steps 2 --out "$out" >"$out.log" 2>&1; then
      echo "FAILED: ZeRO-$variant $direction, the first 2 steps:"; tail -n 3 "$out.log"; failures=$((failures + 1)); continue
    fi
    if [[ ! -f $out/checkpoint/optimizer-rank-00001-of-00002.safetensors ]]; then
      echo "FAILED: ZeRO-$variant $direction: no shard file of rank 1 in $out/checkpoint"; failures=$((failures + 1)); continue
    fi
    if ! mpi 2 "$tessera" train "${small[@]}" "${zero[@]}" "${second[@]}" --steps 4 --resume --out "$out" >"$out.resumed.log" 2>&1 ||
       ! grep -q "trained steps 3-4" "$out.resumed.log"; then
      echo "FAILED: ZeRO-$variant $direction, resumed to step 4:"; tail -n 3 "$out.resumed.log"; failures=$((failures + 1)); continue
    fi
    echo "ok: ZeRO-$variant $direction: $(grep 'trained steps' "$out.resumed.log")"
  done
done
exit $((failures > 0))
