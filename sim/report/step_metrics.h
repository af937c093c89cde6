// SPDX-License-Identifier: Apache-2.0
// The figures practitioners compare one simulated step by (docs/metrics.md): model FLOPs per token
// by torchtitan's count, tokens/s/GPU, model TFLOP/s/GPU and MFU, and the one fit verdict with
// its headroom. `simulate`, `sweep` and `plan` report them alike.
#pragma once

#include <cstdint>
#include <string>

#include "core/hardware/hardware.h"
#include "core/model/hub_arch.h"
#include "core/model/model.h"
#include "core/schedule/schedule.h"
#include "sim/engine/sim_result.h"

namespace fsdp::sim {

// a * b + c, saturated at the int64 maximum: report figures of schedules whose buffers already
// passed the builder's checked arithmetic, kept defined rather than wrapped.
std::int64_t saturating_mul_add(std::int64_t a, std::int64_t b, std::int64_t c);

// A routed expert's tensor by the importer's naming ("...experts.3.w1.weight"); shared experts
// ("shared_experts.") are dense.
bool routed_expert(const std::string& name);

// Model FLOPs per token of one training step (forward and backward, no recomputation), by
// torchtitan's convention (docs/metrics.md): 6 x the active non-embedding parameters (routed
// experts weighted by top_k / experts; an embedding tied to the output head counts) plus, per
// attention layer, 6 x heads x (qk head dim + v head dim) x the attended tokens (the sequence, or
// the sliding window), causal sparsity not discounted.
struct ModelFlops {
  double per_token = 0;
  std::int64_t active_parameters = 0;  // the 6 N term's N
  double attention_per_token = 0;      // the attention term
  // "torchtitan" with the architecture known; "model file" when only an fsdpsim model file is
  // given (3 x its matmul FLOPs stand in for 6 N: routed experts cannot be told apart there).
  std::string convention;
};
// Of a whole model and, when known, its architecture (nullptr: a model file).
ModelFlops model_flops(const Model& whole, const HubArch* arch, std::int64_t seq_len);

// Throughput of one step: the global batch's tokens over the step time, per GPU of the mesh.
struct Throughput {
  std::int64_t data_ranks = 0;        // ranks with their own samples (the mesh over tp)
  std::int64_t tokens_per_step = 0;   // data ranks x microbatches x micro-batch size x seq-len
  double step_time_s = 0;
  double tokens_per_second_per_gpu = 0;
  double tflops_per_gpu = 0;          // model FLOPs (ModelFlops) per second per GPU, / 1e12
  double mfu = 0;                     // of the device's dense bf16 peak (as torchtitan, fp8 too)
};
Throughput throughput_of(const Schedule& schedule, double step_time_s, const ModelFlops& flops,
                         const Hardware& hardware);

// The one fit verdict (docs/cli.md, "Fit"): a rank class fits when the caching allocator's peak
// reservation plus what the runtime holds outside it (CUDA context, NCCL) stays within the
// device's memory. The headroom is what the worst class leaves (negative: the overflow).
struct MemoryVerdict {
  bool fits = true;
  std::int64_t device_bytes = 0;
  std::int64_t peak_reserved_bytes = 0;   // the largest over classes
  std::int64_t peak_allocated_bytes = 0;  // the largest over classes
  std::int64_t outside_allocator_bytes = 0;
  std::int64_t headroom_bytes = 0;
};
MemoryVerdict memory_verdict(const sim::SimResult& result, const Hardware& hardware);

}  // namespace fsdp::sim
