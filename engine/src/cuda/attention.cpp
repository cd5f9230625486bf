#include "tessera/engine/cuda/attention.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <tuple>
#include <type_traits>
#include <vector>

#include "attention_graphs.h"
#include "cudnn_descriptors.h"

namespace tessera::engine::cuda {

namespace {

namespace uid = attention_graphs;

template <typename T>
cudnnDataType_t io_type() {
  static_assert(std::is_same_v<T, bf16> || std::is_same_v<T, fp16>, "cuDNN's fused attention takes bf16 or fp16");
  return std::is_same_v<T, bf16> ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
}

// Byte offsets inside the workspace are kept 256-byte aligned (the allocator's blocks are 512-byte aligned).
size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

bool misaligned(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return true;
  }
  return false;
}

}  // namespace

struct Attention::State {
  using Key = std::tuple<bool, cudnnDataType_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, int64_t,
                         int64_t>;

  explicit State(CachingAllocator& memory) : allocator(memory) {}
  ~State() {
    if (workspace != nullptr) allocator.free(workspace);
    if (handle != nullptr) cudnnDestroy(handle);
  }

  CachingAllocator& allocator;
  cudnnHandle_t handle = nullptr;
  std::map<Key, cudnn::Plan> plans;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;

  const cudnn::Plan& plan(bool backward, cudnnDataType_t type, const cpu::AttentionShape& s) {
    const Key key{backward, type,         s.B,       s.T,    s.NH,     s.KVH,           s.HS,
                  s.q_stride, s.kv_stride, s.queries(), s.keys(), s.causal, s.dq_rows_apart(), s.dkv_rows_apart()};
    auto found = plans.find(key);
    if (found == plans.end()) {
      found = plans.emplace(key, (backward ? attention_graphs::backward(s, type) : attention_graphs::forward(s, type)).plan(handle)).first;
    }
    return found->second;
  }

  // At least `bytes` of workspace, a block of the caching allocator booked
  // under `workspace`; a smaller one is given back first (work queued on the
  // allocator's stream runs in order, so it is reused only after the launches
  // that read it).
  void* reserve(size_t bytes) {
    if (bytes <= workspace_bytes) return workspace;
    if (workspace != nullptr) allocator.free(workspace);
    workspace = nullptr;
    workspace_bytes = 0;
    workspace = allocator.allocate(static_cast<int64_t>(bytes), MemoryCategory::workspace);
    workspace_bytes = bytes;
    return workspace;
  }
};

Attention::Attention(CachingAllocator& workspace) : state_(std::make_unique<State>(workspace)) {
  if (cudnnStatus_t s = cudnnCreate(&state_->handle); s != CUDNN_STATUS_SUCCESS) {
    state_->handle = nullptr;
    error_ = std::string("cudnnCreate failed: ") + cudnnGetErrorString(s);
  }
}

Attention::~Attention() = default;

std::string Attention::unsupported(const cpu::AttentionShape& s) {
  if (s.B <= 0 || s.T <= 0 || s.NH <= 0 || s.KVH <= 0) return "attention shape: B, T, NH and KVH must be positive";
  if (s.HS % 8 != 0 || s.HS <= 0 || s.HS > 256) {
    return "attention head size " + std::to_string(s.HS) + ": cuDNN's fused attention needs a multiple of 8 up to 256";
  }
  if (s.NH % s.KVH != 0) return "attention heads: NH=" + std::to_string(s.NH) + " is not a multiple of KVH=" + std::to_string(s.KVH);
  if (s.queries() > s.T || s.keys() > s.T) return "attention block: query rows and keys must be at most T";
  if (s.causal && s.queries() != s.keys()) return "attention block: a causal block has as many query rows as keys (its mask is top-left aligned)";
  if (s.q_stride % 8 != 0 || s.kv_stride % 8 != 0 || s.dq_rows_apart() % 8 != 0 || s.dkv_rows_apart() % 8 != 0) {
    return "attention row strides " + std::to_string(s.q_stride) + ", " + std::to_string(s.kv_stride) + ", " + std::to_string(s.dq_rows_apart()) +
           ", " + std::to_string(s.dkv_rows_apart()) + ": cuDNN needs 16-byte aligned rows (multiples of 8 elements)";
  }
  return {};
}

template <typename T>
std::string Attention::graphs_refused(const cpu::AttentionShape& s) {
  if (std::string why = unsupported(s); !why.empty()) return why;
  try {
    attention_graphs::forward(s, io_type<T>());
    attention_graphs::backward(s, io_type<T>());
  } catch (const cudnn::GraphError& e) {
    return std::string("cuDNN attention graph: ") + e.what();
  }
  return {};
}

