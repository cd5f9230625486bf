#!/usr/bin/env bash
# Tessera's CPU engine against llm.c's CPU trainer, side by side in one run.
#
# llm.c (github.com/karpathy/llm.c, train_gpt2.c: fp32, OpenMP loops, built
# with its Makefile's -Ofast) trains GPT-2 124M at batch 4 × 64 tokens with
# AdamW and prints each step's time. This script builds it from a checkout you
# give it (in a scratch copy), writes what its main() expects (a gpt2_124M.bin
# with random weights in llm.c's checkpoint layout, and the shipped text as an
# llm.c token shard), runs it, then runs `tessera train` on the same model,
# batch, optimizer and shard, and prints the median step times and their ratio.
# Steps after the first are counted (the first allocates and warms caches).
# The weights are random: speed does not depend on their values.
#
#   bench/llmc_compare.sh LLMC_CHECKOUT [TESSERA_BINARY]
set -euo pipefail
llmc_src=${1:?usage: bench/llmc_compare.sh LLMC_CHECKOUT [TESSERA_BINARY]}
root=$(cd "$(dirname "$0")/.." && pwd)
tessera=${2:-$root/build/cli/tessera}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cp -r "$llmc_src"/. "$work/llmc"
# Its main() trains 41 steps and samples text at steps 20 and 40; 11 steps
# (no sampling) give the same per-step times in a quarter of the time.
sed -i 's/step <= 40; step++/step <= 10; step++/' "$work/llmc/train_gpt2.c"
grep -q 'step <= 10; step++' "$work/llmc/train_gpt2.c" || { echo "llm.c's training loop changed: adjust bench/llmc_compare.sh"; exit 1; }
make -s -C "$work/llmc" train_gpt2 >/dev/null 2>&1 || { echo "building llm.c's train_gpt2 failed"; exit 1; }

python3 - "$work/llmc" "$root/data/text/kjv-genesis-exodus.txt" <<'PY'
import array, os, random, struct, sys
llmc, text = sys.argv[1], sys.argv[2]
# llm.c checkpoint (train_gpt2.c gpt2_build_from_checkpoint): 256 int32 header
# [20240326, 3, maxT, V, L, NH, C, Vp], then the fp32 parameters.
maxT, V, L, NH, C, Vp = 1024, 50257, 12, 12, 768, 50304
sizes = [Vp * C, maxT * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C, L * C, L * C,
         L * 4 * C * C, L * 4 * C, L * C * 4 * C, L * C, C, C]
random.seed(1)
block = array.array("f", (random.gauss(0.0, 0.02) for _ in range(1 << 20)))
with open(os.path.join(llmc, "gpt2_124M.bin"), "wb") as f:
    f.write(struct.pack("<256i", *([20240326, 3, maxT, V, L, NH, C, Vp] + [0] * 248)))
    left = sum(sizes)
    while left > 0:
        n = min(left, len(block))
        block[:n].tofile(f)
        left -= n
# llm.c token shard (llmc/dataloader.h): 256 int32 header [20240520, 1, count], then uint16 ids.
tokens = open(text, "rb").read()
os.makedirs(os.path.join(llmc, "dev/data/tinyshakespeare"), exist_ok=True)
for name in ("tiny_shakespeare_train.bin", "tiny_shakespeare_val.bin"):
    with open(os.path.join(llmc, "dev/data/tinyshakespeare", name), "wb") as f:
        f.write(struct.pack("<256i", *([20240520, 1, len(tokens)] + [0] * 253)))
        array.array("H", list(tokens)).tofile(f)
PY

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'; }

(cd "$work/llmc" && ./train_gpt2 >"$work/llmc.log") || { echo "llm.c failed:"; tail -3 "$work/llmc.log"; exit 1; }
llmc_ms=$(grep -o 'took [0-9.]* ms' "$work/llmc.log" | awk 'NR > 1 {print $2}' | median)

"$tessera" train --model gpt2 --micro-batch 4 --seq 64 --steps 11 --optimizer adamw --precision fp32 \
  --data "$work/llmc/dev/data/tinyshakespeare/tiny_shakespeare_train.bin" --out "$work/tessera" >/dev/null
tessera_ms=$(python3 -c 'import json,sys; [print(s * 1000) for s in json.load(open(sys.argv[1]))["step_time_s"][1:]]' "$work/tessera/metrics.json" | median)

echo "GPT-2 124M, fp32, AdamW, batch 4 x 64 tokens, $(nproc) cores"
printf 'llm.c train_gpt2   median step %8.1f ms\n' "$llmc_ms"
printf 'tessera train      median step %8.1f ms\n' "$tessera_ms"
awk -v a="$llmc_ms" -v b="$tessera_ms" 'BEGIN {printf "tessera is %.2fx as fast as llm.c\n", a / b}'
