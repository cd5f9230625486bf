#!/usr/bin/env bash
# Issue 16: a multi-rank run resumes exactly. For each plugin, 6 steps on 4
# ranks straight, against 3 steps, then --resume to 6: every checkpoint file
# (model.safetensors, and the optimizer's, whole or one shard per rank) is
# byte-identical. A checkpoint of 4 ranks' shards loads into 2 ranks and into
# another plugin's layout when the global batch is the same, and is refused
# (one line per rank) when it is not.
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
# The shards 4 ranks saved load into 2 ranks (and into FSDP's layout): with the
# global batch kept (2 ranks × 4 micro-batches = 4 × 2), steps 7 and 8 compute
# what 4 ranks compute, up to the order of the sums. Step 8's loss follows the
# update of step 7, which used the restored Adam states.
second_loss() { awk '/"loss": \[/ {getline; getline; gsub(/[ ,]/, ""); print; exit}' "$1"; }
for target in "2 low_level_zero" "2 torch_fsdp" "4 low_level_zero"; do
  read -r ranks plugin <<< "$target"
  cp -r "$work/low_level_zero-split" "$work/into-$ranks-$plugin"
  mpi "$ranks" "$tessera" train --plugin "$plugin" --micro-batch 1 --micro-batches $((8 / ranks)) --seq 32 --precision fp32 --steps 8 --resume \
    --out "$work/into-$ranks-$plugin" > /dev/null
done
reference=$(second_loss "$work/into-4-low_level_zero/metrics.json")
for target in 2-low_level_zero 2-torch_fsdp; do
  loss=$(second_loss "$work/into-$target/metrics.json")
  awk -v a="$loss" -v b="$reference" 'BEGIN {d = a - b; if (d < 0) d = -d; exit !(d <= 1e-5 * b)}' ||
    { echo "$target: step 8 loss $loss, 4 ranks: $reference"; exit 1; }
  echo "4 ranks' ZeRO shards resumed as $target: step 8 loss $loss (4 ranks: $reference)"
done
# Another global batch is a change of what the run computes: refused, one line per rank.
if mpi 2 "$tessera" train --plugin low_level_zero --micro-batch 1 --micro-batches 2 --seq 32 --precision fp32 --steps 9 --resume \
     --out "$work/low_level_zero-split" > /dev/null 2> "$work/err"; then
  echo "resuming with another global batch was not refused"; exit 1
fi
grep -q "the global batch (ranks × --micro-batches × --micro-batch): 8 sequences in the checkpoint, 4 sequences now" "$work/err" || { cat "$work/err"; exit 1; }
echo "another global batch: refused"
