// SPDX-License-Identifier: Apache-2.0
// FrameworkProfile: which training framework runs the step, and so which buffers it holds and
// for how long (docs/design/simulator.md, "Framework profiles"): Megatron-FSDP's DBuffer (the
// default; the builder's behaviour before profiles existed), PyTorch FSDP2 (fully_shard: a flat
// all-gather output copied out to per-parameter tensors) or PyTorch FSDP1 (FlatParameter views
// into the gathered flat buffer), plus reshard_after_forward. Every property below is a fact of
// the framework's source, cited in the docs; none is a tuning knob. Immutable; built by make or
// parse.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "core/base/expected.h"

namespace fsdp {

enum class Framework : std::uint8_t { kMegatronFsdp, kFsdp2, kFsdp1 };

// Which units free their unsharded weights after their forward: all (the default), all but the
// last transformer block in forward order (torchtitan), or none (weights stay gathered from
// forward until their backward).
enum class ReshardAfterForward : std::uint8_t { kAll, kAllButLast, kNone };

// "megatron-fsdp", "fsdp2", "fsdp1"; "all", "all-but-last", "none".
std::string_view to_string(Framework framework);
std::string_view to_string(ReshardAfterForward policy);
// The names above. Errors (kInvalidArgument, one line): "--framework is 'x'; expected
// megatron-fsdp, fsdp2 or fsdp1", "--reshard-after-forward is 'x'; expected all, all-but-last or
// none".
Expected<Framework> parse_framework(std::string_view text);
Expected<ReshardAfterForward> parse_reshard_after_forward(std::string_view text);

// Device memory a framework's process holds besides the IR's buffers.
struct RuntimeMemory {
  // Allocated through the caching allocator once, before the step (cuBLAS/cuBLASLt workspaces
  // of the compute stream): counted in reserved and allocated bytes.
  std::int64_t allocator_bytes = 0;
  // Held outside the allocator (CUDA context, NCCL communicator buffers): not in PyTorch's
  // reserved figure, but the allocator can use only the device memory left beside it.
  std::int64_t outside_allocator_bytes = 0;
  friend bool operator==(const RuntimeMemory&, const RuntimeMemory&) = default;
};

class FrameworkProfile {
 public:
  FrameworkProfile() = default;  // megatron-fsdp, reshard after forward: all

  static FrameworkProfile make(Framework framework,
                               ReshardAfterForward reshard = ReshardAfterForward::kAll);

  Framework framework() const { return framework_; }
  ReshardAfterForward reshard_after_forward() const { return reshard_; }
  bool is_default() const { return *this == FrameworkProfile(); }

  // FSDP2: each unshard all-gathers into one flat output buffer (on the all-gather stream) and
  // copies it out to per-parameter unsharded tensors on the compute stream
  // (foreach_all_gather_copy_out), freeing the flat buffer after the copy.
  bool copies_out() const { return framework_ == Framework::kFsdp2; }
  // FSDP2 allocates the reduce-scatter input on the compute stream (foreach_reduce), so its
  // block returns to the compute stream's pool; Megatron-FSDP and FSDP1 on the reduction stream.
  bool partial_grads_on_compute_stream() const { return framework_ == Framework::kFsdp2; }
  // PyTorch FSDP1/FSDP2 never reshard the root module after forward (its backward follows at
  // once): the units outside the transformer blocks (embedding, head) keep their weights
  // gathered from forward to backward. Megatron-FSDP reshards them like every unit.
  bool root_reshards_after_forward() const { return framework_ == Framework::kMegatronFsdp; }
  // PyTorch keeps sharded gradients in the sharded parameter's dtype (fp32 main weights: fp32
  // grads) and frees them every step (optimizer.zero_grad(set_to_none=True)): allocated at the
  // step's first reduction, freed after the optimizer step. Megatron-FSDP keeps a resident
  // main-grad buffer in the gradient dtype.
  // Megatron-FSDP keeps a resident model-weight shard in the compute dtype beside the fp32 main
  // weight (cast after each step); PyTorch FSDP2 casts the fp32 shard into the all-gather input
  // (foreach_all_gather_copy_in) and FSDP1 into a transient _mp_shard, so neither keeps one.
  bool keeps_model_weight_shard() const { return framework_ == Framework::kMegatronFsdp; }
  bool transient_main_grads() const { return framework_ != Framework::kMegatronFsdp; }
  bool main_grads_in_main_dtype() const { return framework_ != Framework::kMegatronFsdp; }
  // The loss: PyTorch eager cross_entropy(logits.float()) materialises the fp32 upcast beside
  // the bf16 logits in forward and two fp32 logit gradients in backward; Megatron's
  // vocab-parallel cross entropy works in place in its saved fp32 softmax.
  bool eager_torch_loss() const { return framework_ != Framework::kMegatronFsdp; }
  // torch.optim.AdamW(foreach=True) allocates sqrt(exp_avg_sq) for every parameter of the
  // step at once (one fp32 copy of the optimizer shard); Megatron's fused Adam (TE/Apex
  // multi_tensor_apply) none.
  bool foreach_optimizer_scratch() const { return framework_ != Framework::kMegatronFsdp; }
  // What the process holds beside the IR's buffers (docs/design/simulator.md, "Runtime memory").
  RuntimeMemory runtime_memory() const;

  friend bool operator==(const FrameworkProfile&, const FrameworkProfile&) = default;

 private:
  Framework framework_ = Framework::kMegatronFsdp;
  ReshardAfterForward reshard_ = ReshardAfterForward::kAll;
};

// "megatron-fsdp raf=all".
std::string to_string(const FrameworkProfile& profile);
std::ostream& operator<<(std::ostream& os, const FrameworkProfile& profile);

}  // namespace fsdp
