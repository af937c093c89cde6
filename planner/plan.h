// SPDX-License-Identifier: Apache-2.0
// The planner behind `fsdpsim plan` and the Python package's `plan`: given a model, a cluster
// (GPUs of one hardware kind), a sequence length and a global batch in tokens, it searches the
// space a practitioner would (sharding strategy with HSDP/HFSDP inner sizes, tp with and without
// sequence parallelism, ep for MoE models, micro-batch size x microbatch count giving exactly the
// global batch, checkpointing, reshard after forward, prefetch depth), ranks the configurations
// that fit by tokens/s/GPU and explains the winner against the runner-up.
//
// It is a branch and bound (docs/design/planner.md): every configuration gets a memory lower bound
// (its resident buffers, the runtime, and one microbatch's kept activations, all live at the end
// of a forward pass) and a step-time lower bound (its compute stream's kernel time); those that
// cannot fit are dropped unsimulated, the rest are simulated in decreasing order of their
// throughput bound until no configuration left can enter the top `top`. The bounds are computed
// once per group of configurations that share them (resident buffers depend on the sharding,
// kernel time on tp, micro-batch size and checkpointing), and models once per split.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/base/expected.h"
#include "planner/run_options.h"
#include "planner/sim_args.h"

#include <nlohmann/json.hpp>

namespace fsdp::planner {

struct PlanRequest {
  // Everything fixed for every configuration: the model and its size options, framework,
  // precision, compile, kernels, optimizer, capacity factor, seq-len. Its mesh, strategy,
  // microbatches, micro-batch size, recompute, reshard-after-forward, prefetch and
  // sequence-parallel are the planner's to choose and are ignored.
  RunOptions base;
  SimArgs sim;
  std::int64_t gpus = 0;
  std::int64_t global_batch_tokens = 0;  // a multiple of base.seq_len
  // The space; empty lists take the defaults (PlanRequest::defaults below).
  std::vector<std::string> strategies;    // default: zero3, hsdp, hfsdp, zero2, zero1, noshard
  std::vector<std::int64_t> tp_sizes;     // default: 1, 2, 4, 8 up to the node size
  std::vector<std::int64_t> ep_sizes;     // default: 1 (dense), powers of two dividing experts
  std::vector<std::string> recompute;     // default: none, selective-op, full
  std::vector<std::string> reshard;       // default: all, none
  std::vector<std::int64_t> prefetch;     // default: 1, 2 (next(K))
  std::int64_t max_micro_batch_size = 16;
  std::int64_t top = 5;
  int jobs = 1;
  bool dry_run = false;  // bounds only: count what would be simulated, simulate nothing
};

enum class CandidateStatus {
  kSimulated,   // figures below are the simulator's
  kDoesNotFit,  // simulated until its reservation passed the device memory, then stopped
  kCannotFit,   // memory lower bound above the device: not simulated
  kCannotWin,   // throughput upper bound below the top's last: not simulated
  kInvalid,     // the model or mesh refuses it (note says why)
  kFailed,      // building or simulating failed (note says why)
  kPending,     // --dry-run: would be simulated in bound order
};
std::string_view to_string(CandidateStatus status);

struct PlanCandidate {
  std::int64_t index = 0;
  RunOptions options;  // complete: `fsdpsim simulate` with these options reproduces the row
  std::int64_t tp = 1;
  std::int64_t ep = 1;
  std::int64_t data_ranks = 0;
  CandidateStatus status = CandidateStatus::kPending;
  std::string note;
  std::int64_t memory_lower_bound_bytes = 0;
  double step_time_lower_bound_s = 0;
  // Simulated figures (status kSimulated).
  double step_time_s = 0;
  double tokens_per_second_per_gpu = 0;
  double tflops_per_gpu = 0;
  double mfu = 0;
  bool fits = false;
  std::int64_t headroom_bytes = 0;
  std::int64_t peak_reserved_bytes = 0;
  double compute_s = 0;               // the slowest class's compute-stream busy time
  double exposed_communication_s = 0;  // the largest over classes
  double recompute_flops_per_step = 0;  // per rank
  // A fitting simulated configuration with the same step time and peak reservation as a ranked
  // one of lower index (prefetch or reshard that change nothing here): that one's index; -1
  // otherwise. The ranking lists each set of equal figures once.
  std::int64_t same_as = -1;
};

struct PlanResult {
  std::int64_t gpus = 0;
  std::int64_t global_batch_tokens = 0;
  std::int64_t sequences_per_step = 0;
  std::vector<PlanCandidate> candidates;  // every configuration of the space, in index order
  // Indices of fitting simulated configurations, best first (most tokens/s/GPU; ties: lower
  // index), one per set of equal figures (PlanCandidate::same_as); at least the top `top`.
  std::vector<std::int64_t> ranking;
  std::int64_t simulated = 0;    // incl. those that stopped at their memory overflow
  std::int64_t does_not_fit = 0;  // simulated until the reservation passed the device
  std::int64_t cannot_fit = 0;
  std::int64_t cannot_win = 0;
  std::int64_t invalid = 0;
  std::int64_t failed = 0;
  std::vector<std::string> explanation;  // why the winner beats the runner-up, a few lines
};

// The space's size and the number of configurations left after the memory bound, before any
// simulation: `announce(total, to_simulate_at_most)`; `progress(done, at_most)` after each
// simulated batch. Either may be empty. Errors (one line, naming the option): gpus < 1; a global
// batch that is not a positive multiple of seq-len; a space with no configuration whose data
// ranks divide the global batch; those of the base options, the hardware and the simulator
// options.
Expected<PlanResult> run_plan(const PlanRequest& request,
                              const std::function<void(std::int64_t, std::int64_t)>& announce,
                              const std::function<void(std::int64_t, std::int64_t)>& progress);

// Text and JSON renderings (`fsdpsim plan`, the Python package).
std::string plan_report_text(const PlanRequest& request, const PlanResult& result);
nlohmann::json plan_report_json(const PlanRequest& request, const PlanResult& result);

}  // namespace fsdp::planner
