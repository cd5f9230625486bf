// A pipeline stage's schedule (planner/pipeline_stages.h, stage_schedule:
// GPipe, 1F1B or interleaved) with the point-to-point calls between its
// passes, for a backend whose send waits for the matching recv and that
// matches two ranks' messages in one direction by their order alone (NCCL's,
// comm/nccl.h, which has no tags): the GPU step's pipeline (cuda/gpt_training.h).
//
// Chunk j of stage s is virtual stage j · pp + s (pipeline_stages.h,
// stage_chunks; one chunk without interleaving). A forward takes its input
// activation from the previous virtual stage (but on the first) and hands its
// output to the next (but on the last); a backward takes the gradient of its
// output from the next virtual stage (but on the last) and hands the gradient
// of its input to the previous (but on the first). Each call is one
// send_recv (communicator.h): a send and a recv in flight together.
//
// GPipe and 1F1B: before pass i one call, the send of pass i - 1's output
// with the recv of pass i's input, as Megatron-LM's 1F1B schedule pairs them
// (NVIDIA/Megatron-LM@307dcf37f03d44da131ba21999278abe4112d2ad,
// megatron/core/pipeline_parallel/schedules.py,
// forward_backward_pipelining_without_interleaving: send_forward_recv_backward,
// send_backward_recv_forward); after the last pass the send of its output.
// Activations only travel from stage s to s + 1 and gradients back, so the
// order of each direction's messages is the sender's and the receiver's alike.
//
// Interleaved: the wrap-around (chunk j of the last stage feeds chunk j + 1
// of the first) makes activations and gradients travel both ways between the
// same two stages when pp is 2, and pairing pass after pass as above
// deadlocks (on 2 to 4 stages, from 2·pp micro-batches on: a stage's warm-up
// is two forwards longer than the next one's, not one). The calls come
// instead by units, as Megatron-LM's interleaved
// schedule makes them (schedules.py, forward_backward_pipelining_with_interleaving:
// a warm-up forward alone, then each steady-state forward with the backward
// after it, whose outputs go and whose next inputs come in one
// send_forward_backward_recv_forward_backward, then each cool-down backward
// alone): before each unit the previous unit's outputs are sent and this
// unit's inputs received, as two calls, activations first and gradients
// second, on every stage. That is the order Megatron-LM's unbatched p2p gives
// both ranks of a pair (NVIDIA/Megatron-LM@00c2c0adeec16015f386548793c88ef08ff6acec,
// megatron/core/pipeline_parallel/p2p_communication.py, _p2p_ops: even
// ranks send next and receive from previous before sending to previous and
// receiving from next, odd ranks receive from previous and send next first),
// so that one direction's activation and gradient never take each other's
// place. The CPU tests replay every stage's calls together under NCCL's rules
// (tests/engine/pipeline_transfers_test.cpp). The CPU engine's PipelineStage
// (parallel/pipeline.h) runs the same schedules with MPI's started sends and tags instead.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/planner/pipeline_stages.h"
#include "tessera/planner/training_config.h"

namespace tessera::engine {

// One half of a send_recv: to or from `peer` (-1: none), micro-batch
// `micro_batch`'s activation or (`gradient`) the gradient of one, across the
// boundary between virtual stages `boundary` and `boundary` + 1.
struct PipelineMessage {
  int peer = -1;
  int64_t micro_batch = 0;
  bool gradient = false;
  int64_t boundary = 0;
  bool present() const { return peer >= 0; }
};

// One send_recv, made before passes[before_pass] (passes.size(): after the last pass).
struct PipelineTransfer {
  PipelineMessage send, recv;
  size_t before_pass = 0;
};

struct StageTransfers {
  std::vector<planner::PipelineOp> passes;  // stage_schedule's
  // In order. GPipe and 1F1B: passes.size() + 1 calls, transfers[i] before
  // passes[i]; interleaved: at most two before each unit, none empty.
  std::vector<PipelineTransfer> transfers;
};

// Stage `stage` of `pp` over `num_micro_batches` micro-batches, with `chunks`
// model chunks per stage (interleaved; num_micro_batches a multiple of pp).
StageTransfers stage_transfers(planner::PipelineSchedule schedule, int64_t pp, int64_t stage, int64_t num_micro_batches, int64_t chunks = 1);

}  // namespace tessera::engine
