// SPDX-License-Identifier: Apache-2.0
// Error conversion for CUDA and NCCL; the file name is shortened to its path below the
// repository root so messages stay one readable line.
#include "backends/cuda/cuda_error.h"

#include <cstring>
#include <string>
#include <utility>

#include "core/base/strings.h"

namespace fsdp::cuda {
namespace {

const char* short_file(const char* file) {
  const char* p = std::strstr(file, "backends/cuda/");
  return p != nullptr ? p : file;
}

}  // namespace

Error cuda_error(cudaError_t code, const char* call, const char* file, int line) {
  (void)cudaGetLastError();  // reset a non-sticky error; sticky ones stay on the context anyway
  return Error(ErrorCode::kUnavailable,
               str_cat(call, " failed at ", short_file(file), ":", line, ": ",
                       cudaGetErrorName(code), " (", static_cast<int>(code),
                       "): ", cudaGetErrorString(code)));
}

Error nccl_error(ncclResult_t code, ncclComm_t comm, const char* call, const char* file,
                 int line) {
  std::string msg = str_cat(call, " failed at ", short_file(file), ":", line, ": ",
                            ncclGetErrorString(code), " (", static_cast<int>(code), ")");
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') {
    std::string detail(last);
    for (char& c : detail) {
      if (c == '\n') {
        c = ' ';
      }
    }
    msg += str_cat(": ", detail);
  }
  return Error(ErrorCode::kUnavailable, std::move(msg));
}

}  // namespace fsdp::cuda
