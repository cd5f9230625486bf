// The global gradient norm's square on the device; see global_sum_of_squares.h.
#include "global_sum_of_squares.h"

#include <cuda_runtime_api.h>

#include "tessera/engine/cuda/sum_of_squares.h"

#include "cuda_errors.h"

namespace tessera::engine::cuda {

template <typename G>
Result<double> global_sum_of_squares(const G* grads, const std::vector<std::pair<int64_t, int64_t>>& runs, double* result, void* workspace,
                                     std::initializer_list<comm::Communicator*> groups) {
  double total = 0;
  for (const auto& [begin, end] : runs) {
    if (Status s = succeeded(sum_of_squares(result, reinterpret_cast<int32_t*>(result + 1), grads + begin, end - begin, 1.0, workspace, nullptr),
                             "the gradients' sum of squares");
        !s) {
      return s.error();
    }
    double run = 0;
    if (Status s = succeeded(cudaMemcpy(&run, result, sizeof run, cudaMemcpyDeviceToHost), "copying the sum of squares"); !s) return s.error();
    total += run;
  }
  return sum_over_groups(total, result, groups);
}

Result<double> sum_over_groups(double sum, double* scratch, std::initializer_list<comm::Communicator*> groups) {
  for (comm::Communicator* group : groups) {
    if (group == nullptr || group->size() == 1) continue;
    if (Status s = succeeded(cudaMemcpy(scratch, &sum, sizeof sum, cudaMemcpyHostToDevice), "copying the sum of squares"); !s) return s.error();
    if (Status s = group->all_reduce(scratch, scratch, 1, comm::DataType::f64, comm::ReduceOp::sum); !s) return s.error();
    if (Status s = succeeded(cudaMemcpy(&sum, scratch, sizeof sum, cudaMemcpyDeviceToHost), "copying the sum of squares"); !s) return s.error();
  }
  return sum;
}

template Result<double> global_sum_of_squares(const bf16*, const std::vector<std::pair<int64_t, int64_t>>&, double*, void*,
                                              std::initializer_list<comm::Communicator*>);
template Result<double> global_sum_of_squares(const float*, const std::vector<std::pair<int64_t, int64_t>>&, double*, void*,
                                              std::initializer_list<comm::Communicator*>);

}  // namespace tessera::engine::cuda
