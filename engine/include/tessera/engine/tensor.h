// An owned, contiguous buffer of T (float for training, double for gradient
// checks) whose bytes are booked in a memory ledger under one category for its
// whole life. Move-only: the ledger must see each allocation once.
#pragma once

#include <cstdint>
#include <algorithm>
#include <memory>
#include <utility>

#include "tessera/engine/memory_ledger.h"

namespace tessera::engine {

template <typename T>
class Tensor {
 public:
  Tensor() = default;
  Tensor(MemoryLedger& ledger, MemoryCategory category, int64_t numel, Device device = Device::cpu)
      : ledger_(&ledger), category_(category), device_(device), numel_(numel), data_(new T[static_cast<size_t>(numel)]()) {
    ledger_->allocated(category_, device_, bytes());
  }
  ~Tensor() { release(); }
  Tensor(Tensor&& other) noexcept { *this = std::move(other); }
  Tensor& operator=(Tensor&& other) noexcept {
    if (this != &other) {
      release();
      ledger_ = std::exchange(other.ledger_, nullptr);
      category_ = other.category_;
      device_ = other.device_;
      numel_ = std::exchange(other.numel_, 0);
      data_ = std::move(other.data_);
    }
    return *this;
  }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  int64_t numel() const { return numel_; }
  int64_t bytes() const { return numel_ * static_cast<int64_t>(sizeof(T)); }
  MemoryCategory category() const { return category_; }
  void zero() { std::fill(data_.get(), data_.get() + numel_, T{}); }

 private:
  void release() {
    if (ledger_ != nullptr && data_) ledger_->freed(category_, device_, bytes());
    data_.reset();
    ledger_ = nullptr;
  }

  MemoryLedger* ledger_ = nullptr;
  MemoryCategory category_ = MemoryCategory::activations;
  Device device_ = Device::cpu;
  int64_t numel_ = 0;
  std::unique_ptr<T[]> data_;
};

}  // namespace tessera::engine
