// SPDX-License-Identifier: Apache-2.0
#include "planner/plan.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>

#include "core/base/checked_math.h"
#include "core/base/number_text.h"
#include "core/base/strings.h"
#include "core/mesh/strategy.h"
#include "core/model/model_split.h"
#include "core/policy/recompute_policy.h"
#include "planner/model_argument.h"
#include "planner/step_report.h"
#include "sim/engine/simulator.h"
#include "sim/model/kernel_cost.h"
#include "sim/report/step_metrics.h"

namespace fsdp::planner {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

Error invalid(std::string message) { return Error(ErrorCode::kInvalidArgument, std::move(message)); }

// The error of `e`, if any, with `context` in front when given.
template <class T>
Status status_of(const Expected<T>& e, std::string_view context = "") {
  if (e) {
    return ok_status();
  }
  return context.empty() ? e.error() : e.error().with_context(context);
}

// Runs fn(i) for i in [0, n) on up to `jobs` threads; fn must not throw.
void parallel_for(std::int64_t n, int jobs, const std::function<void(std::int64_t)>& fn) {
  std::atomic<std::int64_t> next{0};
  auto worker = [&] {
    for (std::int64_t i = next++; i < n; i = next++) {
      fn(i);
    }
  };
  const int threads = static_cast<int>(std::clamp<std::int64_t>(jobs, 1, std::max<std::int64_t>(n, 1)));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error&) {
      break;  // fewer threads: this one and those started share the work
    }
  }
  worker();
  for (std::thread& t : pool) {
    t.join();
  }
}

std::vector<std::int64_t> divisors_up_to(std::int64_t n, std::int64_t most) {
  std::vector<std::int64_t> out;
  for (std::int64_t d = 1; d <= std::min(n, most); ++d) {
    if (n % d == 0) {
      out.push_back(d);
    }
  }
  return out;
}

struct SplitKey {
  std::int64_t tp = 1;
  std::int64_t ep = 1;
  bool sp = false;
  auto operator<=>(const SplitKey&) const = default;
};

// What every configuration of one split, sharding and micro-batch choice shares.
struct ResidentBound {
  std::int64_t bytes = 0;  // the largest class's resident buffers + the runtime's memory
  std::string error;
};
struct ComputeBound {
  double seconds = 0;              // the largest class's kernel time on the compute stream
  std::int64_t kept_bytes = 0;     // one microbatch's kept activations
  std::string error;
};

// A candidate's assembled run on a cached model.
Expected<PlannedRun> planned_run(const RunOptions& options, const Model& model) {
  FSDP_TRY(const ConfigOptions config_options, parse_config_options(options));
  FSDP_TRY(FsdpConfig config, assemble_config(config_options));
  FSDP_TRY(Workload workload, make_workload(options));
  return PlannedRun{model, std::move(config), workload};
}

// The largest class's bytes live at the end of the first microbatch's forward pass whatever the
// timing: its resident buffers, and the gathered weights its forward allocates and does not free
// before backward (reshard after forward none or all-but-last keeps them). Plus the runtime.
std::int64_t resident_bytes(const Schedule& schedule) {
  std::int64_t most = 0;
  for (const RankProgram& p : schedule.programs()) {
    std::int64_t sum = 0;
    for (const ResidentBuffer& b : p.resident) {
      sum += b.bytes;
    }
    std::map<std::int32_t, std::int64_t> gathered;  // buffer -> bytes, allocated and not freed
    for (const Op& op : p.ops) {
      if (op.microbatch != 0 || op.phase != Phase::kForward ||
          op.buffer_class != BufferClass::kUnshardedWeights) {
        continue;
      }
      if (op.kind == OpKind::kAlloc) {
        gathered[op.buffer] = op.bytes;
      } else if (op.kind == OpKind::kFree) {
        gathered.erase(op.buffer);
      }
    }
    for (const auto& [buffer, bytes] : gathered) {
      sum += bytes;
    }
    most = std::max(most, sum);
  }
  const RuntimeMemory& runtime = schedule.runtime_memory();
  return most + runtime.outside_allocator_bytes + runtime.allocator_bytes;
}

std::string describe(const PlanCandidate& c) {
  const RunOptions& o = c.options;
  return str_cat(o.strategy, " ", o.mesh, o.sequence_parallel ? " +sp" : "", ", micro-batch ",
                 o.micro_batch_size, " x ", o.microbatches, " microbatches, recompute ",
                 o.recompute, ", reshard ", o.reshard_after_forward, ", prefetch ",
                 o.forward_prefetch);
}

// A duration for people: "38.2 ms", "1.89 s", "113 s".
std::string ms(double seconds) {
  return std::fabs(seconds) < 1.0 ? significant_text(seconds * 1e3, 3) + " ms"
                                  : significant_text(seconds, 3) + " s";
}

