// SPDX-License-Identifier: Apache-2.0
#include "planner/run_profile.h"

#include <array>
#include <string>

#include "core/base/strings.h"

namespace fsdp::planner {
namespace {

constexpr std::array<std::string_view, 2> kProfiles = {"torchtitan", "megatron-fsdp"};

// torchtitan (docs/cli.md, "Config files and profiles"): FSDP2 (fully_shard); reshard after
// forward "default", which for a run without pipeline parallelism keeps the last block gathered
// (docs/design/simulator.md, "Framework profiles"); MixedPrecisionPolicy(param_dtype=bfloat16,
// reduce_dtype=float32), torchtitan's training.mixed_precision_param / _reduce defaults; PyTorch
// kernels.
RunOptionsPatch torchtitan_profile() {
  RunOptionsPatch p;
  p.framework = "fsdp2";
  p.reshard_after_forward = "all-but-last";
  p.param_dtype = "bf16";
  p.reduce_dtype = "fp32";
  p.kernels = "torch";
  return p;
}

// Megatron-FSDP under Megatron-LM (docs/cli.md, "Config files and profiles"): every unit
// resharded after its forward (docs/design/fsdp-behaviour.md, post_forward); Transformer Engine
// kernels; gradients reduced in fp32 (Megatron-LM's bf16 runs accumulate and reduce in fp32
// unless --grad-reduce-in-bf16).
RunOptionsPatch megatron_fsdp_profile() {
  RunOptionsPatch p;
  p.framework = "megatron-fsdp";
  p.reshard_after_forward = "all";
  p.kernels = "te";
  p.reduce_dtype = "fp32";
  return p;
}

}  // namespace

std::span<const std::string_view> profile_names() {
  return kProfiles;
}

Expected<RunOptionsPatch> profile_defaults(std::string_view name) {
  if (name == "torchtitan") {
    return torchtitan_profile();
  }
  if (name == "megatron-fsdp") {
    return megatron_fsdp_profile();
  }
  return Error(ErrorCode::kInvalidArgument,
               str_cat("--profile is '", name, "'; expected torchtitan or megatron-fsdp"));
}

}  // namespace fsdp::planner
