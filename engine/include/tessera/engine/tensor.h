// An owned, contiguous buffer of T (float for training, double for gradient
// checks) whose bytes are booked in a memory ledger under one category for its
// whole life. Move-only: the ledger must see each allocation once.
#pragma once

#include <cstdint>
#include <algorithm>
#include <memory>
#include <new>
#include <string>
#include <utility>

#include "tessera/engine/memory_ledger.h"

namespace tessera::engine {

// A tensor's memory could not be had: says for what and how much, so that the
// message a user sees names the allocation ("out of memory allocating 1.2 GiB
// for optimizer_states").
class AllocationFailure : public std::bad_alloc {
 public:
  AllocationFailure(MemoryCategory category, int64_t bytes);
  explicit AllocationFailure(std::string message);
  // A capacity given with `tessera train --device-memory` would be passed:
  // `bytes` for `category` on top of `in_use` of `capacity` in `space`.
  static AllocationFailure over_capacity(MemorySpace space, MemoryCategory category, int64_t bytes, int64_t in_use, int64_t capacity);
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

// A tensor whose first `elements` live in the host space and the rest on the
// device (Gemini's static placement offloads the states of its first chunks).
// On the CPU both spaces are RAM and one buffer serves; a device backend
// allocates the two parts apart.
struct HostPrefix {
  int64_t elements = 0;
};

template <typename T>
class Tensor {
 public:
  Tensor() = default;
  // In a dry run's ledger the bytes are booked but nothing is allocated: data() is null.
  Tensor(MemoryLedger& ledger, MemoryCategory category, int64_t numel, MemorySpace space = MemorySpace::device)
      : Tensor(ledger, category, numel, HostPrefix{space == MemorySpace::host ? numel : 0}) {}
  Tensor(MemoryLedger& ledger, MemoryCategory category, int64_t numel, HostPrefix host)
      : ledger_(&ledger), category_(category), host_elements_(std::clamp<int64_t>(host.elements, 0, numel)), numel_(numel),
        data_(ledger.is_dry_run() ? nullptr : allocate(category, numel)) {
    ledger_->allocated(category_, MemorySpace::host, host_bytes());
    try {
      ledger_->allocated(category_, MemorySpace::device, bytes() - host_bytes());  // throws past the device's capacity
    } catch (...) {
      ledger_->freed(category_, MemorySpace::host, host_bytes());
      throw;
    }
  }
  ~Tensor() { release(); }
  Tensor(Tensor&& other) noexcept { *this = std::move(other); }
  Tensor& operator=(Tensor&& other) noexcept {
    if (this != &other) {
      release();
      ledger_ = std::exchange(other.ledger_, nullptr);
      category_ = other.category_;
      host_elements_ = other.host_elements_;
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
  int64_t host_bytes() const { return host_elements_ * static_cast<int64_t>(sizeof(T)); }
  MemoryCategory category() const { return category_; }
  void zero() {
    if (data_) std::fill(data_.get(), data_.get() + numel_, T{});
  }

 private:
  static std::unique_ptr<T[]> allocate(MemoryCategory category, int64_t numel) {
    try {
      return std::unique_ptr<T[]>(new T[static_cast<size_t>(numel)]());
    } catch (const std::bad_alloc&) {
      throw AllocationFailure(category, numel * static_cast<int64_t>(sizeof(T)));
    }
  }
  void release() {
    if (ledger_ != nullptr) {
      ledger_->freed(category_, MemorySpace::host, host_bytes());
      ledger_->freed(category_, MemorySpace::device, bytes() - host_bytes());
    }
    data_.reset();
    ledger_ = nullptr;
  }

  MemoryLedger* ledger_ = nullptr;
  MemoryCategory category_ = MemoryCategory::activations;
  int64_t host_elements_ = 0;
  int64_t numel_ = 0;
  std::unique_ptr<T[]> data_;
};

// A tensor inside a flat buffer (one Tensor holding every parameter, or every
// gradient, back to back): its elements, not its memory, which the buffer owns
// and books in the ledger.
template <typename T>
class Slice {
 public:
  Slice() = default;
  Slice(T* data, int64_t numel) : data_(data), numel_(numel) {}
  T* data() const { return data_; }
  int64_t numel() const { return numel_; }
  void zero() const { std::fill(data_, data_ + numel_, T{}); }

 private:
  T* data_ = nullptr;
  int64_t numel_ = 0;
};

}  // namespace tessera::engine
