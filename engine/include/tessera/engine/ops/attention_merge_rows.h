// Which rows ring attention's merge touches (ops/attention_merge.h on the CPU,
// kernels/attention_merge.h on the GPU): the running output (B, T, NH·HS) and
// log-sum-exps (B, NH, T), rows [first, first + rows) of each sample.
#pragma once

#include <cstdint>

namespace tessera::engine::cpu {

struct MergeRows {
  int64_t B, T, NH, HS;
  int64_t first, rows;  // the query rows the block reached, in each sample
};

}  // namespace tessera::engine::cpu
