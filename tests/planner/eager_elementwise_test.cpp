// torchtitan's Llama block run eagerly (eager_elementwise.h): its element-wise
// bytes per token, worked op by op by hand, and where the simulator charges them.
#include <gtest/gtest.h>

#include "tessera/planner/cluster.h"
#include "tessera/planner/eager_elementwise.h"
#include "tessera/planner/simulate.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

using testing::shipped_gpu;
using testing::shipped_model;

TEST(EagerElementwise, LlamaBlockBytesOpByOp) {
  // bf16. Per hidden element: each RMSNorm 36 bytes forward (cast up 6, pow 8, mean 4,
  // x·rsqrt 8, cast down 6, ·weight 4) and 64 backward, the two residual adds 12 each way.
  // Per q and k element: RoPE 20 each way. GQA: keys and values copied out to the query
  // heads, 2·(kv + q) elements of 2 bytes each way. SwiGLU: 10 bytes per element forward,
  // 18 backward. Llama 3 8B: h = q = 4096, kv = 1024, I = 14336, 8 KV heads of 32.
  const ElementwiseBytes llama3 = torchtitan_eager_block_bytes(shipped_model("llama-3-8b").config, 2);
  EXPECT_DOUBLE_EQ(llama3.forward, (2 * 36 + 12) * 4096.0 + (20 + 4) * (4096.0 + 1024) + 10 * 14336.0);
  EXPECT_DOUBLE_EQ(llama3.backward, (2 * 64 + 12) * 4096.0 + (20 + 4) * (4096.0 + 1024) + 18 * 14336.0);
  // Llama 2 13B has as many KV heads as query heads: no copies.
  const ElementwiseBytes llama2 = torchtitan_eager_block_bytes(shipped_model("llama-2-13b").config, 2);
  EXPECT_DOUBLE_EQ(llama2.forward, 84 * 5120.0 + 20 * 10240.0 + 10 * 13824.0);
  // fp32: the casts are free (norm 28 forward, 60 backward; RoPE 8), the rest at 4 bytes.
  const ElementwiseBytes fp32 = torchtitan_eager_block_bytes(shipped_model("llama-2-13b").config, 4);
  EXPECT_DOUBLE_EQ(fp32.forward, (2 * 28 + 24) * 5120.0 + 8 * 10240.0 + 20 * 13824.0);
  EXPECT_DOUBLE_EQ(fp32.backward, (2 * 60 + 24) * 5120.0 + 8 * 10240.0 + 36 * 13824.0);
}

TEST(EagerElementwise, OnlyTorchtitansRuntimeRunsItsBlockEagerly) {
  const Model model = shipped_model("llama-3-8b");
  const GpuProfile h100 = shipped_gpu("h100-80g");
  const ClusterSpec cluster = make_cluster(h100, 8, 8, 400).value();
  const auto forward_s = [&](Runtime runtime) {
    EstimateRequest r;
    r.plugin.kind = PluginKind::torch_fsdp;
    r.plugin.runtime = runtime;
    r.layout.dp = 8;
    r.training.seq_len = 8192;
    const MemoryEstimate memory = testing::estimate_or_fail(model, h100, r);
    return simulate_step(model, cluster, r, memory, SimulationSettings{}, false).value().breakdown.forward_s;
  };
  // The same GEMMs and attention; eagerly, 610,304 bytes per token and block go through
  // HBM where a fusing runtime writes what the block keeps (139,264 + 128 bytes).
  EXPECT_GT(forward_s(Runtime::torchtitan), forward_s(Runtime::colossalai));
}

}  // namespace
}  // namespace tessera::planner