template <typename T>
std::string Attention::forward(T* out, float* lse, const T* q, const T* k, const T* v, const cpu::AttentionShape& s,
                               cudaStream_t stream) {
  if (!error_.empty()) return error_;
  if (std::string why = unsupported(s); !why.empty()) return why;
  if (misaligned({out, lse, q, k, v})) return "attention: cuDNN needs 16-byte aligned device pointers";
  try {
    const cudnn::Plan& plan = state_->plan(false, io_type<T>(), s);
    float scale = 1.0f / std::sqrt(static_cast<float>(s.HS));  // the CPU op's 1/√HS
    float minus_inf = -std::numeric_limits<float>::infinity();
    void* workspace = state_->reserve(aligned(static_cast<size_t>(plan.workspace_bytes)));
    cudnn::check(cudnnSetStream(state_->handle, stream), "cudnnSetStream");
    cudnn::execute(state_->handle, plan, {uid::q, uid::k, uid::v, uid::out, uid::lse, uid::scale, uid::negative_infinity},
                   {const_cast<T*>(q), const_cast<T*>(k), const_cast<T*>(v), out, lse, &scale, &minus_inf}, workspace);
  } catch (const std::exception& e) {  // cuDNN's refusal, or no memory for the workspace
    return std::string("cuDNN attention forward: ") + e.what();
  }
  return {};
}

template <typename T>
std::string Attention::backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out,
                                const float* lse, const cpu::AttentionShape& s, cudaStream_t stream) {
  if (!error_.empty()) return error_;
  if (std::string why = unsupported(s); !why.empty()) return why;
  if (misaligned({dq, dk, dv, dout, q, k, v, out, lse})) return "attention: cuDNN needs 16-byte aligned device pointers";
  try {
    const cudnn::Plan& plan = state_->plan(true, io_type<T>(), s);
    // The workspace: the plan's, then D = rowsum(dO ∘ O) (B, NH, T) and dQ's
    // fp32 accumulator (B, NH, T, HS), which the graph names as tensors.
    const size_t plan_bytes = aligned(static_cast<size_t>(plan.workspace_bytes));
    const size_t sum_bytes = aligned(static_cast<size_t>(s.B * s.NH * s.T) * sizeof(float));
    const size_t accumulator_bytes = aligned(static_cast<size_t>(s.B * s.NH * s.T * s.HS) * sizeof(float));
    char* workspace = static_cast<char*>(state_->reserve(plan_bytes + sum_bytes + accumulator_bytes));
    float scale = 1.0f / std::sqrt(static_cast<float>(s.HS));
    float minus_inf = -std::numeric_limits<float>::infinity();
    float one = 1.0f;
    cudnn::check(cudnnSetStream(state_->handle, stream), "cudnnSetStream");
    cudnn::execute(state_->handle, plan,
                   {uid::q, uid::k, uid::v, uid::out, uid::dout, uid::lse, uid::dq, uid::dk, uid::dv, uid::scale,
                    uid::negative_infinity, uid::one, uid::softmax_sum, uid::dq_accumulator},
                   {const_cast<T*>(q), const_cast<T*>(k), const_cast<T*>(v), const_cast<T*>(out), const_cast<T*>(dout),
                    const_cast<float*>(lse), dq, dk, dv, &scale, &minus_inf, &one, workspace + plan_bytes,
                    workspace + plan_bytes + sum_bytes},
                   workspace);
  } catch (const std::exception& e) {
    return std::string("cuDNN attention backward: ") + e.what();
  }
  return {};
}

template std::string Attention::graphs_refused<bf16>(const cpu::AttentionShape&);
template std::string Attention::graphs_refused<fp16>(const cpu::AttentionShape&);
template std::string Attention::forward<bf16>(bf16*, float*, const bf16*, const bf16*, const bf16*, const cpu::AttentionShape&,
                                              cudaStream_t);
template std::string Attention::forward<fp16>(fp16*, float*, const fp16*, const fp16*, const fp16*, const cpu::AttentionShape&,
                                              cudaStream_t);
template std::string Attention::backward<bf16>(bf16*, bf16*, bf16*, const bf16*, const bf16*, const bf16*, const bf16*, const bf16*,
                                               const float*, const cpu::AttentionShape&, cudaStream_t);
template std::string Attention::backward<fp16>(fp16*, fp16*, fp16*, const fp16*, const fp16*, const fp16*, const fp16*, const fp16*,
                                               const float*, const cpu::AttentionShape&, cudaStream_t);

}  // namespace tessera::engine::cuda
