// Step time of one training configuration on a cluster.
//
// Compute: every GEMM of the inventory's matmul weights and attention's core,
// forward and backward, timed by the roofline of gemm_model.h (the GPU's measured
// matmul and fused-attention efficiencies, wave quantization, the HBM roof);
// recompute adds a forward per its mode; element-wise work is memory-bound:
// every kernel's reads and writes where the runtime's kernels are read (op by
// op: eager_elementwise.h; Megatron-LM's fused ones: megatron_elementwise.h),
// else the tensors a block keeps (activations.h) cross HBM once per pass. Communication:
// each collective costed as NCCL's tuning model costs it, ring or tree, LL or
// Simple, whichever is fastest (collectives.h), on the links the group spans
// (tensor-parallel groups innermost on NVLink; data and pipeline groups across
// nodes when they leave one); pipeline sends latency + bytes / bandwidth.
// Overlap: DDP and ZeRO-1/2 reduce gradients during the last micro-batch's
// backward; with --tp-comm-overlap the tensor-parallel calls run under each
// pass's GEMMs, with --overlap-param-gather the distributed optimizer's
// all-gather under the next step's first forward; ZeRO-3 (FSDP, Gemini) prefetches the next unit during
// compute; pipelines run the schedule of pipeline_stages.h event by event, so
// the bubble is what the schedule leaves idle. Offload: PCIe traffic and the
// CPU optimizer. MFU = model FLOPs / (step time × peak × GPUs) (Narayanan et
// al. 2021 §5.1, without the recompute FLOPs; Chowdhery et al. 2022, App. B).
// Under fp8 the blocks' GEMMs run at the FP8 peak (fp8.h), attention and the
// head at bf16's, and MFU is stated on the bf16 peak, as published FP8 runs are.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/planner/cluster.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/model.h"
#include "tessera/planner/status.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

struct SimulationSettings {
  // Fraction of HBM bandwidth element-wise kernels (and the HBM roof of a GEMM) reach.
  double memory_efficiency = 0.8;
  // Communication hidden behind compute still costs this fraction of its time:
  // NCCL runs one thread block per channel on the SMs (16-32 channels on an
  // 8-GPU NVLink node) and competes for HBM bandwidth with the GEMMs it overlaps.
  double overlap_cost = 0.15;
};

// Seconds per step on the slowest pipeline stage's critical path.
struct StepBreakdown {
  double forward_s = 0;
  double backward_s = 0;
  double recompute_s = 0;
  double communication_s = 0;  // exposed tensor-parallel, pipeline and data-parallel communication
  double offload_s = 0;        // PCIe traffic and CPU optimizer not hidden by compute
  double optimizer_s = 0;      // optimizer step on the GPU
  double bubble_s = 0;         // pipeline fill and drain: the slowest stage's idle time between its passes
};

// One span on a lane of the timeline (Chrome/Perfetto trace "X" events).
struct TraceEvent {
  std::string name;      // "F3", "B3", "all-reduce gradients", ...
  std::string category;  // "forward", "backward", "communication", "optimizer", "offload"
  int lane = 0;          // pipeline stage's compute lane = 2·stage, its communication lane = 2·stage + 1
  double start_s = 0;
  double duration_s = 0;
  int64_t micro_batch = -1;  // forward and backward passes: which micro-batch; -1 otherwise
  int64_t chunk = 0;         // and which of the stage's model chunks
};

struct StepSimulation {
  StepBreakdown breakdown;
  double step_time_s = 0;
  double tokens_per_s = 0;
  double model_tflops_per_gpu = 0;     // model FLOPs (no recompute) / step time / GPUs
  double hardware_tflops_per_gpu = 0;  // FLOPs executed, recompute included (what Megatron-LM reports)
  double mfu = 0;
  std::vector<TraceEvent> events;      // filled when asked for
};

// Seconds of one pipeline send: an activation (or its gradient) across a stage
// boundary, latency + bytes / bandwidth on the link the pipeline group spans; 0
// without a pipeline. Where the sends are scattered over the tp ranks
// (--scatter-gather-tensors-in-pipeline: Megatron-LM@79a3bb6b
// megatron/p2p_communication.py, split_tensor_into_1d_equal_chunks and
// gather_split_1d_tensor; DeepSpeed's pipeline engine under tensor parallelism,
// deepspeed/runtime/pipe/engine.py at 36ad3119d, is_pipe_partitioned and
// is_grad_partitioned = is_model_parallel, PartitionedTensor), each rank sends
// its 1/tp and the receiver all-gathers the whole over the tp group.
double pipeline_send_seconds(const Model& model, const ClusterSpec& cluster, const EstimateRequest& request);

// The part of a pass's time its stage spends on its own send, or 0 where sends
// run under the passes. Megatron's sends wait: _communicate runs
// batch_isend_irecv, waits on every request and synchronizes the device
// (Megatron-LM@79a3bb6b megatron/p2p_communication.py; Megatron-Core@baf94af3,
// core_r0.8.0, core/pipeline_parallel/p2p_communication.py, wait_on_reqs and
// batch_p2p_sync), except the interleaved schedule's, which Megatron-LM runs
// under the passes since Megatron-Core (overlap_p2p_comm, on unless
// --no-overlap-p2p-communication; validate_args turns it off for 1F1B,
// megatron/training/arguments.py at core_r0.8.0). 1F1B calls it once a pass
// (send_forward_recv_backward, send_backward_recv_forward), the interleaved
// steady state once a forward-backward pair (send_forward_backward_recv_forward_backward:
// a link carries one tensor each way at once), half a send a pass. DeepSpeed's
// pipeline engine sends after each pass with blocking send and recv
// (deepspeed/runtime/pipe/p2p.py at 36ad3119d: async_op is refused). Other
// runtimes' sends (ColossalAI's, Tessera's engine) run under the passes.
double pipeline_send_hold_seconds(const Model& model, const ClusterSpec& cluster, const EstimateRequest& request);

// `estimate` is the memory estimate of the same request (it carries Gemini's
// chunking and placement). The request's num_micro_batches are per step.
Result<StepSimulation> simulate_step(const Model& model, const ClusterSpec& cluster, const EstimateRequest& request,
                                     const MemoryEstimate& estimate, const SimulationSettings& settings, bool with_events);

}  // namespace tessera::planner
