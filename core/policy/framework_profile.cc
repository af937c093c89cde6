// SPDX-License-Identifier: Apache-2.0
#include "core/policy/framework_profile.h"

#include "core/base/strings.h"

namespace fsdp {

namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;
// cuBLAS workspace of the compute stream, allocated through PyTorch's caching allocator
// (aten/src/ATen/cuda/CublasHandlePool.cpp): 32 MiB, NVIDIA's recommendation for Hopper
// (cuBLAS docs, cublasSetWorkspace; PyTorch's default CUBLAS_WORKSPACE_CONFIG :4096:8).
constexpr std::int64_t kCublasWorkspace = 32 * kMiB;
// The CUDA context of a PyTorch process (measured 723 MiB, discuss.pytorch.org "What is the
// reason for pytorch's GPU memory floor") plus NCCL's buffers: NCCL_BUFFSIZE (4 MiB) per
// channel and direction, 16 channels, for the two communicators of the all-gather and
// reduce-scatter streams (2 x 16 x 2 x 4 MiB = 256 MiB). docs/design/simulator.md,
// "Runtime memory".
constexpr std::int64_t kCudaContext = 723 * kMiB;
constexpr std::int64_t kNcclBuffers = 2 * 16 * 2 * 4 * kMiB;

}  // namespace

std::string_view to_string(Framework framework) {
  switch (framework) {
    case Framework::kMegatronFsdp:
      return "megatron-fsdp";
    case Framework::kFsdp2:
      return "fsdp2";
    case Framework::kFsdp1:
      return "fsdp1";
  }
  return "?";
}

std::string_view to_string(ReshardAfterForward policy) {
  switch (policy) {
    case ReshardAfterForward::kAll:
      return "all";
    case ReshardAfterForward::kAllButLast:
      return "all-but-last";
    case ReshardAfterForward::kNone:
      return "none";
  }
  return "?";
}

Expected<Framework> parse_framework(std::string_view text) {
  for (Framework f : {Framework::kMegatronFsdp, Framework::kFsdp2, Framework::kFsdp1}) {
    if (text == to_string(f)) {
      return f;
    }
  }
  return Error(ErrorCode::kInvalidArgument,
               str_cat("--framework is '", text, "'; expected megatron-fsdp, fsdp2 or fsdp1"));
}

Expected<ReshardAfterForward> parse_reshard_after_forward(std::string_view text) {
  for (ReshardAfterForward r :
       {ReshardAfterForward::kAll, ReshardAfterForward::kAllButLast, ReshardAfterForward::kNone}) {
    if (text == to_string(r)) {
      return r;
    }
  }
  return Error(ErrorCode::kInvalidArgument, str_cat("--reshard-after-forward is '", text,
                                                    "'; expected all, all-but-last or none"));
}

FrameworkProfile FrameworkProfile::make(Framework framework, ReshardAfterForward reshard) {
  FrameworkProfile out;
  out.framework_ = framework;
  out.reshard_ = reshard;
  return out;
}

RuntimeMemory FrameworkProfile::runtime_memory() const {
  // The three run on PyTorch's CUDA runtime and NCCL alike (Megatron-FSDP's Transformer Engine
  // allocates its cuBLAS workspace through the same allocator).
  return RuntimeMemory{.allocator_bytes = kCublasWorkspace,
                       .outside_allocator_bytes = kCudaContext + kNcclBuffers};
}

std::string to_string(const FrameworkProfile& profile) {
  return str_cat(to_string(profile.framework()),
                 " raf=", to_string(profile.reshard_after_forward()));
}

std::ostream& operator<<(std::ostream& os, const FrameworkProfile& profile) {
  return os << to_string(profile);
}

}  // namespace fsdp
