// Token data: a text file read byte by byte (Tessera's byte-level tokenizer:
// token = byte, vocabulary 256) or a token file in llm.c's data-shard format
// (llm.c dev/data/data_common.py, write_datafile: a header of 256 int32 —
// magic 20240520, version 1, token count — then that many uint16 token ids).
// The loader cuts consecutive windows of B·T + 1 tokens (targets are the next
// tokens), wraps at the end, and can resume from a position.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/planner/context_split.h"
#include "tessera/planner/model_config.h"
#include "tessera/planner/status.h"

namespace tessera::engine {

struct TokenDataset {
  std::vector<int32_t> tokens;
  int64_t vocab_size = 0;  // largest token id + 1: 256 for bytes, the largest id in a shard + 1
  std::string crc32;       // of the file's bytes: what a resumed run checks it trains on the same data
};

// By extension: ".bin" is an llm.c shard, anything else is text read as bytes.
// Regular files only; the file is read in pieces straight into the tokens.
Result<TokenDataset> load_token_file(const std::string& path);

// load_token_file for training `config` on micro-batches of (B, T): refused in
// one line where a token id is past the model's vocabulary or the data is
// shorter than one micro-batch (and its next-token targets).
Result<TokenDataset> load_training_data(const std::string& path, const planner::ModelConfig& config, int64_t micro_batch, int64_t seq_len);

// The same, from a whole file's bytes in memory (the fuzz target's entry).
Result<TokenDataset> parse_token_data(std::string_view bytes, bool shard, const std::string& path);

// The memory load_token_file will hold for PATH (4 bytes a token), from its
// size alone: the pre-flight memory check counts it before anything is read.
Result<int64_t> token_memory_bytes(const std::string& path);

// Where data-parallel rank `rank` reads its share of a step's global batch,
// consecutive sequences from `step_start`: rank r takes the r-th share of
// `micro_batches` micro-batches of `micro_batch_tokens` each, so the ranks
// together see what one rank with all the micro-batches would.
constexpr int64_t rank_share_position(int64_t step_start, int64_t rank, int64_t micro_batches, int64_t micro_batch_tokens) {
  return step_start + rank * micro_batches * micro_batch_tokens;
}

class DataLoader {
 public:
  DataLoader(const TokenDataset& data, int64_t micro_batch, int64_t seq_len, int64_t position = 0)
      : data_(&data), B_(micro_batch), T_(seq_len), position_(wrap(position)) {}

  // Fills tokens and targets, both (B, T).
  void next(int32_t* tokens, int32_t* targets);
  int64_t position() const { return position_; }
  // Moves to a position (wrapped), e.g. a rank's first micro-batch of a step.
  void seek(int64_t position) { position_ = wrap(position); }
  // Rank `rank` of `ranks`' share of the step starting at `step_start`
  // (rank_share_position): its `micro_batches` micro-batches, read one after
  // another as the CPU trainer reads them, into tokens and targets of
  // (micro_batches, B, T) each; leaves the loader at the next step's start,
  // after every rank's share.
  void read_rank_share(int64_t step_start, int64_t rank, int64_t ranks, int64_t micro_batches, int32_t* tokens, int32_t* targets);

 private:
  int64_t wrap(int64_t position) const {
    const auto n = static_cast<int64_t>(data_->tokens.size());
    return n == 0 ? 0 : ((position % n) + n) % n;
  }
  const TokenDataset* data_;
  int64_t B_, T_;
  int64_t position_;
};

// This rank's chunks of each of the B sequences of S tokens in `whole`
// (planner/context_split.h), into `local` (B, S / cp): the CPU trainer's and
// the GPU loop's split of what the data-parallel rank read.
void take_context_chunks(int32_t* local, const int32_t* whole, int64_t B, int64_t S, const planner::ContextSplit& split);

}  // namespace tessera::engine
