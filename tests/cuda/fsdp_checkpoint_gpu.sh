#!/usr/bin/env bash
# FSDP checkpoints cross between the engines, on one GPU and on 2 ranks with
# one GPU each: `tessera train --gpu NAME --plugin torch_fsdp` for 2 steps,
# resumed on the CPU engine's FSDP to step 4, and 2 CPU steps resumed on the
# GPUs, under full_shard and shard_grad_op. One rank writes a one-rank run's
# files (model.safetensors, optimizer.safetensors), 2 ranks the CPU engine's
# shard files (engine/sharded_checkpoint.h, FSDP's layout), so either engine
# resumes the other's. Skipped (77, one line) without a GPU; 2 ranks only
# with 2 GPUs. tools/gpu-check runs it. Never run on a GPU yet.
# Usage: fsdp_checkpoint_gpu.sh TESSERA MPIEXEC [GPU]
set -uo pipefail
source "$(dirname "$0")/../parallel/setup.sh"
gpu=${3:-h100-80g}
gpus=0
command -v nvidia-smi >/dev/null 2>&1 && gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [[ $gpus -lt 1 ]]; then
  echo "skipped: FSDP's checkpoints on GPUs need a GPU; this machine has none"
  exit 77
fi
small=(--model tiny-gpt2 --precision bf16 --micro-batch 4 --seq 64 --plugin torch_fsdp)
failures=0
for ranks in 1 2; do
  [[ $ranks -gt $gpus ]] && { echo "skipped: $ranks ranks need $ranks GPUs; this machine has $gpus"; continue; }
  for strategy in full_shard shard_grad_op; do
    for direction in gpu-cpu cpu-gpu; do
      first=(--gpu "$gpu"); second=(--gpu cpu)
      [[ $direction == cpu-gpu ]] && { first=(--gpu cpu); second=(--gpu "$gpu"); }
      out="$work/fsdp-$strategy-$ranks-$direction"
      what="FSDP $strategy on $ranks rank(s), $direction"
      if ! mpi "$ranks" "$tessera" train "${small[@]}" --fsdp-strategy "$strategy" "${first[@]}" --steps 2 --out "$out" >"$out.log" 2>&1; then
        echo "FAILED: $what, the first 2 steps:"; tail -n 3 "$out.log"; failures=$((failures + 1)); continue
      fi
      optimizer=$out/checkpoint/optimizer.safetensors
      [[ $ranks -eq 2 ]] && optimizer=$out/checkpoint/optimizer-rank-00001-of-00002.safetensors
      if [[ ! -f $optimizer ]]; then
        echo "FAILED: $what: no $(basename "$optimizer") in $out/checkpoint"; failures=$((failures + 1)); continue
      fi
      if ! mpi "$ranks" "$tessera" train "${small[@]}" --fsdp-strategy "$strategy" "${second[@]}" --steps 4 --resume --out "$out" >"$out.resumed.log" 2>&1 ||
         ! grep -q "trained steps 3-4" "$out.resumed.log"; then
        echo "FAILED: $what, resumed to step 4:"; tail -n 3 "$out.resumed.log"; failures=$((failures + 1)); continue
      fi
      echo "ok: $what: $(grep 'trained steps' "$out.resumed.log")"
    done
  done
done
exit $((failures > 0))
