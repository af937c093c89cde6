// SPDX-License-Identifier: Apache-2.0
// Vendor failures at the CUDA/NCCL boundary turned into fsdp::Error (house style, error tier 3):
// the failing call's text, its file:line, the vendor's code and message (cudaGetErrorString;
// ncclGetErrorString plus ncclGetLastError), always on one line. No goto, no abort.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include "core/base/error.h"

namespace fsdp::cuda {

// "<call> failed at <file>:<line>: <cudaGetErrorName> (<code>): <cudaGetErrorString>".
// Clears the thread's last non-sticky CUDA error so it does not resurface in a later call.
Error cuda_error(cudaError_t code, const char* call, const char* file, int line);
// "<call> failed at <file>:<line>: <ncclGetErrorString> (<code>)[: <ncclGetLastError(comm)>]";
// comm may be null.
Error nccl_error(ncclResult_t code, ncclComm_t comm, const char* call, const char* file,
                 int line);

}  // namespace fsdp::cuda

// Returns an fsdp::Error (kUnavailable) from the enclosing function when `call` fails.
#define FSDP_CUDA_TRY(call)                                                          \
  do {                                                                               \
    if (const cudaError_t fsdp_cuda_err_ = (call); fsdp_cuda_err_ != cudaSuccess) {  \
      return ::fsdp::cuda::cuda_error(fsdp_cuda_err_, #call, __FILE__, __LINE__);    \
    }                                                                                \
  } while (false)

// Same for NCCL; `comm` (or nullptr) supplies ncclGetLastError's detail.
#define FSDP_NCCL_TRY(comm, call)                                                     \
  do {                                                                                \
    if (const ncclResult_t fsdp_nccl_err_ = (call); fsdp_nccl_err_ != ncclSuccess) {  \
      return ::fsdp::cuda::nccl_error(fsdp_nccl_err_, (comm), #call, __FILE__, __LINE__); \
    }                                                                                 \
  } while (false)
