// One block of device memory from the caching allocator (caching_allocator.h),
// booked under its category and given back when its owner goes: the GPU
// step's buffers (activations, model states, ZeRO's shards).
#pragma once

#include <cstdint>
#include <utility>

#include "tessera/engine/device/caching_allocator.h"

namespace tessera::engine {

class DeviceBlock {
 public:
  DeviceBlock() = default;
  DeviceBlock(CachingAllocator& allocator, int64_t bytes, MemoryCategory category)
      : allocator_(&allocator), data_(allocator.allocate(bytes, category)) {}
  ~DeviceBlock() {
    if (data_ != nullptr) allocator_->free(data_);
  }
  DeviceBlock(DeviceBlock&& other) noexcept : allocator_(other.allocator_), data_(std::exchange(other.data_, nullptr)) {}
  DeviceBlock& operator=(DeviceBlock&& other) noexcept {
    std::swap(allocator_, other.allocator_);
    std::swap(data_, other.data_);
    return *this;
  }
  template <typename X>
  X* as() const { return static_cast<X*>(data_); }

 private:
  CachingAllocator* allocator_ = nullptr;
  void* data_ = nullptr;
};

}  // namespace tessera::engine
