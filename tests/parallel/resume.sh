#!/usr/bin/env bash
# Issue 16: a multi-rank run resumes exactly. For each plugin, 6 steps on 4
# ranks straight, against 3 steps, then --resume to 6: every checkpoint file
# (model.safetensors, and the optimizer's, whole or one shard per rank) is
# byte-identical. A sharded checkpoint resumed on another number of ranks is
# refused on every rank with one line.
# Usage: resume.sh TESSERA MPIEXEC
set -euo pipefail
source "$(dirname "$0")/setup.sh"
for plugin in torch_ddp low_level_zero torch_fsdp gemini; do
  args=(train --plugin "$plugin" --micro-batch 1 --micro-batches 2 --seq 32)
  if [[ $plugin == gemini ]]; then args+=(--precision bf16 --chunk-size 131072); else args+=(--precision fp32); fi
  mpi 4 "$tessera" "${args[@]}" --steps 6 --out "$work/$plugin-straight" > /dev/null
  mpi 4 "$tessera" "${args[@]}" --steps 3 --out "$work/$plugin-split" > /dev/null
  mpi 4 "$tessera" "${args[@]}" --steps 6 --resume --out "$work/$plugin-split" > /dev/null
  files=0
  for file in "$work/$plugin-straight"/checkpoint/*.safetensors; do
    cmp -s "$file" "$work/$plugin-split/checkpoint/$(basename "$file")" || { echo "$plugin: $(basename "$file") differs after the resume"; exit 1; }
    files=$((files + 1))
  done
  echo "$plugin: 3 + 3 steps on 4 ranks = 6 steps, $files checkpoint files byte-identical"
done
# ZeRO's shards were saved by 4 ranks: 2 ranks cannot take them.
if mpi 2 "$tessera" train --plugin low_level_zero --micro-batch 1 --micro-batches 2 --seq 32 --precision fp32 --steps 8 --resume \
     --out "$work/low_level_zero-split" > /dev/null 2> "$work/err"; then
  echo "resuming 4 ranks' shards on 2 was not refused"; exit 1
fi
grep -q "was saved by another number of ranks with a sharded optimizer" "$work/err" || { cat "$work/err"; exit 1; }
echo "4 ranks' shards on 2 ranks: refused"
