#!/usr/bin/env bash
# Issue 15: `mpirun -np 2 tessera train --gpu NAME` (DDP, ZeRO-1/2, FSDP, Gemini, tensor or pipeline parallelism, one rank per GPU)
# refuses, on every rank in one line naming the option, what the GPU step does
# not run, and on a machine without a GPU says so; mpirun exits 2. Skipped
# (77) where there is a GPU: tools/gpu-check trains there.
# Usage: gpu_refusals.sh TESSERA MPIEXEC
set -uo pipefail
source "$(dirname "$0")/setup.sh"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "skipped: this machine has a GPU"
  exit 77
fi
failures=0
# refused WANT OPTIONS...: every rank (RANKS, 2 unless set) exits 2, each with one line ending in WANT;
# with PLAN set, the run is that plan file's (--plan) instead of a micro-batch of 32 tokens.
refused() {
  local want=$1 ranks=${RANKS:-2}
  shift
  local run=(--micro-batch 1 --seq 32)
  [[ -n ${PLAN:-} ]] && run=(--plan "$PLAN")
  mpi "$ranks" "$tessera" train --gpu h100-80g "${run[@]}" --steps 1 --out "$work/run" "$@" >"$work/out" 2>"$work/err"
  local code=$?
  local lines
  lines=$(grep -c "^tessera: error: rank [0-9] of $ranks: " "$work/err")
  if [[ $code -ne 2 || $lines -ne $ranks ]] || [[ $(grep -c -F -- "$want" "$work/err") -ne $ranks ]]; then
    echo "FAILED: $* (exit $code, want 2 and $ranks lines with: $want):"
    cat "$work/err"
    failures=$((failures + 1))
  else
    echo "ok: $* -> $(head -n 1 "$work/err")"
  fi
}
refused ": --gpu h100-80g: no CUDA device is available" --precision bf16
# Accumulated micro-batches are not refused: the run gets as far as looking for the device.
refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --micro-batches 2
# Tensor parallelism is hybrid_parallel's (ZeRO stage 0: DDP over the dp ranks, or ZeRO-1/2 over them), with or without sequence parallelism (and
# with it --tp-comm-overlap); no pipeline.
refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --dp 1 --tp 2 --plugin hybrid_parallel
refused ": --tp 2: tensor parallelism is hybrid_parallel's; use --plugin hybrid_parallel" --precision bf16 --dp 1 --tp 2
refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --dp 1 --tp 2 --plugin hybrid_parallel --sequence-parallel
refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --dp 1 --tp 2 --plugin hybrid_parallel --sequence-parallel --tp-comm-overlap
refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --dp 1 --tp 2 --plugin hybrid_parallel --zero-stage 1
refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --dp 1 --tp 2 --plugin hybrid_parallel --zero-stage 2 --sequence-parallel
# ZeRO-Offload under hybrid_parallel's ZeRO-1/2 (with tp, or a pipeline at ZeRO-1) is not refused; with one data-parallel rank, nothing is sharded to offload.
refused ": --cpu-offload: on GPUs the engine offloads the shards of 2 or more data-parallel ranks; give --dp 2 or more, or leave it out" --precision bf16 \
  --dp 1 --tp 2 --plugin hybrid_parallel --zero-stage 1 --cpu-offload
RANKS=4 refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --dp 2 --tp 2 --plugin hybrid_parallel --zero-stage 2 --cpu-offload
RANKS=4 refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --dp 2 --pp 2 --plugin hybrid_parallel --zero-stage 1 --cpu-offload \
  --micro-batches 4
# Context parallelism is hybrid_parallel's ring attention, with data, tensor and pipeline parallelism (not refused: no device here).
refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --dp 1 --cp 2 --plugin hybrid_parallel
RANKS=4 refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --dp 1 --tp 2 --cp 2 --plugin hybrid_parallel
RANKS=4 refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --dp 1 --tp 2 --cp 2 --plugin hybrid_parallel --sequence-parallel \
  --zero-stage 1
