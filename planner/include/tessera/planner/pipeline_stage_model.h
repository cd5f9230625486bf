// What one pipeline stage holds of the model: the blocks of its model chunks
// (pipeline_stages.h, stage_chunks), the embedding on the first stage, the
// final norm and the head on the last. The planner's memory model counts these
// tensors (memory_model.h, stage_shapes) and the engine builds exactly them,
// so that a stage's ledger and its estimate hold the same parameters.
#pragma once

#include <cstdint>

#include "tessera/planner/model.h"

namespace tessera::planner {

struct PipelinePlacement {
  int64_t pp = 1;      // stages
  int64_t stage = 0;   // this one, 0..pp-1
  int64_t chunks = 1;  // model chunks per stage (interleaved schedules)

  bool first() const { return stage == 0; }
  bool last() const { return stage == pp - 1; }
};

// The stage's tensors in execution order. A head tied to the embedding, on a
// last stage without the embedding, becomes a parameter of its own there that
// carries the embedding's name and shape: Megatron-LM keeps a copy of the word
// embeddings on the last stage and keeps the two equal by summing their
// gradients (NVIDIA/Megatron-LM@307dcf37f03d44da131ba21999278abe4112d2ad,
// megatron/core/models/common/language_module/language_module.py,
// setup_embeddings_and_output_layer; megatron/core/distributed/finalize_model_grads.py,
// _allreduce_word_embedding_grads). Its name is the embedding's, so that a
// checkpoint, which stores the tied tensor once, loads into it; it is
// marked TensorInfo::tied_copy.
TensorInventory stage_inventory(const TensorInventory& full, int64_t num_layers, const PipelinePlacement& placement);
Model stage_model(const Model& full, const PipelinePlacement& placement);

}  // namespace tessera::planner
