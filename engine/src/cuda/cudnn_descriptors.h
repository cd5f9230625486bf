// A small owner of cuDNN's graph (backend) API descriptors (cudnn_graph.h):
// tensors, the operations between them, the operation graph, and the
// execution plan that cuDNN's heuristics choose for it. Only what the fused
// attention graphs use (attention_graphs.cpp). A failing call throws
// GraphError naming the call and cuDNN's message; the public launchers turn it
// into their one-line error.
//
// The calls follow the backend API reference ("cudnn_graph Library",
// docs.nvidia.com/deeplearning/cudnn/api) and the order in which
// cudnn-frontend (github.com/NVIDIA/cudnn-frontend, include/
// cudnn_frontend_Tensor.h, _OperationGraph.h, _Heuristics.h,
// _ExecutionPlan.h) sets and finalizes them.
#pragma once

#include <cudnn_graph.h>

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessera::engine::cuda::cudnn {

struct GraphError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws GraphError("<what> failed: <status>; <cuDNN's last error>") unless `status` is success.
void check(cudnnStatus_t status, const std::string& what);

using Dims = std::array<int64_t, 4>;

// Row-major strides of a packed tensor with these dimensions.
Dims packed_strides(const Dims& dims);

// One backend descriptor, destroyed with its owner.
class Descriptor {
 public:
  explicit Descriptor(cudnnBackendDescriptorType_t type);
  ~Descriptor();
  Descriptor(Descriptor&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  Descriptor& operator=(Descriptor&&) = delete;

  cudnnBackendDescriptor_t get() const { return handle_; }
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const void* values,
           const char* what);
  void set(cudnnBackendAttributeName_t name, cudnnBackendDescriptor_t value, const char* what) {
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value, what);
  }
  void finalize(const char* what);

 private:
  cudnnBackendDescriptor_t handle_ = nullptr;
};

// A finalized execution plan and everything it refers to.
struct Plan {
  std::vector<Descriptor> descriptors;  // the graph's, kept alive with the plan
  cudnnBackendDescriptor_t plan = nullptr;
  int64_t workspace_bytes = 0;
};

// The operations of one graph, added in order. Tensors are identified by the
// descriptors it returns; those given a uid are the caller's memory at
// execution, the others (virtual) exist only inside cuDNN's fused kernel.
class Graph {
 public:
  // A tensor the caller passes at execution (by pointer; by value for scalars).
  cudnnBackendDescriptor_t tensor(int64_t uid, const Dims& dims, const Dims& strides, cudnnDataType_t type);
  cudnnBackendDescriptor_t scalar(int64_t uid);  // fp32, passed by value
  // An intermediate (virtual) tensor.
  cudnnBackendDescriptor_t virtual_tensor(const Dims& dims, const Dims& strides, cudnnDataType_t type);

  // y = mode(x[, b[, t]]), computed in `compute` (fp32 unless said); `axis`
  // for the modes that have one (GEN_INDEX), else -1.
  void pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                 cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, cudnnDataType_t compute = CUDNN_DATA_FLOAT,
                 int64_t axis = -1);
  // y = the index along `axis` of each element of x (GEN_INDEX).
  void index(cudnnBackendDescriptor_t x, int64_t axis, cudnnBackendDescriptor_t y);
  // c = a · b over the last two dimensions, batched (and broadcast) over the first two; fp32 accumulation.
  void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c);
  // y = x reduced (ADD or MAX) over the dimensions where y is smaller, in fp32.
  void reduction(cudnnReduceTensorOp_t op, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y);
  // y = x seen with other dimensions and strides (a transpose, for the matmuls).
  void reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y);

  // The operation graph, finalized, and the first engine configuration of
  // cuDNN's heuristics (mode A) that it can build a plan for.
  Plan plan(cudnnHandle_t handle);

 private:
  cudnnBackendDescriptor_t make_tensor(int64_t uid, const Dims& dims, const Dims& strides, cudnnDataType_t type,
                                       bool is_virtual, bool by_value);
  Descriptor& add(cudnnBackendDescriptorType_t type) { return descriptors_.emplace_back(type); }

  std::vector<Descriptor> descriptors_;
  std::vector<cudnnBackendDescriptor_t> operations_;
  int64_t next_virtual_uid_ = 1000;  // the caller's uids stay below
};

// Runs `plan` on the handle's stream with the caller's tensors (uids[i] at pointers[i]).
void execute(cudnnHandle_t handle, const Plan& plan, const std::vector<int64_t>& uids, const std::vector<void*>& pointers,
             void* workspace);

}  // namespace tessera::engine::cuda::cudnn
