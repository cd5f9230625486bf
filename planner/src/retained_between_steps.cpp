// Megatron-Core's pipeline keeps each model chunk's last received input and its
// gradient until the chunk's next forward. Read from NVIDIA/Megatron-LM at
// adc69dba2dec6c9014d51b6cad3edf1020731786 (and unchanged at
// 6e091e1b68c6856c9eeea3069cc167061c0acb64, the commits of the golden values
// in data/measurements/published_memory.json):
//  - a chunk that takes its input from the previous virtual stage receives it
//    in a new tensor (megatron/core/pipeline_parallel/p2p_communication.py,
//    create_tensor_recv_prev: torch.empty(tensor_shape, requires_grad=True,
//    dtype=config.pipeline_dtype); pipeline_dtype is params_dtype,
//    megatron/training/arguments.py), tensor_shape being (s/cp, b, h), s/tp
//    rows under sequence parallelism (schedules.py);
//  - forward_step passes it to the chunk's set_input_tensor, which keeps it as
//    TransformerBlock.input_tensor (megatron/core/transformer/transformer_block.py)
//    until the next set_input_tensor, the chunk's next forward;
//  - backward_step calls retain_grad() on it and sends its .grad back
//    (megatron/core/pipeline_parallel/schedules.py), so the gradient stays
//    attached to the kept tensor.
// After a step every receiving chunk thus holds its last micro-batch's input
// and that input's gradient: every chunk of every stage except the first chunk
// of the first stage, which starts from the embedding. Each chunk runs a
// forward in the next step before any backward, so they are gone at the peak.
#include "retained_between_steps.h"

#include "tessera/planner/pp_traffic.h"

namespace tessera::planner {

int64_t retained_between_steps(const Model& model, const StageShape& stage, const EstimateRequest& request) {
  if (request.plugin.runtime != Runtime::megatron || request.layout.pp == 1) return 0;
  const auto receiving_chunks = static_cast<int64_t>(stage.chunks.size()) - (stage.first ? 1 : 0);
  const int64_t boundary = stage_boundary_bytes(request.training.micro_batch_size, request.local_seq_len(),
                                                model.config.hidden_size, request.training.precision, request.layout);
  return receiving_chunks * 2 * boundary;  // the input and its gradient
}

}  // namespace tessera::planner
