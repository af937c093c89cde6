// SPDX-License-Identifier: Apache-2.0
#include "planner/sim_args.h"

#include "core/base/strings.h"
#include "sim/engine/straggler.h"
#include "sim/model/cost_model.h"

namespace fsdp::planner {
namespace {

Error invalid(std::string message) { return Error(ErrorCode::kInvalidArgument, std::move(message)); }

}  // namespace

Expected<sim::SimOptions> make_sim_options(const SimArgs& a, const Hardware& hardware) {
  sim::SimOptions o;
  if (a.compute_model != "per-op" && a.compute_model != "flops") {
    return invalid(str_cat("--compute-model is '", a.compute_model, "'; expected per-op or flops"));
  }
  std::string compute_model = a.compute_model;
  if (a.matmul_efficiency) {
    if (a.compute_model_given && compute_model == "per-op") {
      return invalid(
          "--matmul-efficiency applies to --compute-model flops; it conflicts with "
          "--compute-model per-op");
    }
    compute_model = "flops";
    o.cost.forward_efficiency = *a.matmul_efficiency;
  }
  o.cost.per_op_compute = compute_model == "per-op";
  o.cost.memory_efficiency = a.memory_efficiency;
  o.cost.link_efficiency = a.link_efficiency;
  const std::pair<const char*, double> efficiencies[] = {
      {"--matmul-efficiency", o.cost.forward_efficiency},
      {"--memory-efficiency", o.cost.memory_efficiency},
      {"--link-efficiency", o.cost.link_efficiency}};
  for (const auto& [option, e] : efficiencies) {
    if (!(e > 0.0 && e <= 1.0)) {
      return invalid(str_cat(option, " is ", e, "; expected a fraction in (0, 1]"));
    }
  }
  o.cost.backward_efficiency = o.cost.forward_efficiency;
  o.cost.recompute_efficiency = o.cost.forward_efficiency;
  if (!a.straggler.empty()) {
    auto parsed = sim::parse_straggler(a.straggler);
    if (!parsed) {
      return parsed.error().with_context("--straggler");
    }
    o.straggler = *parsed;
  }
  o.contention = !a.no_contention;
  if (a.sm_slowdown) {
    o.cost.sm_slowdown = *a.sm_slowdown;
  } else {  // a calibrated file's measured slowdown, if it has one
    o.cost = sim::calibrated_cost_options(o.cost, hardware);
  }
  if (!(o.cost.sm_slowdown >= 1.0 && o.cost.sm_slowdown < 1e6)) {
    return invalid(str_cat("--sm-slowdown is ", o.cost.sm_slowdown, "; expected a value in [1, 1e6)"));
  }
  o.cost.min_message_bytes = a.min_message_bytes;
  if (o.cost.min_message_bytes < 0) {
    return invalid(str_cat("--min-message-bytes is ", o.cost.min_message_bytes, "; expected >= 0"));
  }
  if (a.all_reduce == "ring") {
    o.cost.all_reduce = sim::AllReduceAlgorithm::kRing;
  } else if (a.all_reduce == "tree") {
    o.cost.all_reduce = sim::AllReduceAlgorithm::kTree;
  } else if (a.all_reduce == "auto") {
    o.cost.all_reduce = sim::AllReduceAlgorithm::kAuto;
  } else {
    return invalid(str_cat("--all-reduce is '", a.all_reduce, "'; expected ring, tree or auto"));
  }
  if (a.uneven == "padded") {
    o.cost.uneven = sim::UnevenCollective::kPadToMax;
  } else if (a.uneven == "broadcast") {
    o.cost.uneven = sim::UnevenCollective::kGroupedBroadcast;
  } else {
    return invalid(str_cat("--uneven is '", a.uneven, "'; expected padded or broadcast"));
  }
  o.record_trace = a.record_trace;
  return o;
}

}  // namespace fsdp::planner
