#!/usr/bin/env bash
# hybrid_parallel's ZeRO checkpoints cross between the engines on tp 2 × dp 2,
# one GPU per rank: `mpirun -np 4 tessera train --gpu NAME --plugin
# hybrid_parallel --tp 2 --dp 2 --zero-stage S` for 2 steps, resumed on the
# CPU's hybrid_parallel to step 4, and 2 CPU steps resumed on the GPUs, for
# ZeRO stage 1 and 2, stage 1 with sequence parallelism too. Both write the
# CPU engine's consolidated checkpoint (engine/consolidated_checkpoint.h:
# each dp group's shards gathered, then each tp group's parts, into whole
# tensors in model.safetensors and optimizer.safetensors), so either resumes
# the other's. Skipped (77, one line) without 4 GPUs; tools/gpu-check runs
# it. Never run on a GPU yet.
# Usage: hybrid_zero_checkpoint_gpu.sh TESSERA MPIEXEC [GPU]
set -uo pipefail
source "$(dirname "$0")/../parallel/setup.sh"
gpu=${3:-h100-80g}
gpus=0
command -v nvidia-smi >/dev/null 2>&1 && gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [[ $gpus -lt 4 ]]; then
  echo "skipped: tp 2 × dp 2 needs 4 GPUs, one per rank; this machine has $gpus"
  exit 77
fi
small=(--model tiny-gpt2 --precision bf16 --micro-batch 4 --seq 64 --plugin hybrid_parallel --tp 2 --dp 2)
failures=0
for variant in 1 2 1-sp; do
  stage=${variant%%-*}
  hybrid=(--zero-stage "$stage")
  [[ $variant == *sp ]] && hybrid+=(--sequence-parallel)
  for direction in gpu-cpu cpu-gpu; do
    first=(--gpu "$gpu"); second=(--gpu cpu)
    [[ $direction == cpu-gpu ]] && { first=(--gpu cpu); second=(--gpu "$gpu"); }
    out="$work/hybrid-zero$variant-$direction"
    if ! mpi 4 "$tessera" train "${small[@]}" "${hybrid[@]}" "${first[@]}" --steps 2 --out "$out" >"$out.log" 2>&1; then
      echo "FAILED: ZeRO-$variant $direction, the first 2 steps:"; tail -n 3 "$out.log"; failures=$((failures + 1)); continue
    fi
    if [[ ! -f $out/checkpoint/optimizer.safetensors ]]; then
      echo "FAILED: ZeRO-$variant $direction: no consolidated optimizer.safetensors in $out/checkpoint"; failures=$((failures + 1)); continue
    fi
    if ! mpi 4 "$tessera" train "${small[@]}" "${hybrid[@]}" "${second[@]}" --steps 4 --resume --out "$out" >"$out.resumed.log" 2>&1 ||
       ! grep -q "trained steps 3-4" "$out.resumed.log"; then
      echo "FAILED: ZeRO-$variant $direction, resumed to step 4:"; tail -n 3 "$out.resumed.log"; failures=$((failures + 1)); continue
    fi
    echo "ok: hybrid_parallel tp 2 × dp 2 ZeRO-$variant $direction: $(grep 'trained steps' "$out.resumed.log")"
  done
done
exit $((failures > 0))
