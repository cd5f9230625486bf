#include "tessera/engine/data.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

namespace tessera::engine {
namespace {

constexpr int32_t kShardMagic = 20240520;  // llm.c data_common.py
constexpr int32_t kShardVersion = 1;

Result<TokenDataset> load_shard(const std::string& path, const std::vector<char>& bytes) {
  const size_t header_bytes = 256 * sizeof(int32_t);
  if (bytes.size() < header_bytes) return make_error(ErrorCode::parse_error, "--data: " + path + " is shorter than an llm.c shard header (1024 bytes)");
  int32_t header[256];
  std::memcpy(header, bytes.data(), header_bytes);
  if (header[0] != kShardMagic || header[1] != kShardVersion) {
    return make_error(ErrorCode::parse_error, "--data: " + path + " is not an llm.c token shard (magic 20240520, version 1)");
  }
  const int64_t count = header[2];
  if (count < 0 || bytes.size() != header_bytes + static_cast<size_t>(count) * sizeof(uint16_t)) {
    return make_error(ErrorCode::parse_error, "--data: " + path + " holds " + std::to_string((bytes.size() - header_bytes) / 2) +
                                                  " tokens but its header says " + std::to_string(count));
  }
  TokenDataset data;
  data.tokens.resize(static_cast<size_t>(count));
  int32_t largest = -1;
  for (int64_t i = 0; i < count; ++i) {
    uint16_t token = 0;
    std::memcpy(&token, bytes.data() + header_bytes + static_cast<size_t>(i) * 2, 2);
    data.tokens[static_cast<size_t>(i)] = token;
    largest = std::max<int32_t>(largest, token);
  }
  // The ids the shard uses, not all that uint16 could hold: a GPT-2 shard
  // (ids below 50257) trains a model with GPT-2's vocabulary.
  data.vocab_size = largest + 1;
  return data;
}

}  // namespace

Result<TokenDataset> load_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::not_found, "--data: cannot open '" + path + "'");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (path.ends_with(".bin")) return load_shard(path, bytes);
  TokenDataset data;
  data.vocab_size = 256;
  data.tokens.reserve(bytes.size());
  for (char ch : bytes) data.tokens.push_back(static_cast<unsigned char>(ch));
  return data;
}

void DataLoader::next(int32_t* tokens, int32_t* targets) {
  const auto n = static_cast<int64_t>(data_->tokens.size());
  for (int64_t i = 0; i < B_ * T_; ++i) {
    tokens[i] = data_->tokens[static_cast<size_t>((position_ + i) % n)];
    targets[i] = data_->tokens[static_cast<size_t>((position_ + i + 1) % n)];
  }
  position_ = (position_ + B_ * T_) % n;
}

}  // namespace tessera::engine
