#!/usr/bin/env bash
# A sharded plugin's checkpoints cross between the engines, on one GPU and on
# 2 ranks with one GPU each: `tessera train --gpu NAME` for 2 steps, resumed
# on the CPU engine to step 4, and 2 CPU steps resumed on the GPUs, once per
# value of the plugin's VARIANT option (VALUES separated by commas; a value's
# further words are more options, its first word names the run). One rank writes a one-rank run's
# files (model.safetensors, optimizer.safetensors), 2 ranks the CPU engine's
# shard files (engine/sharded_checkpoint.h), so either engine resumes the
# other's. Skipped (77, one line) without a GPU; 2 ranks only with 2 GPUs.
# The plugins' scripts (gemini_checkpoint_gpu.sh, fsdp_checkpoint_gpu.sh) call it.
# Usage: checkpoint_interop_gpu.sh TESSERA MPIEXEC GPU NAME VARIANT "VALUE,VALUE OPTION ARG,..." TRAIN_OPTIONS...
set -uo pipefail
source "$(dirname "$0")/../parallel/setup.sh"
gpu=$3 name=$4 variant=$5
IFS=, read -r -a values <<<"$6"
gpus=0
command -v nvidia-smi >/dev/null 2>&1 && gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [[ $gpus -lt 1 ]]; then
  echo "skipped: $name's checkpoints on GPUs need a GPU; this machine has none"
  exit 77
fi
small=(--model tiny-gpt2 --precision bf16 --micro-batch 4 --seq 64 "${@:7}")
failures=0
for ranks in 1 2; do
  [[ $ranks -gt $gpus ]] && { echo "skipped: $ranks ranks need $ranks GPUs; this machine has $gpus"; continue; }
  for value in "${values[@]}"; do
    read -r -a words <<<"$value"
    for direction in gpu-cpu cpu-gpu; do
      first=(--gpu "$gpu"); second=(--gpu cpu)
      [[ $direction == cpu-gpu ]] && { first=(--gpu cpu); second=(--gpu "$gpu"); }
      out="$work/${words[0]}-$ranks-$direction"
      what="$name $value on $ranks rank(s), $direction"
      if ! mpi "$ranks" "$tessera" train "${small[@]}" "$variant" "${words[@]}" "${first[@]}" --steps 2 --out "$out" >"$out.log" 2>&1; then
        echo "FAILED: $what, the first 2 steps:"; tail -n 3 "$out.log"; failures=$((failures + 1)); continue
      fi
      optimizer=$out/checkpoint/optimizer.safetensors
      [[ $ranks -eq 2 ]] && optimizer=$out/checkpoint/optimizer-rank-00001-of-00002.safetensors
      if [[ ! -f $optimizer ]]; then
        echo "FAILED: $what: no $(basename "$optimizer") in $out/checkpoint"; failures=$((failures + 1)); continue
      fi
      if ! mpi "$ranks" "$tessera" train "${small[@]}" "$variant" "${words[@]}" "${second[@]}" --steps 4 --resume --out "$out" >"$out.resumed.log" 2>&1 ||
         ! grep -q "trained steps 3-4" "$out.resumed.log"; then
        echo "FAILED: $what, resumed to step 4:"; tail -n 3 "$out.resumed.log"; failures=$((failures + 1)); continue
      fi
      echo "ok: $what: $(grep 'trained steps' "$out.resumed.log")"
    done
  done
done
exit $((failures > 0))
