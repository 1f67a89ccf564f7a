// An owning device allocation (cudaMalloc/cudaFree). Move-only; grows on Reserve, never shrinks.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstring>
#include <utility>

#include "cuda_check.h"

namespace flotilla::inference::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { Free(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      Free();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }

  // Ensures at least `bytes` (contents are not kept when it grows).
  absl::Status Reserve(size_t bytes) {
    if (bytes <= bytes_) return absl::OkStatus();
    Free();
    CUDA_RETURN_IF_ERROR(cudaMalloc(&ptr_, bytes));
    bytes_ = bytes;
    return absl::OkStatus();
  }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void Free() {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace flotilla::inference::cuda

namespace flotilla::inference::cuda {

// An owning page-locked host allocation (cudaHostAlloc/cudaFreeHost) for async copies; with
// cudaHostAllocMapped also addressable by kernels (device_as), which write to it directly.
// Move-only; grows on Reserve (a mapped one zero-filled), never shrinks.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(unsigned flags = cudaHostAllocDefault) : flags_(flags) {}
  ~PinnedBuffer() {
    if (ptr_ != nullptr) cudaFreeHost(ptr_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  absl::Status Reserve(size_t bytes) {
    if (bytes <= bytes_) return absl::OkStatus();
    if (ptr_ != nullptr) cudaFreeHost(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
    CUDA_RETURN_IF_ERROR(cudaHostAlloc(&ptr_, bytes, flags_));
    bytes_ = bytes;
    if ((flags_ & cudaHostAllocMapped) != 0) {
      std::memset(ptr_, 0, bytes);
      CUDA_RETURN_IF_ERROR(cudaHostGetDevicePointer(&device_, ptr_, 0));
    }
    return absl::OkStatus();
  }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  // The same memory as kernels address it (mapped allocations only).
  template <typename T>
  T* device_as() const { return static_cast<T*>(device_); }

 private:
  unsigned flags_;
  void* ptr_ = nullptr;
  void* device_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace flotilla::inference::cuda
