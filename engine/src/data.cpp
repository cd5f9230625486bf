#include "tessera/engine/data.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "tessera/engine/file_io.h"

namespace tessera::engine {
namespace {

constexpr int32_t kShardMagic = 20240520;  // llm.c data_common.py
constexpr int32_t kShardVersion = 1;
constexpr int64_t kShardHeaderBytes = 256 * sizeof(int32_t);

bool is_shard(const std::string& path) { return path.ends_with(".bin"); }

// Where a source of bytes comes from: a file read in pieces, or memory.
using ReadBytes = std::function<Status(int64_t offset, char* into, size_t bytes)>;

// The token count a shard's header announces, checked against its size.
Result<int64_t> shard_token_count(const ReadBytes& read, int64_t size, const std::string& path) {
  if (size < kShardHeaderBytes) return make_error(ErrorCode::parse_error, "--data: " + path + " is shorter than an llm.c shard header (1024 bytes)");
  int32_t header[256];
  if (Status s = read(0, reinterpret_cast<char*>(header), sizeof header); !s) return s.error();
  if (header[0] != kShardMagic || header[1] != kShardVersion) {
    return make_error(ErrorCode::parse_error, "--data: " + path + " is not an llm.c token shard (magic 20240520, version 1)");
  }
  const int64_t count = header[2];
  if (count < 0 || size != kShardHeaderBytes + count * static_cast<int64_t>(sizeof(uint16_t))) {
    return make_error(ErrorCode::parse_error, "--data: " + path + " holds " + std::to_string((size - kShardHeaderBytes) / 2) +
                                                  " tokens but its header says " + std::to_string(count));
  }
  return count;
}

// Reads tokens (bytes of text, or a shard's uint16 ids) in pieces of 1 MiB.
Result<TokenDataset> read_tokens(const ReadBytes& read, int64_t size, bool shard, const std::string& path) {
  TokenDataset data;
  int64_t offset = 0, count = size, width = 1;
  if (shard) {
    auto tokens = shard_token_count(read, size, path);
    if (!tokens) return tokens.error();
    offset = kShardHeaderBytes;
    count = tokens.value();
    width = 2;
  }
  data.tokens.resize(static_cast<size_t>(count));
  std::vector<char> piece(size_t{1} << 20);
  const auto per_piece = static_cast<int64_t>(piece.size()) / width;
  int32_t largest = -1;
  for (int64_t first = 0; first < count; first += per_piece) {
    const int64_t n = std::min(per_piece, count - first);
    if (Status s = read(offset + first * width, piece.data(), static_cast<size_t>(n * width)); !s) return s.error();
    for (int64_t i = 0; i < n; ++i) {
      uint16_t token = static_cast<unsigned char>(piece[static_cast<size_t>(i)]);
      if (shard) std::memcpy(&token, piece.data() + i * 2, 2);
      data.tokens[static_cast<size_t>(first + i)] = token;
      largest = std::max<int32_t>(largest, token);
    }
  }
  // The ids a shard uses, not all that uint16 could hold: a GPT-2 shard (ids
  // below 50257) trains a model with GPT-2's vocabulary. Text is bytes.
  data.vocab_size = shard ? largest + 1 : 256;
  return data;
}

}  // namespace

Result<TokenDataset> load_training_data(const std::string& path, const planner::ModelConfig& config, int64_t micro_batch, int64_t seq_len) {
  auto data = load_token_file(path);
  if (!data) return data.error();
  if (data->vocab_size > config.vocab_size) {
    return make_error(ErrorCode::invalid_argument, "--data holds token ids up to " + std::to_string(data->vocab_size - 1) + " but " + config.name +
                                                       " has a vocabulary of " + std::to_string(config.vocab_size));
  }
  if (static_cast<int64_t>(data->tokens.size()) <= micro_batch * seq_len) {
    return make_error(ErrorCode::invalid_argument, "--data has fewer tokens than one micro-batch (" + std::to_string(micro_batch * seq_len + 1) + ")");
  }
  return data;
}

Result<TokenDataset> load_token_file(const std::string& path) {
  auto file = ReadOnlyFile::open(path, "--data");
  if (!file) return file.error();
  Crc32 crc;
  const ReadBytes read = [&](int64_t offset, char* into, size_t bytes) -> Status {
    if (Status s = file->read_at(offset, into, bytes); !s) return s;
    crc.update(into, bytes);  // read once, in order: the checksum of the whole file
    return Status::success();
  };
  auto data = read_tokens(read, file->size(), is_shard(path), path);
  if (!data) return data.error();
  TokenDataset out = std::move(data).value();
  out.crc32 = crc.hex();
  return out;
}

Result<TokenDataset> parse_token_data(std::string_view bytes, bool shard, const std::string& path) {
  const ReadBytes read = [&](int64_t offset, char* into, size_t count) -> Status {
    std::memcpy(into, bytes.data() + offset, count);
    return Status::success();
  };
  return read_tokens(read, static_cast<int64_t>(bytes.size()), shard, path);
}

Result<int64_t> token_memory_bytes(const std::string& path) {
  auto file = ReadOnlyFile::open(path, "--data");
  if (!file) return file.error();
  const int64_t tokens = is_shard(path) ? std::max<int64_t>(0, file->size() - kShardHeaderBytes) / 2 : file->size();
  return tokens * static_cast<int64_t>(sizeof(int32_t));
}

void DataLoader::next(int32_t* tokens, int32_t* targets) {
  const auto n = static_cast<int64_t>(data_->tokens.size());
  for (int64_t i = 0; i < B_ * T_; ++i) {
    tokens[i] = data_->tokens[static_cast<size_t>((position_ + i) % n)];
    targets[i] = data_->tokens[static_cast<size_t>((position_ + i + 1) % n)];
  }
  position_ = (position_ + B_ * T_) % n;
}

void DataLoader::read_rank_share(int64_t step_start, int64_t rank, int64_t ranks, int64_t micro_batches, int32_t* tokens, int32_t* targets) {
  const int64_t micro_batch_tokens = B_ * T_;
  seek(rank_share_position(step_start, rank, micro_batches, micro_batch_tokens));
  for (int64_t micro = 0; micro < micro_batches; ++micro) next(tokens + micro * micro_batch_tokens, targets + micro * micro_batch_tokens);
  seek(step_start + ranks * micro_batches * micro_batch_tokens);
}

void take_context_chunks(int32_t* local, const int32_t* whole, int64_t B, int64_t S, const planner::ContextSplit& split) {
  const int64_t local_len = S / split.cp;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < local_len; ++i) local[b * local_len + i] = whole[b * S + split.global_position(i, local_len)];
  }
}

}  // namespace tessera::engine
