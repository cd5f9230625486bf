// Device memory for the GPU tests: a buffer that copies a host vector in and
// back out, the check that a CUDA device is there at all, and a stream the
// test can hold back.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace tessera::engine::cuda::testing {

// Empty when a device can be used, else why not (one line for GTEST_SKIP).
inline std::string no_device_reason() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(error);
  if (count == 0) return "no CUDA device on this machine";
  return {};
}

// Every GPU test skips, with the reason, where there is no device.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = no_device_reason();
    if (!reason.empty()) GTEST_SKIP() << reason;
  }
  void TearDown() override {
    if (no_device_reason().empty()) {
      const cudaError_t error = cudaDeviceSynchronize();
      EXPECT_EQ(error, cudaSuccess) << cudaGetErrorString(error);
    }
  }
};

template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    void* memory = nullptr;
    const cudaError_t error = cudaMalloc(&memory, (n == 0 ? 1 : n) * sizeof(T));
    EXPECT_EQ(error, cudaSuccess) << cudaGetErrorString(error);
    data_ = static_cast<T*>(memory);
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    const cudaError_t error = cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
    EXPECT_EQ(error, cudaSuccess) << cudaGetErrorString(error);
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return data_; }
  // Waits for the device, then copies the buffer back.
  std::vector<T> host() const {
    std::vector<T> out(n_);
    const cudaError_t error = cudaMemcpy(out.data(), data_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    EXPECT_EQ(error, cudaSuccess) << cudaGetErrorString(error);
    return out;
  }

 private:
  size_t n_;
  T* data_ = nullptr;
};

// A stream of its own, and a way to hold it: work queued after hold() runs
// only once release() has been called (a host function queued by hold()
// waits for it, cudaLaunchHostFunc), so "that stream has not run yet" is
// certain, not a race.
class HeldStream {
 public:
  HeldStream() { EXPECT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess); }
  ~HeldStream() {
    release();
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  void hold() {
    released_ = false;
    EXPECT_EQ(cudaLaunchHostFunc(stream_, [](void* flag) { while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::yield(); }, &released_),
              cudaSuccess);
  }
  void release() { released_ = true; }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
  std::atomic<bool> released_{true};
};

}  // namespace tessera::engine::cuda::testing