// Below this relative gap two configurations are the same within what the model can promise
// (docs/validation.md: a few percent); the explanation says so rather than name a winner.
constexpr double kIndistinguishable = 0.005;

std::vector<std::string> explain(const PlanResult& r) {
  std::vector<std::string> lines;
  if (r.ranking.empty()) {
    lines.push_back("no configuration fits: every one needs more memory than the device has");
    return lines;
  }
  const PlanCandidate& w = r.candidates[static_cast<std::size_t>(r.ranking[0])];
  lines.push_back(str_cat("best: #", w.index, " ", describe(w), ": ",
                          significant_text(w.tokens_per_second_per_gpu, 3), " tokens/s/GPU, MFU ",
                          fixed_text(100.0 * w.mfu, 1), "%, headroom ",
                          fixed_text(static_cast<double>(w.headroom_bytes) / kGiB, 1), " GiB"));
  if (r.ranking.size() < 2) {
    lines.push_back("it is the only configuration that fits");
    return lines;
  }
  const PlanCandidate& u = r.candidates[static_cast<std::size_t>(r.ranking[1])];
  const double gain = u.tokens_per_second_per_gpu > 0
                          ? w.tokens_per_second_per_gpu / u.tokens_per_second_per_gpu - 1.0
                          : 0.0;
  lines.push_back(str_cat("runner-up: #", u.index, " ", describe(u), ", ",
                          fixed_text(100.0 * gain, gain < 0.001 ? 3 : 1), "% fewer tokens/s/GPU"));
  if (gain < kIndistinguishable) {
    std::int64_t close = 1;
    while (close < static_cast<std::int64_t>(r.ranking.size())) {
      const PlanCandidate& c = r.candidates[static_cast<std::size_t>(r.ranking[static_cast<std::size_t>(close)])];
      if (w.tokens_per_second_per_gpu > (1.0 + kIndistinguishable) * c.tokens_per_second_per_gpu) {
        break;
      }
      ++close;
    }
    lines.push_back(str_cat(
        "the top ", close, " are within ", fixed_text(100.0 * kIndistinguishable, 1),
        "% of each other, the same within the model's accuracy (docs/validation.md): choose "
        "among them by headroom or simplicity"));
  }
  // The step's two parts: the compute stream's busy time (with recomputation) and the
  // communication it does not hide (both steps train the same global batch).
  const double dc = u.compute_s - w.compute_s;
  const double dx = u.exposed_communication_s - w.exposed_communication_s;
  const double drf = u.recompute_flops_per_step - w.recompute_flops_per_step;
  lines.push_back(str_cat("step ", ms(w.step_time_s), " vs ", ms(u.step_time_s), ": compute busy ",
                          ms(w.compute_s), " vs ", ms(u.compute_s), " (recomputed ",
                          significant_text(w.recompute_flops_per_step * 1e-12, 3), " vs ",
                          significant_text(u.recompute_flops_per_step * 1e-12, 3),
                          " TFLOP per GPU), exposed communication ",
                          ms(w.exposed_communication_s), " vs ", ms(u.exposed_communication_s),
                          "; headroom ", fixed_text(static_cast<double>(w.headroom_bytes) / kGiB, 1),
                          " vs ", fixed_text(static_cast<double>(u.headroom_bytes) / kGiB, 1),
                          " GiB"));
  std::vector<std::string> parts;
  if (dc != 0) {
    parts.push_back(str_cat(dc > 0 ? "computes " : "computes ", ms(std::fabs(dc)),
                            dc > 0 ? " less" : " more",
                            dc > 0 && drf > 0 ? " (it recomputes less)" : ""));
  }
  if (dx != 0) {
    parts.push_back(str_cat("exposes ", ms(std::fabs(dx)), dx > 0 ? " less" : " more",
                            " communication"));
  }
  std::string why =
      parts.empty() || std::fabs(dc) + std::fabs(dx) < 1e-3 * w.step_time_s
          ? std::string("compute and exposed communication are the same to within 0.1% of the "
                        "step; the steps differ only by how they interleave")
          : str_cat("the winner ", join(parts, " and "), "; the larger term is ",
                    std::fabs(dc) >= std::fabs(dx) ? "compute" : "exposed communication");
  lines.push_back(str_cat("why: ", why));
  if (u.headroom_bytes > w.headroom_bytes) {
    lines.push_back(str_cat("the runner-up leaves ",
                            fixed_text(static_cast<double>(u.headroom_bytes - w.headroom_bytes) / kGiB, 1),
                            " GiB more headroom: prefer it if memory is tight (fragmentation, "
                            "longer sequences)"));
  }
  return lines;
}

}  // namespace

