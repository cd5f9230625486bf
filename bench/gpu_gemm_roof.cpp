// The simulator's GEMM roof (planner/gemm_model.h) against cuBLASLt on this GPU:
// every GEMM of a model's training step (planner::step_gemms, the shapes the
// simulator times) run in bf16 through the engine's cuBLASLt call
// (engine/cuda/gemm.h), with the operand layout the runtime uses for that pass,
// each timed as the median of its repetitions. Prints one line per distinct
// shape and writes the rows to --out as JSON, so that a GPU day's run measures
// the roof per shape where published runs cannot (the GPT-2 rows of
// data/measurements/published.json: README, "Which rows are off"). Where
// cuDNN was found it times the blocks' fused causal attention too (the
// engine's cuDNN SDPA, forward and backward, one layer's heads) against
// attention_core_seconds, the simulator's other roof (the profiles'
// fused_attention_efficiency). And it times a device-to-device copy of 1 GiB
// (read once, written once) against the HBM roof the simulator charges every
// element-wise kernel and a GEMM's bytes at: the profile's hbm_gbps × the
// SimulationSettings memory_efficiency (0.8), which no measurement backs yet.
//
//   gpu_gemm_roof [--gpu PROFILE] [--model NAME:TOKENS]... [--repeat N] [--out FILE]
//
// Exit 77 with one line where there is no CUDA device; 2 for bad arguments.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/engine/cuda/gemm.h"
#if defined(TESSERA_HAVE_CUDNN)
#include "tessera/engine/cuda/attention.h"
#include "tessera/engine/cuda/device_memory.h"
#include "tessera/engine/cuda/stream_events.h"
#include "tessera/engine/memory_ledger.h"
#endif
#include "tessera/engine/device/gpu_presence.h"
#include "tessera/engine/half.h"
#include "tessera/planner/gemm_model.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/simulate.h"

