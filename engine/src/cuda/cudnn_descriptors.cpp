#include "cudnn_descriptors.h"

namespace tessera::engine::cuda::cudnn {

void check(cudnnStatus_t status, const std::string& what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof detail);
  std::string message = what + " failed: " + cudnnGetErrorString(status);
  if (detail[0] != '\0') message += std::string("; ") + detail;
  throw GraphError(message);
}

Dims packed_strides(const Dims& dims) {
  return {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
}

Descriptor::Descriptor(cudnnBackendDescriptorType_t type) {
  check(cudnnBackendCreateDescriptor(type, &handle_), "cudnnBackendCreateDescriptor");
}

Descriptor::~Descriptor() {
  if (handle_ != nullptr) cudnnBackendDestroyDescriptor(handle_);
}

void Descriptor::set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const void* values,
                     const char* what) {
  check(cudnnBackendSetAttribute(handle_, name, type, count, values), std::string("setting ") + what);
}

void Descriptor::finalize(const char* what) { check(cudnnBackendFinalize(handle_), std::string("finalizing ") + what); }

cudnnBackendDescriptor_t Graph::make_tensor(int64_t uid, const Dims& dims, const Dims& strides, cudnnDataType_t type,
                                            bool is_virtual, bool by_value) {
  Descriptor& t = add(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const int64_t alignment = 16;  // the device pointers come from cudaMalloc or 16-byte aligned offsets
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, "a tensor's data type");
  t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data(), "a tensor's dimensions");
  t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data(), "a tensor's strides");
  t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "a tensor's unique id");
  t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment, "a tensor's alignment");
  t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual, "a tensor's virtual flag");
  t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value, "a tensor's by-value flag");
  t.finalize("a tensor");
  return t.get();
}

cudnnBackendDescriptor_t Graph::tensor(int64_t uid, const Dims& dims, const Dims& strides, cudnnDataType_t type) {
  return make_tensor(uid, dims, strides, type, false, false);
}

cudnnBackendDescriptor_t Graph::scalar(int64_t uid) {
  return make_tensor(uid, {1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT, false, true);
}

cudnnBackendDescriptor_t Graph::virtual_tensor(const Dims& dims, const Dims& strides, cudnnDataType_t type) {
  return make_tensor(next_virtual_uid_++, dims, strides, type, true, false);
}

void Graph::pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                      cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, cudnnDataType_t compute, int64_t axis) {
  Descriptor& pw = add(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "a pointwise mode");
  pw.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &compute, "a pointwise precision");
  if (axis >= 0) pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, "an index's axis");
  pw.finalize("a pointwise descriptor");
  const cudnnBackendDescriptor_t pw_handle = pw.get();
  Descriptor& op = add(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw_handle, "a pointwise operation's mode");
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x, "a pointwise operation's input");
  if (b != nullptr) op.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b, "a pointwise operation's second input");
  if (t != nullptr) op.set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t, "a pointwise operation's third input");
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y, "a pointwise operation's output");
  op.finalize("a pointwise operation");
  operations_.push_back(op.get());
}

void Graph::index(cudnnBackendDescriptor_t x, int64_t axis, cudnnBackendDescriptor_t y) {
  pointwise(CUDNN_POINTWISE_GEN_INDEX, x, nullptr, nullptr, y, CUDNN_DATA_FLOAT, axis);
}

void Graph::matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
  Descriptor& mm = add(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute, "a matmul's precision");
  mm.finalize("a matmul descriptor");
  const cudnnBackendDescriptor_t mm_handle = mm.get();
  Descriptor& op = add(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a, "a matmul's A");
  op.set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b, "a matmul's B");
  op.set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c, "a matmul's C");
  op.set(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm_handle, "a matmul's descriptor");
  op.finalize("a matmul operation");
  operations_.push_back(op.get());
}

void Graph::reduction(cudnnReduceTensorOp_t reduce, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
  Descriptor& r = add(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  r.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &reduce, "a reduction's operator");
  r.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute, "a reduction's precision");
  r.finalize("a reduction descriptor");
  const cudnnBackendDescriptor_t r_handle = r.get();
  Descriptor& op = add(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x, "a reduction's input");
  op.set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y, "a reduction's output");
  op.set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, r_handle, "a reduction's descriptor");
  op.finalize("a reduction operation");
  operations_.push_back(op.get());
}

void Graph::reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
  Descriptor& op = add(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x, "a reshape's input");
  op.set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y, "a reshape's output");
  op.finalize("a reshape operation");
  operations_.push_back(op.get());
}

Plan Graph::plan(cudnnHandle_t handle) {
  Descriptor& graph = add(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "the operation graph's handle");
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(operations_.size()),
            operations_.data(), "the operation graph's operations");
  graph.finalize("the operation graph");
  const cudnnBackendDescriptor_t graph_handle = graph.get();

  Descriptor& heuristics = add(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph_handle, "the heuristics' graph");
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "the heuristics' mode");
  heuristics.finalize("the engine heuristics");
  const cudnnBackendDescriptor_t heuristics_handle = heuristics.get();
  int64_t count = 0;
  check(cudnnBackendGetAttribute(heuristics_handle, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
        "counting the engine configurations");
  if (count == 0) throw GraphError("cuDNN's heuristics offer no engine for this graph");

  std::vector<Descriptor> configs;
  std::vector<cudnnBackendDescriptor_t> config_handles;
  for (int64_t i = 0; i < count; ++i) config_handles.push_back(configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR).get());
  check(cudnnBackendGetAttribute(heuristics_handle, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count,
                                 config_handles.data()),
        "reading the engine configurations");

  // The first configuration, in the heuristics' order, that builds a plan;
  // the reasons the others refused are kept for the error if none does.
  std::string refusals;
  for (int64_t i = 0; i < count; ++i) {
    try {
      Descriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "the plan's handle");
      plan.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config_handles[static_cast<size_t>(i)], "the plan's engine configuration");
      plan.finalize("an execution plan");
      int64_t workspace = 0, n = 0;
      check(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &workspace),
            "reading the plan's workspace size");
      Plan result;
      result.plan = plan.get();
      result.workspace_bytes = workspace;
      result.descriptors = std::move(descriptors_);
      for (Descriptor& config : configs) result.descriptors.push_back(std::move(config));
      result.descriptors.push_back(std::move(plan));
      return result;
    } catch (const GraphError& refusal) {
      if (refusals.empty()) refusals = refusal.what();
    }
  }
  throw GraphError("none of cuDNN's " + std::to_string(count) + " engine configurations builds a plan (the first: " + refusals + ")");
}

void execute(cudnnHandle_t handle, const Plan& plan, const std::vector<int64_t>& uids, const std::vector<void*>& pointers,
             void* workspace) {
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()), uids.data(), "the tensors' ids");
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(pointers.size()), pointers.data(),
           "the tensors' pointers");
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace, "the workspace");
  pack.finalize("the variant pack");
  check(cudnnBackendExecute(handle, plan.plan, pack.get()), "cudnnBackendExecute");
}

}  // namespace tessera::engine::cuda::cudnn
