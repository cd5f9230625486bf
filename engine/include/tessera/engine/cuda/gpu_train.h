// `tessera train --gpu NAME` on one GPU, or on one GPU per rank under a
// launcher (mpirun -np N): TrainOptions' steps of the GPU training step
// (cuda/gpt_training.h) on the run's data, with the options' recompute mode
// (none, selective or full), one micro-batch per rank and step,
// each step's loss (the mean over the ranks) and gradient norm printed as the
// CPU trainer does and kept in TrainMetrics with the ledger's device peaks per
// category (every rank's row) and the gradient all-reduces' counters.
//
// On several ranks it is PyTorch DDP, as the CPU engine's torch_ddp: each
// rank trains on device `device` (its local rank, device/rank_device.h), reads
// its share of each step's global batch (rank_share_position, as the CPU
// trainer), and the gradients are all-reduced in the CPU engine's buckets over
// an NCCL communicator made from the launcher's ranks (comm/nccl.h), started
// in backward and waited for by the optimizer. Every rank's weights stay the
// same bits. With --plugin low_level_zero (--zero-stage 1 or 2) it is the
// CPU engine's ZeRO instead (cuda/gpt_training.h): each rank keeps its shard
// of the optimizer (on the host with --cpu-offload), the gradients are
// reduce-scattered and the parameters all-gathered over the same communicator.
//
// With tp > 1 (--tp, hybrid_parallel at ZeRO stage 0) it is the CPU engine's
// Megatron-style tensor parallelism (cuda/gpt_training.h) over groups of tp
// ranks split from the world in the planner's rank order
// (parallel/process_groups.h: tensor-parallel ranks fastest), DDP over the
// dp = ranks / tp data-parallel ranks of each tp rank, NCCL over each group;
// a tp group's ranks read the same share of the batch. Its checkpoints are
// the CPU engine's consolidated ones (consolidated_checkpoint.h: whole
// tensors, what a CPU tp run writes), and --resume loads each rank's part.
//
// With pp > 1 (--pp, hybrid_parallel, GPipe, 1F1B or interleaved, with or without --tp)
// it is the CPU engine's pipeline (cuda/gpt_training.h): the world split in
// the planner's rank order into pp stages of dp × tp ranks, NCCL over the
// stages (and over the first and last stage for a tied embedding) and over
// each stage's data- and tensor-parallel ranks; every stage of a data-parallel rank reads the same
// share of the batch, the loss is the last stage's. Its checkpoints are the
// CPU engine's consolidated ones, as a CPU pp run writes them, and --resume
// loads each stage's tensors (either engine resumes the other's).
//
// Checkpoints: TrainOptions' run directory, --resume and --save-every as the
// CPU trainer keeps them (run_checkpoints.h): rank 0 copies the master
// weights and AdamW's states to the host and commits them at the end and
// every save_every steps in the CPU engine's files (flat_checkpoint.h), so a
// GPU run resumes on the CPU and the other way round; under ZeRO every rank
// writes its shard as the CPU engine's low_level_zero does
// (sharded_checkpoint.h) and rank 0 commits. On resume every rank loads the
// checkpoint rank 0 verified (whole files or any layout's shard files), its shard of it under ZeRO. A stop (TrainOptions::stop_requested,
// agreed by the ranks at a step boundary) commits the last complete step and
// returns with TrainMetrics::stopped. The options the step does not run are
// refused before it by the command (cli/src/train_command.cpp).
//
// TrainOptions::device_capacity_bytes (--device-memory) caps each rank's
// caching allocator, so that a plan for a smaller GPU runs as it would there
// (an allocation past it fails the step in one line).
#pragma once

#include <chrono>
#include <ostream>

#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/trainer.h"
#include "tessera/planner/model.h"
#include "tessera/planner/status.h"

namespace tessera::engine::cuda {

struct GpuRun {
  int device = 0;                       // this rank's CUDA device
  comm::Communicator* world = nullptr;  // the launcher's ranks (MPI's world); null or one rank: one GPU
  std::chrono::duration<double> comm_timeout = comm::kDefaultCommTimeout;
  int64_t tp = 1;  // tensor-parallel ranks (hybrid_parallel's)
  int64_t pp = 1;  // pipeline stages (hybrid_parallel's, TrainOptions::pipeline_schedule)
  int64_t cp = 1;  // context-parallel ranks (hybrid_parallel's ring attention); the world's ranks are dp × tp × pp × cp
};

Result<TrainMetrics> train_on_gpu(const planner::Model& model, const TrainOptions& options, const GpuRun& run, std::ostream& progress);

}  // namespace tessera::engine::cuda
