// SPDX-License-Identifier: Apache-2.0
// Workload: what one microbatch carries on one rank, and how its kernels run: the tokens
// (sequences x sequence length), whether the model is compiled (torch.compile: elementwise chains
// fused) and the dtype of the weight matmuls' math (bf16, or fp8 with dynamic tensorwise scaling).
// The schedule carries it so the simulator's per-op compute model prices each unit's kernels
// (docs/design/simulator.md, "Per-op compute") without the config.
#pragma once

#include <cstdint>

#include "core/model/dtype.h"

namespace fsdp {

// The kernels a framework runs: PyTorch's (eager or compiled; attention by SDPA's flash
// backend, FlashAttention-2) or NVIDIA Transformer Engine's (Megatron: fused norm, activation
// and cast kernels, cuDNN fused attention).
enum class KernelLibrary : std::uint8_t { kTorch, kTransformerEngine };

// Which of a unit's forward kernels its recompute op runs again (set by the schedule builder from
// the checkpointing mode; docs/design/simulator.md, "Recompute"):
// kForwardShare: every kernel class, scaled by the op's share of the forward's FLOPs (the whole
//   forward for full and selective-layer checkpointing);
// kUnsavedOps: torchtitan's op policy (selective-op): the matmuls it does not save, in proportion
//   to their FLOPs, and every non-matmul op but attention (norms, rotary, activations, casts);
// kAttentionCore: Megatron's selective recompute: the attention core alone.
enum class RecomputeKernels : std::uint8_t { kForwardShare, kUnsavedOps, kAttentionCore };

struct Workload {
  std::int64_t seq_len = 4096;        // tokens per sequence
  std::int64_t micro_batch_size = 1;  // sequences per microbatch per rank
  bool compile = false;               // elementwise kernels fused (torch.compile)
  // The math of the weight GEMMs: kBf16 (the compute dtype's tensor rate) or kFp8 (the GPU's fp8
  // rate, plus the casts and scales of dynamic tensorwise float8). Attention stays in bf16.
  DType matmul_dtype = DType::kBf16;
  KernelLibrary kernels = KernelLibrary::kTorch;
  RecomputeKernels recompute = RecomputeKernels::kForwardShare;
  friend bool operator==(const Workload&, const Workload&) = default;
};

}  // namespace fsdp
