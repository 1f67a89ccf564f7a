// Checked CUDA and cuBLAS calls: a failure becomes an absl::Status naming the call, file and
// line, returned from the enclosing function.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#define CUDA_RETURN_IF_ERROR(expr)                                                          \
  do {                                                                                      \
    cudaError_t flotilla_cuda_err_ = (expr);                                                \
    if (flotilla_cuda_err_ != cudaSuccess) {                                                \
      return absl::InternalError(absl::StrCat(#expr, " failed at ", __FILE__, ":", __LINE__, \
                                              ": ", cudaGetErrorString(flotilla_cuda_err_))); \
    }                                                                                       \
  } while (0)

#define CUBLAS_RETURN_IF_ERROR(expr)                                                        \
  do {                                                                                      \
    cublasStatus_t flotilla_cublas_err_ = (expr);                                           \
    if (flotilla_cublas_err_ != CUBLAS_STATUS_SUCCESS) {                                    \
      return absl::InternalError(absl::StrCat(#expr, " failed at ", __FILE__, ":", __LINE__, \
                                              ": cublas status ",                           \
                                              static_cast<int>(flotilla_cublas_err_)));     \
    }                                                                                       \
  } while (0)
