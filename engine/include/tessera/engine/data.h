// Token data: a text file read byte by byte (Tessera's byte-level tokenizer:
// token = byte, vocabulary 256) or a token file in llm.c's data-shard format
// (llm.c dev/data/data_common.py, write_datafile: a header of 256 int32 —
// magic 20240520, version 1, token count — then that many uint16 token ids).
// The loader cuts consecutive windows of B·T + 1 tokens (targets are the next
// tokens), wraps at the end, and can resume from a position.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/planner/status.h"

namespace tessera::engine {

struct TokenDataset {
  std::vector<int32_t> tokens;
  int64_t vocab_size = 0;  // largest token id + 1: 256 for bytes, the largest id in a shard + 1
};

// By extension: ".bin" is an llm.c shard, anything else is text read as bytes.
Result<TokenDataset> load_token_file(const std::string& path);

class DataLoader {
 public:
  DataLoader(const TokenDataset& data, int64_t micro_batch, int64_t seq_len, int64_t position = 0)
      : data_(&data), B_(micro_batch), T_(seq_len), position_(wrap(position)) {}

  // Fills tokens and targets, both (B, T).
  void next(int32_t* tokens, int32_t* targets);
  int64_t position() const { return position_; }

 private:
  int64_t wrap(int64_t position) const {
    const auto n = static_cast<int64_t>(data_->tokens.size());
    return n == 0 ? 0 : ((position % n) + n) % n;
  }
  const TokenDataset* data_;
  int64_t B_, T_;
  int64_t position_;
};

}  // namespace tessera::engine
