#!/usr/bin/env bash
# Gemini checkpoints cross between the engines, on one GPU and on 2 ranks
# with one GPU each, for the cuda, cpu, static (the first chunks' states on the host,
# the rest on the device) and auto placements (checkpoint_interop_gpu.sh).
# tools/gpu-check runs it. Never run on a GPU yet.
# Usage: gemini_checkpoint_gpu.sh TESSERA MPIEXEC [GPU]
exec "$(dirname "$0")/checkpoint_interop_gpu.sh" "$1" "$2" "${3:-h100-80g}" Gemini --placement "cuda,cpu,static --offload-optim-frac 0.05,auto" --plugin gemini --chunk-size 40000
