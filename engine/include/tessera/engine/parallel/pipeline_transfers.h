// A pipeline stage's schedule (planner/pipeline_stages.h, stage_schedule:
// GPipe or 1F1B, one model chunk per stage) with the point-to-point calls
// between its passes, for a backend whose send waits for the matching recv
// (NCCL's, comm/nccl.h): the GPU step's pipeline (cuda/gpt_training.h).
//
// A forward takes its input activation from the previous stage (but on the
// first) and hands its output to the next (but on the last); a backward takes
// the gradient of its output from the next stage (but on the last) and hands
// the gradient of its input to the previous (but on the first). Before pass i
// the stage makes one send_recv (communicator.h): the send of pass i - 1's
// output and the recv of pass i's input, in flight together, as Megatron-LM's
// 1F1B schedule pairs them (NVIDIA/Megatron-LM@307dcf37f03d44da131ba21999278abe4112d2ad,
// megatron/core/pipeline_parallel/schedules.py,
// forward_backward_pipelining_without_interleaving: send_forward_recv_backward,
// send_backward_recv_forward; p2p_communication.py batches both halves); after
// the last pass it sends that pass's output. Activations only ever travel from
// stage s to s + 1 and gradients from s + 1 to s, so NCCL's matching of two
// ranks' calls by their order alone (it has no tags) never takes one for the
// other. The CPU engine's PipelineStage (parallel/pipeline.h) runs the same
// schedule with MPI's started sends and tags instead.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/planner/pipeline_stages.h"
#include "tessera/planner/training_config.h"

namespace tessera::engine {

// One half of a send_recv: to or from `peer` (-1: none), micro-batch
// `micro_batch`'s activation or (`gradient`) the gradient of one.
struct PipelineMessage {
  int peer = -1;
  int64_t micro_batch = 0;
  bool gradient = false;
  bool present() const { return peer >= 0; }
};

struct PipelineTransfer {
  PipelineMessage send, recv;
};

struct StageTransfers {
  std::vector<planner::PipelineOp> passes;  // stage_schedule's
  // passes.size() + 1 calls: transfers[i] before passes[i], the last after every pass.
  std::vector<PipelineTransfer> transfers;
};

// Stage `stage` of `pp` over `num_micro_batches` micro-batches. GPipe and
// 1F1B only: the interleaved schedule's wrap-around sends both ways between
// the same ranks (refused by device/gpu_plugins.h).
StageTransfers stage_transfers(planner::PipelineSchedule schedule, int64_t pp, int64_t stage, int64_t num_micro_batches);

}  // namespace tessera::engine