std::string_view to_string(CandidateStatus status) {
  switch (status) {
    case CandidateStatus::kSimulated:
      return "simulated";
    case CandidateStatus::kDoesNotFit:
      return "does-not-fit";
    case CandidateStatus::kCannotFit:
      return "cannot-fit";
    case CandidateStatus::kCannotWin:
      return "cannot-win";
    case CandidateStatus::kInvalid:
      return "invalid";
    case CandidateStatus::kFailed:
      return "failed";
    case CandidateStatus::kPending:
      return "pending";
  }
  return "?";
}

Expected<PlanResult> run_plan(const PlanRequest& req,
                              const std::function<void(std::int64_t, std::int64_t)>& announce,
                              const std::function<void(std::int64_t, std::int64_t)>& progress) {
  if (req.gpus < 1 || req.gpus > (std::int64_t{1} << 30)) {
    return invalid(str_cat("--gpus is ", req.gpus, "; expected an integer in [1, 2^30]"));
  }
  if (req.base.seq_len < 1) {
    return invalid(str_cat("--seq-len is ", req.base.seq_len, "; expected >= 1"));
  }
  if (req.global_batch_tokens < 1 || req.global_batch_tokens % req.base.seq_len != 0) {
    return invalid(str_cat("--global-batch-tokens is ", req.global_batch_tokens,
                           "; expected a positive multiple of --seq-len ", req.base.seq_len));
  }
  if (req.top < 1 || req.top > 1000) {
    return invalid(str_cat("--top is ", req.top, "; expected an integer in [1, 1000]"));
  }
  if (req.max_micro_batch_size < 1 || req.max_micro_batch_size > 4096) {
    return invalid(str_cat("--max-micro-batch-size is ", req.max_micro_batch_size,
                           "; expected an integer in [1, 4096]"));
  }
  FSDP_TRY(const Hardware hardware, load_hardware_argument(req.sim.hardware));
  FSDP_TRY(sim::SimOptions sim_options, make_sim_options(req.sim, hardware));
  // A configuration that cannot fit needs no more of its step than the instant it overflows.
  sim_options.stop_at_memory_overflow = true;
  // The base's own options are checked once (a bad --framework is one line, not a column of
  // failed rows).
  FSDP_RETURN_IF_ERROR(status_of(make_workload(req.base)));
  {
    RunOptions probe = req.base;
    probe.mesh = "dp=1";
    probe.strategy = "zero3";
    probe.recompute = "none";
    FSDP_RETURN_IF_ERROR(status_of(parse_config_options(probe)));
  }
  FSDP_TRY(const sim::ModelFlops flops, model_flops_of(req.base));
  std::string arch_name;
  Expected<HubArch> arch = load_arch_argument(req.base.model, &arch_name);
  std::int64_t experts = 0;
  if (arch) {
    FSDP_TRY(const HubArch shrunk, apply_hub_overrides(*arch, req.base.sizes));
    experts = shrunk.experts;
  }

  // The space, with defaults.
  const std::int64_t node = std::max<std::int64_t>(1, hardware.devices_per_node());
  std::vector<std::string> strategies = req.strategies;
  if (strategies.empty()) {
    strategies = {"zero3", "hsdp", "hfsdp", "zero2", "zero1", "noshard"};
  }
  for (const std::string& s : strategies) {
    FSDP_RETURN_IF_ERROR(status_of(parse_strategy(s), "--strategies"));
  }
  std::vector<std::int64_t> tps = req.tp_sizes;
  if (tps.empty()) {
    for (std::int64_t t = 1; t <= std::min<std::int64_t>(node, 8); t *= 2) {
      tps.push_back(t);
    }
  }
  std::vector<std::int64_t> eps = req.ep_sizes;
  if (eps.empty()) {
    eps.push_back(1);
    for (std::int64_t e = 2; experts > 0 && e <= experts && e <= 64; e *= 2) {
      if (experts % e == 0) {
        eps.push_back(e);
      }
    }
  }
  std::vector<std::string> recomputes = req.recompute;
  if (recomputes.empty()) {
    recomputes = {"none", "selective-op", "full"};
  }
  for (const std::string& r : recomputes) {
    FSDP_RETURN_IF_ERROR(status_of(RecomputePolicy::parse(r), "--recompute"));
  }
  std::vector<std::string> reshards = req.reshard;
  if (reshards.empty()) {
    reshards = {"all", "none"};
  }
  std::vector<std::int64_t> prefetches = req.prefetch;
  if (prefetches.empty()) {
    prefetches = {1, 2};
  }
  for (const std::int64_t k : prefetches) {
    if (k < 0 || k > 64) {
      return invalid(str_cat("--prefetch item is ", k, "; expected a depth in [0, 64]"));
    }
  }

  PlanResult result;
  result.gpus = req.gpus;
  result.global_batch_tokens = req.global_batch_tokens;
  result.sequences_per_step = req.global_batch_tokens / req.base.seq_len;
  std::vector<std::string> skipped;
  for (const std::int64_t tp : tps) {
    for (const std::int64_t ep : eps) {
      if ((tp > 1 && ep > 1) || tp < 1 || ep < 1 || req.gpus % (tp * ep) != 0) {
        continue;
      }
      const std::int64_t dp = req.gpus / (tp * ep);
      const std::int64_t data_ranks = req.gpus / tp;
      if (result.sequences_per_step % data_ranks != 0) {
        skipped.push_back(str_cat("tp=", tp, ": ", result.sequences_per_step,
                                  " sequences per step do not divide over ", data_ranks,
                                  " data ranks"));
        continue;
      }
      const std::int64_t per_rank = result.sequences_per_step / data_ranks;
      for (const bool sp : tp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
        for (const std::string& strategy : strategies) {
          const Strategy st = parse_strategy(strategy).value();
          std::vector<std::string> meshes;
          const std::string suffix = tp > 1 ? str_cat(",tp=", tp) : ep > 1 ? str_cat(",ep=", ep) : "";
          if (strategy_mesh_ndim(st) == 1) {
            meshes.push_back(str_cat("dp=", dp, suffix));
          } else {
            for (std::int64_t inner = std::max<std::int64_t>(2, node / (tp * ep)); inner < dp;
                 inner *= 2) {
              if (dp % inner == 0) {
                meshes.push_back(str_cat("dp_outer=", dp / inner, ",dp_inner=", inner, suffix));
              }
            }
          }
          for (const std::string& mesh : meshes) {
            for (const std::int64_t mbs : divisors_up_to(per_rank, req.max_micro_batch_size)) {
              for (const std::string& rc : recomputes) {
                for (const std::string& rs : reshards) {
                  for (const std::int64_t pf : prefetches) {
                    PlanCandidate c;
                    c.index = static_cast<std::int64_t>(result.candidates.size());
                    c.tp = tp;
                    c.ep = ep;
                    c.data_ranks = data_ranks;
                    c.options = req.base;
                    c.options.mesh = mesh;
                    c.options.strategy = strategy;
                    c.options.micro_batch_size = mbs;
                    c.options.microbatches = per_rank / mbs;
                    c.options.recompute = rc;
                    c.options.reshard_after_forward = rs;
                    c.options.forward_prefetch = pf == 0 ? "none" : str_cat("next(", pf, ")");
                    c.options.backward_prefetch = c.options.forward_prefetch;
                    c.options.sequence_parallel = sp;
                    result.candidates.push_back(std::move(c));
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  if (result.candidates.empty()) {
    return invalid(str_cat("the space has no configuration: ",
                           skipped.empty() ? std::string("no tp/ep size divides --gpus")
                                           : join(skipped, "; ")));
  }

  // Models, once per split.
  std::map<SplitKey, Expected<Model>> models;
  for (const PlanCandidate& c : result.candidates) {
    const SplitKey key{c.tp, c.ep, c.options.sequence_parallel};
    if (models.count(key) == 0) {
      auto split = ModelSplit::make(c.tp, c.ep, key.sp, req.base.capacity_factor);
      models.emplace(key, split ? load_model_argument(req.base.model, req.base.sizes, *split)
                                : Expected<Model>(split.error()));
    }
  }
  auto model_of = [&](const PlanCandidate& c) -> const Expected<Model>& {
    return models.at(SplitKey{c.tp, c.ep, c.options.sequence_parallel});
  };

  // Bounds, once per group that shares them.
  using ResidentKey = std::tuple<std::int64_t, std::int64_t, std::string, std::string, std::string>;
  using ComputeKey = std::tuple<std::int64_t, std::int64_t, bool, std::int64_t, std::string>;
  std::map<ResidentKey, std::pair<std::int64_t, ResidentBound>> resident;  // first member
  std::map<ComputeKey, std::pair<std::int64_t, ComputeBound>> compute;
  for (const PlanCandidate& c : result.candidates) {
    resident.emplace(ResidentKey{c.tp, c.ep, c.options.strategy, c.options.mesh,
                                 c.options.reshard_after_forward},
                     std::pair{c.index, ResidentBound{}});
    compute.emplace(ComputeKey{c.tp, c.ep, c.options.sequence_parallel, c.options.micro_batch_size,
                               c.options.recompute},
                    std::pair{c.index, ComputeBound{}});
  }
  std::vector<ResidentBound*> resident_jobs;
  std::vector<std::int64_t> resident_members;
  for (auto& [key, v] : resident) {
    resident_members.push_back(v.first);
    resident_jobs.push_back(&v.second);
  }
  parallel_for(static_cast<std::int64_t>(resident_jobs.size()), req.jobs, [&](std::int64_t i) {
    ResidentBound& b = *resident_jobs[static_cast<std::size_t>(i)];
    try {
      RunOptions o = result.candidates[static_cast<std::size_t>(resident_members[static_cast<std::size_t>(i)])].options;
      o.sequence_parallel = false;
      o.microbatches = 1;
      o.micro_batch_size = 1;
      o.recompute = "none";
      PlanCandidate probe;
      probe.tp = result.candidates[static_cast<std::size_t>(resident_members[static_cast<std::size_t>(i)])].tp;
      probe.ep = result.candidates[static_cast<std::size_t>(resident_members[static_cast<std::size_t>(i)])].ep;
      probe.options = o;
      const Expected<Model>& model = model_of(probe);
      if (!model) {
        b.error = model.error().message();
        return;
      }
      auto run = planned_run(o, *model);
      if (!run) {
        b.error = run.error().message();
        return;
      }
      auto schedule = build_run_schedule(*run);
      if (!schedule) {
        b.error = schedule.error().message();
        return;
      }
      b.bytes = resident_bytes(*schedule);
    } catch (const std::exception& e) {
      b.error = str_cat("unexpected failure: ", e.what());
    }
  });
  std::vector<ComputeBound*> compute_jobs;
  std::vector<std::int64_t> compute_members;
  for (auto& [key, v] : compute) {
    compute_members.push_back(v.first);
    compute_jobs.push_back(&v.second);
  }
  parallel_for(static_cast<std::int64_t>(compute_jobs.size()), req.jobs, [&](std::int64_t i) {
    ComputeBound& b = *compute_jobs[static_cast<std::size_t>(i)];
    try {
      const PlanCandidate& member =
          result.candidates[static_cast<std::size_t>(compute_members[static_cast<std::size_t>(i)])];
      const Expected<Model>& model = model_of(member);
      if (!model) {
        b.error = model.error().message();
        return;
      }
      // One microbatch: every microbatch runs the same kernels, so the step's kernel time is the
      // microbatch count times one microbatch's, and the schedule is that much smaller to build.
      RunOptions one = member.options;
      one.microbatches = 1;
      auto run = planned_run(one, *model);
      if (!run) {
        b.error = run.error().message();
        return;
      }
      const double microbatches = static_cast<double>(member.options.microbatches);
      const std::int64_t tokens = member.options.seq_len * member.options.micro_batch_size;
      for (const UnitCheckpoint& u :
           checkpoints_of(run->config.recompute(), *model, run->workload.compile)) {
        b.kept_bytes += u.kept * tokens;
      }
      if (!sim_options.cost.per_op_compute) {
        return;  // the flops model: no kernel bound (0 s)
      }
      auto schedule = build_run_schedule(*run);
      if (!schedule) {
        b.error = schedule.error().message();
        return;
      }
      for (std::size_t p = 0; p < schedule->programs().size(); ++p) {
        auto times = sim::program_kernel_times(*schedule, p, hardware);
        if (!times) {
          b.error = times.error().message();
          return;
        }
        b.seconds = std::max(b.seconds, microbatches * times->total());
      }
    } catch (const std::exception& e) {
      b.error = str_cat("unexpected failure: ", e.what());
    }
  });

  // Classify by the memory bound; order the rest by their throughput bound.
  std::vector<std::int64_t> order;
  for (PlanCandidate& c : result.candidates) {
    const ResidentBound& rb =
        resident.at(ResidentKey{c.tp, c.ep, c.options.strategy, c.options.mesh,
                                c.options.reshard_after_forward})
            .second;
    const ComputeBound& cb = compute.at(ComputeKey{c.tp, c.ep, c.options.sequence_parallel,
                                                   c.options.micro_batch_size, c.options.recompute})
                                 .second;
    if (!rb.error.empty() || !cb.error.empty()) {
      c.status = CandidateStatus::kInvalid;
      c.note = !cb.error.empty() ? cb.error : rb.error;
      ++result.invalid;
      continue;
    }
    c.memory_lower_bound_bytes = rb.bytes + cb.kept_bytes;
    // Kernel time as the simulator prices it; a hair below, so rounding never excludes a
    // configuration it should not.
    c.step_time_lower_bound_s = cb.seconds * (1.0 - 1e-9);
    if (c.memory_lower_bound_bytes > hardware.memory_bytes()) {
      c.status = CandidateStatus::kCannotFit;
      c.note = str_cat("needs at least ",
                       fixed_text(static_cast<double>(c.memory_lower_bound_bytes) / kGiB, 1),
                       " GiB (resident buffers, runtime, one microbatch's activations and the "
                       "gathered weights its forward keeps)");
      ++result.cannot_fit;
      continue;
    }
    order.push_back(c.index);
  }
  const std::int64_t tokens_per_step = req.global_batch_tokens;
  auto bound_of = [&](std::int64_t i) {
    const PlanCandidate& c = result.candidates[static_cast<std::size_t>(i)];
    return c.step_time_lower_bound_s > 0
               ? static_cast<double>(tokens_per_step) / c.step_time_lower_bound_s /
                     static_cast<double>(req.gpus)
               : std::numeric_limits<double>::infinity();
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int64_t a, std::int64_t b) { return bound_of(a) > bound_of(b); });
  if (announce) {
    announce(static_cast<std::int64_t>(result.candidates.size()),
             static_cast<std::int64_t>(order.size()));
  }
  if (req.dry_run) {
    result.explanation.push_back(str_cat(
        "dry run: ", result.candidates.size(), " configurations, ", result.cannot_fit,
        " cannot fit, ", result.invalid, " invalid; up to ", order.size(),
        " would be simulated in order of their throughput bound"));
    for (const std::string& s : skipped) {
      result.explanation.push_back(s);
    }
    return result;
  }

  // Branch and bound: simulate in bound order, a batch of `jobs` at a time, until the next
  // bound is below the top's last.
  auto simulate_one = [&](PlanCandidate& c) {
    try {
      const Expected<Model>& model = model_of(c);
      auto run = planned_run(c.options, *model);
      if (!run) {
        c.status = CandidateStatus::kFailed;
        c.note = run.error().message();
        return;
      }
      auto schedule = build_run_schedule(*run);
      if (!schedule) {
        c.status = CandidateStatus::kFailed;
        c.note = schedule.error().message();
        return;
      }
      auto sim_result = sim::simulate(*schedule, hardware, sim_options);
      if (!sim_result) {
        c.status = CandidateStatus::kFailed;
        c.note = str_cat("while simulating: ", sim_result.error().message());
        return;
      }
      if (sim_result->stopped_at_memory_overflow) {
        c.status = CandidateStatus::kDoesNotFit;
        c.fits = false;
        std::int64_t reserved = 0;
        for (const sim::ClassResult& cr : sim_result->classes) {
          reserved = std::max(reserved, cr.memory.peak_reserved_bytes);
        }
        c.peak_reserved_bytes = reserved;
        c.note = str_cat("reserves more than ",
                         fixed_text(static_cast<double>(hardware.memory_bytes()) / kGiB, 1),
                         " GiB (with the runtime) during its first part; simulation stopped there");
        return;
      }
      const sim::MemoryVerdict memory = sim::memory_verdict(*sim_result, hardware);
      const sim::Throughput t = sim::throughput_of(
          *schedule, static_cast<double>(sim_result->step_time.ps()) * 1e-12, flops, hardware);
      c.status = CandidateStatus::kSimulated;
      c.step_time_s = t.step_time_s;
      c.tokens_per_second_per_gpu = t.tokens_per_second_per_gpu;
      c.tflops_per_gpu = t.tflops_per_gpu;
      c.mfu = t.mfu;
      c.fits = memory.fits;
      c.headroom_bytes = memory.headroom_bytes;
      c.peak_reserved_bytes = memory.peak_reserved_bytes;
      for (const sim::ClassResult& cr : sim_result->classes) {
        c.compute_s = std::max(c.compute_s, static_cast<double>(cr.compute.ps()) * 1e-12);
        c.exposed_communication_s = std::max(
            c.exposed_communication_s, static_cast<double>(cr.exposed_communication.ps()) * 1e-12);
      }
      c.recompute_flops_per_step =
          recompute_effects(*run).recompute_flops * static_cast<double>(c.options.microbatches);
    } catch (const std::bad_alloc&) {
      c.status = CandidateStatus::kFailed;
      c.note = "out of memory while simulating this configuration";
    } catch (const std::exception& e) {
      c.status = CandidateStatus::kFailed;
      c.note = str_cat("unexpected failure: ", e.what());
    }
  };
  // Fitting simulated configurations; ranked after every batch: best first (ties: lower index),
  // equal figures folded into the first of them.
  std::vector<std::int64_t> fitting;
  std::vector<std::int64_t> top;
  auto rank_fitting = [&] {
    std::sort(fitting.begin(), fitting.end(), [&](std::int64_t a, std::int64_t b) {
      const PlanCandidate& ca = result.candidates[static_cast<std::size_t>(a)];
      const PlanCandidate& cb = result.candidates[static_cast<std::size_t>(b)];
      if (ca.tokens_per_second_per_gpu != cb.tokens_per_second_per_gpu) {
        return ca.tokens_per_second_per_gpu > cb.tokens_per_second_per_gpu;
      }
      if (ca.peak_reserved_bytes != cb.peak_reserved_bytes) {
        return ca.peak_reserved_bytes < cb.peak_reserved_bytes;
      }
      return a < b;
    });
    top.clear();
    for (const std::int64_t i : fitting) {
      PlanCandidate& c = result.candidates[static_cast<std::size_t>(i)];
      c.same_as = -1;
      if (!top.empty()) {
        const PlanCandidate& rep = result.candidates[static_cast<std::size_t>(top.back())];
        if (rep.step_time_s == c.step_time_s && rep.peak_reserved_bytes == c.peak_reserved_bytes) {
          c.same_as = rep.index;
          continue;
        }
      }
      top.push_back(i);
    }
  };
  // Threads take configurations in bound order while the next bound can still reach the top;
  // each result updates the ranking (and with it the threshold) under the lock. The top is exact
  // whatever the timing: a configuration is passed over only when its bound is below the K-th
  // best result so far, which only grows.
  std::size_t next = 0;
  std::int64_t done = 0;
  std::mutex lock;
  auto threshold = [&] {
    return static_cast<std::int64_t>(top.size()) >= req.top
               ? result.candidates[static_cast<std::size_t>(top[static_cast<std::size_t>(req.top - 1)])]
                     .tokens_per_second_per_gpu
               : 0.0;
  };
  parallel_for(std::max(1, req.jobs), std::max(1, req.jobs), [&](std::int64_t) {
    while (true) {
      std::int64_t i = -1;
      {
        const std::lock_guard<std::mutex> hold(lock);
        if (next < order.size() && bound_of(order[next]) >= threshold()) {
          i = order[next++];
        }
      }
      if (i < 0) {
        return;
      }
      PlanCandidate& c = result.candidates[static_cast<std::size_t>(i)];
      simulate_one(c);
      const std::lock_guard<std::mutex> hold(lock);
      if (c.status == CandidateStatus::kSimulated) {
        ++result.simulated;
        if (c.fits) {
          fitting.push_back(i);
          rank_fitting();
        }
      } else if (c.status == CandidateStatus::kDoesNotFit) {
        ++result.simulated;
        ++result.does_not_fit;
      } else {
        ++result.failed;
      }
      ++done;
      if (progress) {
        progress(done, static_cast<std::int64_t>(order.size()));
      }
    }
  });
  rank_fitting();
  for (; next < order.size(); ++next) {
    PlanCandidate& c = result.candidates[static_cast<std::size_t>(order[next])];
    c.status = CandidateStatus::kCannotWin;
    c.note = str_cat("at most ", significant_text(bound_of(order[next]), 3),
                     " tokens/s/GPU (compute alone), below the top ", req.top);
    ++result.cannot_win;
  }
  result.ranking = top;
  result.explanation = explain(result);
  for (const std::string& s : skipped) {
    result.explanation.push_back(s);
  }
  return result;
}

std::string plan_report_text(const PlanRequest& req, const PlanResult& r) {
  std::string out = str_cat(
      "plan: ", req.base.model, " on ", r.gpus, " GPUs (", req.sim.hardware, "), seq-len ",
      req.base.seq_len, ", global batch ", r.global_batch_tokens, " tokens (",
      r.sequences_per_step, " sequences) per step\n");
  out += str_cat(r.candidates.size(), " configurations: ", r.simulated, " simulated (",
                 r.does_not_fit, " stopped when they outgrew the device), ",
                 r.cannot_fit, " cannot fit (memory bound), ", r.cannot_win,
                 " cannot win (throughput bound), ", r.invalid, " invalid, ", r.failed,
                 " failed\n");
  out += str_cat("accuracy: ", accuracy_line(), "\n\n");
  const std::int64_t shown = std::min<std::int64_t>(req.top, static_cast<std::int64_t>(r.ranking.size()));
  if (shown > 0) {
    out += str_cat(pad_text("rank", 4), "  ", pad_text("#", 6), "  ", pad_text("tok/s/GPU", 9), "  ",
                   pad_text("TFLOP/s", 7), "  ", pad_text("MFU", 6), "  ", pad_text("step", 9), "  ",
                   pad_text("headroom", 9), "  configuration\n");
  }
  std::map<std::int64_t, std::int64_t> equal;  // representative -> configurations folded into it
  for (const PlanCandidate& c : r.candidates) {
    if (c.same_as >= 0) {
      ++equal[c.same_as];
    }
  }
  for (std::int64_t k = 0; k < shown; ++k) {
    const PlanCandidate& c = r.candidates[static_cast<std::size_t>(r.ranking[static_cast<std::size_t>(k)])];
    const auto folded = equal.find(c.index);
    out += str_cat(pad_text(std::to_string(k + 1), 4), "  ", pad_text(std::to_string(c.index), 6),
                   "  ", pad_text(significant_text(c.tokens_per_second_per_gpu, 3), 9), "  ",
                   pad_text(significant_text(c.tflops_per_gpu, 3), 7), "  ",
                   pad_text(fixed_text(100.0 * c.mfu, 1) + "%", 6), "  ",
                   pad_text(significant_text(c.step_time_s, 3) + " s", 9), "  ",
                   pad_text(fixed_text(static_cast<double>(c.headroom_bytes) / kGiB, 1) + " GiB", 9),
                   "  ", describe(c),
                   folded == equal.end() ? std::string()
                                         : str_cat(" (and ", folded->second,
                                                   " more with equal figures)"),
                   "\n");
  }
  out += "\n";
  for (const std::string& line : r.explanation) {
    out += line + "\n";
  }
  if (!r.ranking.empty()) {
    const PlanCandidate& w = r.candidates[static_cast<std::size_t>(r.ranking[0])];
    const RunOptions& o = w.options;
    out += str_cat("\nreproduce the best: fsdpsim simulate --model ", o.model, " --hardware ",
                   req.sim.hardware, " --mesh ", o.mesh, " --strategy ", o.strategy,
                   o.sequence_parallel ? " --sequence-parallel" : "", " --seq-len ", o.seq_len,
                   " --micro-batch-size ", o.micro_batch_size, " --microbatches ", o.microbatches,
                   " --recompute ", o.recompute, " --reshard-after-forward ",
                   o.reshard_after_forward, " --prefetch '", o.forward_prefetch, "' --framework ",
                   o.framework, o.compile ? " --compile" : "",
                   o.compute_dtype != "bf16" ? str_cat(" --compute-dtype ", o.compute_dtype) : "",
                   o.fp8_all_gather ? " --fp8-all-gather" : "",
                   o.reduce_dtype.empty() ? "" : str_cat(" --reduce-dtype ", o.reduce_dtype),
                   o.param_dtype.empty() ? "" : str_cat(" --param-dtype ", o.param_dtype), "\n");
  }
  return out;
}

nlohmann::json plan_report_json(const PlanRequest& req, const PlanResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const PlanCandidate& c : r.candidates) {
    nlohmann::json row = {{"index", c.index},
                          {"status", std::string(to_string(c.status))},
                          {"strategy", c.options.strategy},
                          {"mesh", c.options.mesh},
                          {"tp", c.tp},
                          {"ep", c.ep},
                          {"sequence_parallel", c.options.sequence_parallel},
                          {"micro_batch_size", c.options.micro_batch_size},
                          {"microbatches", c.options.microbatches},
                          {"recompute", c.options.recompute},
                          {"reshard_after_forward", c.options.reshard_after_forward},
                          {"prefetch", c.options.forward_prefetch},
                          {"memory_lower_bound_bytes", c.memory_lower_bound_bytes},
                          {"step_time_lower_bound_s", c.step_time_lower_bound_s}};
    if (!c.note.empty()) {
      row["note"] = c.note;
    }
    if (c.same_as >= 0) {
      row["same_as"] = c.same_as;
    }
    if (c.status == CandidateStatus::kSimulated) {
      row["step_time_s"] = c.step_time_s;
      row["tokens_per_second_per_gpu"] = c.tokens_per_second_per_gpu;
      row["tflops_per_gpu"] = c.tflops_per_gpu;
      row["mfu"] = c.mfu;
      row["fits"] = c.fits;
      row["headroom_bytes"] = c.headroom_bytes;
      row["peak_reserved_bytes"] = c.peak_reserved_bytes;
      row["compute_s"] = c.compute_s;
      row["exposed_communication_s"] = c.exposed_communication_s;
      row["recompute_flops_per_step"] = c.recompute_flops_per_step;
    }
    rows.push_back(std::move(row));
  }
  return nlohmann::json{{"model", req.base.model},
                        {"hardware", req.sim.hardware},
                        {"gpus", r.gpus},
                        {"seq_len", req.base.seq_len},
                        {"global_batch_tokens", r.global_batch_tokens},
                        {"sequences_per_step", r.sequences_per_step},
                        {"summary",
                         {{"configurations", r.candidates.size()},
                          {"simulated", r.simulated},
                          {"does_not_fit", r.does_not_fit},
                          {"cannot_fit", r.cannot_fit},
                          {"cannot_win", r.cannot_win},
                          {"invalid", r.invalid},
                          {"failed", r.failed}}},
                        {"ranking", r.ranking},
                        {"explanation", r.explanation},
                        {"configurations", rows}};
}

}  // namespace fsdp::planner