namespace {

using tessera::engine::bf16;
using tessera::engine::cuda::Gemm;
using tessera::engine::cuda::GemmCall;
using tessera::planner::GemmPass;
using tessera::planner::StepGemm;

// The sequence the attention is timed at (the GPT-2 rows': published.json).
constexpr int64_t kAttentionSeqLen = 1024;

struct ModelTokens {
  std::string model;
  int64_t tokens = 0;
};

struct Options {
  std::string gpu = "h100-80g";
  // The micro-batches of the PyTorch GPT-2 rows on one H100 (published.json:
  // 48 and 24 sequences of 1024 tokens).
  std::vector<ModelTokens> models{{"gpt2", 48 * 1024}, {"gpt2-medium", 24 * 1024}};
  int repeat = 20;
  std::string out;
};

int usage(const std::string& why) {
  std::cerr << "gpu_gemm_roof: " << why << "\nusage: gpu_gemm_roof [--gpu PROFILE] [--model NAME:TOKENS]... [--repeat N] [--out FILE]\n";
  return 2;
}

const char* pass_name(GemmPass pass) {
  switch (pass) {
    case GemmPass::forward: return "forward";
    case GemmPass::input_gradient: return "input_gradient";
    case GemmPass::weight_gradient: return "weight_gradient";
  }
  return "";
}

// The row-major product a runtime computes for `g` (C = op(A)·op(B)). With an
// nn.Linear weight W (out, in): Y = X·Wᵀ, dX = dY·W, dW = dYᵀ·X (out × in).
// With GPT-2's Conv1D W (in, out): Y = X·W, dX = dY·Wᵀ, dW = Xᵀ·dY (in × out).
GemmCall runtime_call(const StepGemm& g) {
  const auto m = static_cast<int64_t>(g.shape.m), n = static_cast<int64_t>(g.shape.n), k = static_cast<int64_t>(g.shape.k);
  GemmCall c;
  switch (g.pass) {
    case GemmPass::forward:
    case GemmPass::input_gradient: {
      // (tokens × k) times the weight; the weight is transposed where its storage is (n, k).
      const bool weight_is_n_by_k = (g.pass == GemmPass::forward) != g.weight_stored_in_out;
      c.M = m, c.N = n, c.K = k, c.trans_b = weight_is_n_by_k;
      break;
    }
    case GemmPass::weight_gradient:
      // The planner's shape is (in × out) over k = tokens; nn.Linear's gradient is stored (out × in).
      c.M = g.weight_stored_in_out ? m : n, c.N = g.weight_stored_in_out ? n : m, c.K = k, c.trans_a = true;
      break;
  }
  c.lda = c.trans_a ? c.M : c.K;
  c.ldb = c.trans_b ? c.K : c.N;
  c.ldc = c.N;
  return c;
}

std::string check(cudaError_t e, const char* what) { return e == cudaSuccess ? std::string() : std::string(what) + ": " + cudaGetErrorString(e); }

struct DeviceArray {
  bf16* data = nullptr;
  explicit DeviceArray(size_t n, uint32_t seed) {
    std::vector<bf16> host(n);
    std::mt19937 random(seed);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    for (auto& x : host) x = tessera::engine::to_bf16(value(random));
    if (cudaMalloc(reinterpret_cast<void**>(&data), n * sizeof(bf16)) != cudaSuccess) {
      data = nullptr;
    } else if (cudaMemcpy(data, host.data(), n * sizeof(bf16), cudaMemcpyHostToDevice) != cudaSuccess) {
      cudaFree(data);
      data = nullptr;
    }
  }
  ~DeviceArray() { cudaFree(data); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
};

// The median seconds of `repeat` runs of `launch` (which returns an error
// text or empty) after 3 warm-up runs, each timed by events around it.
template <typename Launch>
std::tuple<double, std::string> median_seconds(Launch launch, int repeat) {
  cudaEvent_t start = nullptr, stop = nullptr;
  std::string error = check(cudaEventCreate(&start), "cudaEventCreate");
  if (error.empty()) error = check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> seconds;
  for (int i = 0; i < repeat + 3 && error.empty(); ++i) {
    error = check(cudaEventRecord(start), "cudaEventRecord");
    if (error.empty()) error = launch();
    if (error.empty()) error = check(cudaEventRecord(stop), "cudaEventRecord");
    if (error.empty()) error = check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    if (error.empty()) error = check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    if (error.empty() && i >= 3) seconds.push_back(ms * 1e-3);
  }
  if (start) cudaEventDestroy(start);
  if (stop) cudaEventDestroy(stop);
  if (!error.empty()) return {0, error};
  std::nth_element(seconds.begin(), seconds.begin() + static_cast<std::ptrdiff_t>(seconds.size() / 2), seconds.end());
  if (seconds[seconds.size() / 2] <= 0) return {0, "a run timed at 0 s: the events did not measure it"};
  return {seconds[seconds.size() / 2], ""};
}

std::tuple<double, std::string> time_gemm(Gemm& gemm, const GemmCall& call, int repeat) {
  DeviceArray A(static_cast<size_t>(call.M * call.K), 1), B(static_cast<size_t>(call.K * call.N), 2), C(static_cast<size_t>(call.M * call.N), 3);
  if (!A.data || !B.data || !C.data) return {0, "out of device memory for " + std::to_string(call.M) + "x" + std::to_string(call.N) + "x" + std::to_string(call.K)};
  return median_seconds([&] { return gemm.run(call, A.data, B.data, C.data, static_cast<const bf16*>(nullptr), nullptr); }, repeat);
}

// A 1 GiB device-to-device copy: the bandwidth it reaches counting its read and
// its write, as a fraction of the profile's HBM bandwidth, beside the fraction
// the simulator assumes.
nlohmann::json time_hbm_copy(const tessera::planner::GpuProfile& gpu, int repeat, std::string& error) {
  constexpr size_t kBytes = size_t{1} << 30;
  void *from = nullptr, *to = nullptr;
  error = check(cudaMalloc(&from, kBytes), "cudaMalloc");
  if (error.empty()) error = check(cudaMalloc(&to, kBytes), "cudaMalloc");
  double seconds = 0;
  if (error.empty()) {
    std::tie(seconds, error) = median_seconds([&] { return check(cudaMemcpyAsync(to, from, kBytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync"); }, repeat);
  }
  cudaFree(from);
  cudaFree(to);
  if (!error.empty()) return {};
  const double bytes_per_s = 2.0 * static_cast<double>(kBytes) / seconds;
  const double fraction = bytes_per_s / (gpu.hbm_gbps * 1e9);
  const double assumed = tessera::planner::SimulationSettings{}.memory_efficiency;
  std::cout << "HBM: a 1 GiB device-to-device copy moves " << bytes_per_s / 1e9 << " GB/s (read + write), " << fraction * 100
            << "% of the profile's " << gpu.hbm_gbps << " GB/s; the simulator assumes " << assumed * 100 << "%\n";
  return {{"bytes", kBytes}, {"seconds", seconds}, {"bytes_per_s", bytes_per_s}, {"fraction_of_profile", fraction}, {"simulator_memory_efficiency", assumed}};
}

#if defined(TESSERA_HAVE_CUDNN)
// q, k and v of one layer side by side in each token's row, as the engine's QKV activation.
tessera::engine::cpu::AttentionShape attention_shape(const tessera::planner::ModelConfig& c, int64_t micro_batch, int64_t seq_len) {
  const int64_t stride = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  return {micro_batch, seq_len, c.num_heads, c.num_kv_heads, c.head_dim, stride, stride};
}

// What cuDNN refuses of the attention this run would time, or empty: its
// graphs are built without a device, so a machine without one checks them.
std::string attention_refused(const tessera::planner::Model& model, int64_t tokens) {
  if (tokens % kAttentionSeqLen != 0) return {};
  const auto shape = attention_shape(model.config, tokens / kAttentionSeqLen, kAttentionSeqLen);
  if (std::string why = tessera::engine::cuda::Attention::unsupported(shape); !why.empty()) return why;
  return tessera::engine::cuda::Attention::graphs_refused<bf16>(shape);
}

// One layer's causal attention core for `micro_batch` sequences of `seq_len`
// (q, k, v packed as the engine's QKV activation), forward and backward,
// against the simulator's attention_core_seconds (fused) for the same.
nlohmann::json time_attention(const tessera::planner::Model& model, int64_t micro_batch, int64_t seq_len, const tessera::planner::KernelRoofs& roofs,
                              int repeat, std::string& error) {
  using namespace tessera::engine;
  const tessera::planner::ModelConfig& c = model.config;
  const int64_t q_width = c.num_heads * c.head_dim, kv_width = c.num_kv_heads * c.head_dim, stride = q_width + 2 * kv_width;
  const cpu::AttentionShape shape = attention_shape(c, micro_batch, seq_len);
  cuda::CudaDeviceMemory memory;
  cuda::CudaEvents events;
  MemoryLedger ledger;
  CachingAllocator allocator(memory, events, ledger);
  cuda::Attention attention(allocator);
  const auto tokens = static_cast<size_t>(micro_batch * seq_len);
  DeviceArray qkv(tokens * static_cast<size_t>(stride), 4), dqkv(tokens * static_cast<size_t>(stride), 5), out(tokens * static_cast<size_t>(q_width), 6),
      dout(tokens * static_cast<size_t>(q_width), 7);
  if (!attention.error().empty() || !qkv.data || !dqkv.data || !out.data || !dout.data) {
    error = attention.error().empty() ? "out of device memory for the attention's tensors" : attention.error();
    return {};
  }
  float* lse = nullptr;
  if (cudaMalloc(reinterpret_cast<void**>(&lse), tokens * static_cast<size_t>(c.num_heads) * sizeof(float)) != cudaSuccess) {
    error = "out of device memory for the attention's log-sum-exps";
    return {};
  }
  const bf16 *q = qkv.data, *k = qkv.data + q_width, *v = qkv.data + q_width + kv_width;
  auto [forward, forward_error] = median_seconds([&] { return attention.forward(out.data, lse, q, k, v, shape, nullptr); }, repeat);
  auto [backward, backward_error] = median_seconds(
      [&] { return attention.backward(dqkv.data, dqkv.data + q_width, dqkv.data + q_width + kv_width, dout.data, q, k, v, out.data, lse, shape, nullptr); }, repeat);
  cudaFree(lse);
  error = !forward_error.empty() ? forward_error : backward_error;
  if (!error.empty()) return {};
  const tessera::planner::PassSeconds predicted = tessera::planner::attention_core_seconds(c, true, micro_batch, seq_len, 1, roofs);
  std::cout << "  attention (" << micro_batch << " x " << seq_len << ", " << c.num_heads << " heads): forward " << forward << " s, predicted/measured "
            << predicted.forward / forward << "; backward " << backward << " s, predicted/measured " << predicted.backward / backward << "\n";
  return {{"micro_batch", micro_batch}, {"seq_len", seq_len}, {"forward_s", forward}, {"backward_s", backward},
          {"predicted_forward_s", predicted.forward}, {"predicted_backward_s", predicted.backward}};
}
#endif

int run(const Options& o) {
  const auto gpu = tessera::planner::load_gpu(o.gpu);
  if (!gpu) return usage(gpu.error().message);
  std::vector<tessera::planner::Model> models;
  for (const ModelTokens& mt : o.models) {
    auto model = tessera::planner::load_model(mt.model);
    if (!model) return usage(model.error().message);
    models.push_back(std::move(model.value()));
  }
#if defined(TESSERA_HAVE_CUDNN)
  for (size_t i = 0; i < models.size(); ++i) {
    if (std::string refused = attention_refused(models[i], o.models[i].tokens); !refused.empty()) {
      std::cerr << "gpu_gemm_roof: " << o.models[i].model << " attention: " << refused << "\n";
      return 1;
    }
  }
#endif
  const auto presence = tessera::engine::cuda_device_presence();
  if (!presence.available) {
    std::cout << "gpu_gemm_roof: skipped, " << presence.description << "\n";
    return 77;
  }
  const auto roofs = tessera::planner::kernel_roofs(gpu.value(), tessera::planner::Precision::bf16, tessera::planner::SimulationSettings{}.memory_efficiency);
  Gemm gemm;
  if (!gemm.error().empty()) {
    std::cerr << "gpu_gemm_roof: " << gemm.error() << "\n";
    return 1;
  }
  std::string copy_error;
  const nlohmann::json hbm_copy = time_hbm_copy(gpu.value(), o.repeat, copy_error);
  if (!copy_error.empty()) {
    std::cerr << "gpu_gemm_roof: HBM copy: " << copy_error << "\n";
    return 1;
  }
  nlohmann::json rows = nlohmann::json::array(), totals = nlohmann::json::object();
  for (size_t i = 0; i < models.size(); ++i) {
    const ModelTokens& mt = o.models[i];
    // A shape times alike wherever it recurs: measure each (pass, layout, shape) once, count its uses.
    std::map<std::tuple<int, bool, double, double, double>, std::pair<StepGemm, int>> distinct;
    for (const StepGemm& g : tessera::planner::step_gemms(models[i], mt.tokens, 1)) {
      auto [it, fresh] = distinct.try_emplace({static_cast<int>(g.pass), g.weight_stored_in_out, g.shape.m, g.shape.n, g.shape.k}, g, 0);
      ++it->second.second;
    }
    double measured_total = 0, predicted_total = 0;
    for (const auto& [key, entry] : distinct) {
      const auto& [g, uses] = entry;
      const GemmCall call = runtime_call(g);
      const auto [measured, error] = time_gemm(gemm, call, o.repeat);
      if (!error.empty()) {
        std::cerr << "gpu_gemm_roof: " << mt.model << " " << g.weight->name << " " << pass_name(g.pass) << ": " << error << "\n";
        return 1;
      }
      const double predicted = tessera::planner::gemm_seconds(g.shape, roofs);
      measured_total += measured * uses, predicted_total += predicted * uses;
      const double tflops = g.shape.flops() / measured / 1e12;
      std::cout << mt.model << " " << pass_name(g.pass) << " " << call.M << "x" << call.N << "x" << call.K << " (" << g.weight->name << ", " << uses
                << " uses): " << tflops << " TFLOP/s measured, predicted/measured " << predicted / measured << "\n";
      rows.push_back({{"model", mt.model}, {"tokens", mt.tokens}, {"tensor", g.weight->name}, {"pass", pass_name(g.pass)}, {"uses", uses},
                      {"M", call.M}, {"N", call.N}, {"K", call.K}, {"trans_a", call.trans_a}, {"trans_b", call.trans_b},
                      {"measured_s", measured}, {"predicted_s", predicted}, {"measured_tflops", tflops},
                      {"measured_fraction_of_peak", g.shape.flops() / measured / roofs.peak_flops}});
    }
    std::cout << mt.model << ": the step's GEMMs " << measured_total << " s measured, " << predicted_total << " s predicted ("
              << (predicted_total / measured_total - 1) * 100 << "%)\n";
    totals[mt.model] = {{"tokens", mt.tokens}, {"measured_s", measured_total}, {"predicted_s", predicted_total}};
#if defined(TESSERA_HAVE_CUDNN)
    // The rows' sequences are 1024 tokens: the tokens are micro-batch × 1024 where they divide.
    if (mt.tokens % kAttentionSeqLen == 0) {
      std::string error;
      nlohmann::json timed = time_attention(models[i], mt.tokens / kAttentionSeqLen, kAttentionSeqLen, roofs, o.repeat, error);
      if (!error.empty()) {
        std::cerr << "gpu_gemm_roof: " << mt.model << " attention: " << error << "\n";
        return 1;
      }
      totals[mt.model]["attention"] = timed;
    }
#endif
  }
  if (!o.out.empty()) {
    const nlohmann::json report{{"device", presence.description}, {"profile", o.gpu}, {"dtype", "bf16"}, {"repeat", o.repeat},
                                {"roof", {{"matmul_tflops", roofs.matmul_flops / 1e12}, {"peak_tflops", roofs.peak_flops / 1e12}}},
                                {"hbm_copy", hbm_copy}, {"models", totals}, {"rows", rows}};
    std::ofstream file(o.out);
    file << report.dump(1) << "\n";
    if (!file.flush()) {
      std::cerr << "gpu_gemm_roof: --out " << o.out << ": could not be written\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool models_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return usage(arg + " needs a value");
    const std::string value = argv[++i];
    if (arg == "--gpu") {
      o.gpu = value;
    } else if (arg == "--out") {
      o.out = value;
    } else if (arg == "--repeat") {
      o.repeat = value.find_first_not_of("0123456789") == std::string::npos && value.size() < 5 ? std::atoi(value.c_str()) : 0;
      if (o.repeat < 1) return usage("--repeat " + value + ": give a count from 1 to 9999");
    } else if (arg == "--model") {
      const auto colon = value.rfind(':');
      const std::string count = colon == std::string::npos ? "" : value.substr(colon + 1);
      const bool digits = !count.empty() && count.size() < 10 && count.find_first_not_of("0123456789") == std::string::npos;
      const int64_t tokens = digits ? std::atoll(count.c_str()) : 0;
      if (tokens <= 0) return usage("--model " + value + ": give NAME:TOKENS, e.g. gpt2:49152");
      if (!models_given) o.models.clear(), models_given = true;
      o.models.push_back({value.substr(0, colon), tokens});
    } else {
      return usage("unknown option " + arg);
    }
  }
  return run(o);
}