RANKS=4 refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --dp 1 --pp 2 --cp 2 --plugin hybrid_parallel --micro-batches 4
refused ": --cp 2: context parallelism is hybrid_parallel's; use --plugin hybrid_parallel" --precision bf16 --dp 1 --cp 2
# A pipeline is hybrid_parallel's too (GPipe, 1F1B or interleaved, DDP or ZeRO-1 over the dp ranks, with or without tensor
# parallelism); not ZeRO-2 (the planner's refusal).
refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --dp 1 --pp 2 --plugin hybrid_parallel --micro-batches 4
refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --dp 1 --pp 2 --plugin hybrid_parallel --pp-schedule gpipe
refused ": --pp 2: pipeline parallelism is hybrid_parallel's; use --plugin hybrid_parallel" --precision bf16 --dp 1 --pp 2
refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --dp 1 --pp 2 --plugin hybrid_parallel --pp-schedule interleaved \
  --model-chunks 2 --micro-batches 4 --model gpt2
RANKS=4 refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --dp 1 --pp 2 --tp 2 --plugin hybrid_parallel --sequence-parallel \
  --micro-batches 2
RANKS=4 refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --dp 2 --pp 2 --plugin hybrid_parallel --zero-stage 1 \
  --micro-batches 4
RANKS=4 refused ": --zero-stage 2 cannot be combined with --pp 2" --precision bf16 --dp 2 --pp 2 --plugin hybrid_parallel --zero-stage 2
RANKS=4 refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --dp 1 --pp 2 --tp 2 --plugin hybrid_parallel --sequence-parallel \
  --tp-comm-overlap --micro-batches 2
# ZeRO-1 and ZeRO-2, and ZeRO-Offload, are not refused either (cuda/gpt_training.h); other plugins are.
refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --plugin low_level_zero
refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --plugin low_level_zero --zero-stage 2 --micro-batches 2
# FSDP, full_shard and shard_grad_op (src/cuda/fsdp_shards.h), offloaded or not, is not refused; offloaded, one micro-batch a step, as PyTorch's FSDP.
refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --plugin torch_fsdp
refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --plugin torch_fsdp --fsdp-strategy shard_grad_op --micro-batches 2
refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --plugin torch_fsdp --cpu-offload
refused ": --micro-batches 2: PyTorch FSDP keeps only the last micro-batch's gradient under --cpu-offload" --precision bf16 --plugin torch_fsdp --cpu-offload \
  --micro-batches 2
refused ": --tp 2: tensor parallelism is hybrid_parallel's; use --plugin hybrid_parallel" --precision bf16 --dp 1 --tp 2 --plugin torch_fsdp
# Gemini under every placement (src/cuda/gemini_shards.h; static's split ones, and auto as the planner solves it) is not refused.
refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --plugin gemini
refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --plugin gemini --placement cpu --micro-batches 2
refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --plugin gemini --placement static --offload-optim-frac 0.05
refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --plugin gemini --placement auto
refused ": --gpu h100-80g: no CUDA device is available" --precision bf16 --plugin low_level_zero --zero-stage 2 --cpu-offload
refused ": --precision fp32: the GPU training step runs bf16 mixed precision; use --precision bf16" --precision fp32
# Plans of 2 GPUs (tessera plan), one rank per GPU: what the step runs gets as far as the device, the rest is refused as the plan's.
"$tessera" plan --model gpt2 --gpus 2 --gpu h100-80g --global-batch 16 --seq 1024 --plugin low_level_zero --output "$work/zero-plan.json" >/dev/null
PLAN=$work/zero-plan.json refused ": --gpu h100-80g: no CUDA device is available"
"$tessera" plan --model gpt2 --gpus 2 --gpu h100-80g --global-batch 16 --seq 1024 --plugin hybrid_parallel --pp 2 --pp-schedule 1f1b \
  --output "$work/pp-plan.json" >/dev/null
PLAN=$work/pp-plan.json refused ": --gpu h100-80g: no CUDA device is available"
"$tessera" plan --model gpt2 --gpus 2 --gpu h100-80g --global-batch 16 --seq 1024 --plugin hybrid_parallel --pp 2 --pp-schedule interleaved \
  --output "$work/interleaved-plan.json" >/dev/null
PLAN=$work/interleaved-plan.json refused ": --gpu h100-80g: no CUDA device is available"
"$tessera" plan --model gpt2 --gpus 2 --gpu h100-80g --global-batch 16 --seq 1024 --precision fp32 --output "$work/fp32-plan.json" >/dev/null
PLAN=$work/fp32-plan.json refused ": --plan $work/fp32-plan.json: --precision fp32: the GPU training step runs bf16 mixed precision"
exit $((failures > 0))
