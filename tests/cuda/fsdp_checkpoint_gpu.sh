#!/usr/bin/env bash
# FSDP checkpoints cross between the engines, on one GPU and on 2 ranks with
# one GPU each, under full_shard and shard_grad_op
# (checkpoint_interop_gpu.sh): 2 ranks write the CPU engine's FSDP shard
# files. tools/gpu-check runs it. Never run on a GPU yet.
# Usage: fsdp_checkpoint_gpu.sh TESSERA MPIEXEC [GPU]
exec "$(dirname "$0")/checkpoint_interop_gpu.sh" "$1" "$2" "${3:-h100-80g}" FSDP --fsdp-strategy "full_shard,shard_grad_op" --plugin torch_fsdp
