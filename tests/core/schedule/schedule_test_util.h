// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the schedule tests: the §4.7/§4.13 model (root R with a bias, children L0
// and L1 with a weight each), configs per strategy, and a compact rendering of a program.
#pragma once

#include "core/model/model.h"
#include "core/policy/fsdp_config.h"
#include "core/schedule/schedule.h"
#include "core/schedule/schedule_builder.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fsdp::testing {

inline Param make_param(std::string name, std::initializer_list<std::int64_t> dims,
                        DType dtype = DType::kBf16, bool requires_grad = true) {
  return Param::make(std::move(name), Shape::make(dims).value(), dtype, requires_grad).value();
}

// R (root; bias [8]) with children L0 and L1 (weight [8, 8] each), bf16, 3 parameter groups.
inline Model three_group_model() {
  const UnitFlops flops{1000, 0};
  const UnitActivations acts{64, 16};
  std::vector<Unit> units;
  units.push_back(Unit::make("R", Unit::kNoParent, {make_param("bias", {8})}, flops, acts).value());
  units.push_back(Unit::make("L0", 0, {make_param("L0.weight", {8, 8})}, flops, acts).value());
  units.push_back(Unit::make("L1", 0, {make_param("L1.weight", {8, 8})}, flops, acts).value());
  return Model::make("three_groups", std::move(units)).value();
}

inline DeviceMesh mesh_of(const std::string& text) {
  return parse_device_mesh(text).value();
}

inline FsdpConfig config_of(Strategy strategy, const std::string& mesh, FsdpOptions options = {},
                            bool tensor_atomic = false) {
  return make_fsdp_config(strategy, mesh_of(mesh), std::move(options), tensor_atomic).value();
}

// One op per token: AG(u)/RS(u)/AR(u) collectives (with ":sync"/":fin" for the model-weight
// sync and gradient finalisation), W(u) the compute stream's wait on u's unshard event, F(u) the
// free of u's unsharded weights, fwd(u)/bwd(u)/re(u) compute, copy(u) the grad copy,
// step(u) the optimizer step, cast(u). Records, other waits and other allocs/frees are left out.
inline std::string render_op(const Schedule& s, const RankProgram& p, std::size_t i) {
  const Op& op = p.ops[i];
  const auto name = [&](std::int32_t u) {
    return u >= 0 ? s.unit_names()[static_cast<std::size_t>(u)] : std::string("-");
  };
  const std::string u = "(" + name(op.unit) + ")";
  auto suffix = [&]() -> std::string {
    const std::string_view what = to_string(s.collectives()[static_cast<std::size_t>(op.collective)].leg);
    if (what == "model_weight_sync") {
      return ":sync";
    }
    if (what == "grad_finalize") {
      return ":fin";
    }
    return "";
  };
  switch (op.kind) {
    case OpKind::kAllGather:
      return "AG" + suffix() + u;
    case OpKind::kReduceScatter:
      return "RS" + suffix() + u;
    case OpKind::kAllReduce:
      return "AR" + suffix() + u;
    case OpKind::kAllToAll:
      return "A2A" + suffix() + u;
    case OpKind::kForward:
      return "fwd" + u;
    case OpKind::kBackward:
      return "bwd" + u;
    case OpKind::kRecompute:
      return "re" + u;
    case OpKind::kGradCopy:
      return "copy" + u;
    case OpKind::kGradAccumulate:
      return "acc" + u;
    case OpKind::kOptimizerStep:
      return "step" + u;
    case OpKind::kCast:
      return "cast" + u;
    case OpKind::kWait:
      // The compute stream's wait on an event recorded by the all-gather stream for a unit.
      return op.stream == StreamKind::kCompute && op.unit >= 0 ? "W" + u : "";
    case OpKind::kFree:
      return op.buffer_class == BufferClass::kUnshardedWeights ? "F" + u : "";
    case OpKind::kAlloc:
    case OpKind::kRecord:
      return "";
  }
  return "";
}

// The rendered ops of `p` with the given phase (all phases when `phase` is nullptr), joined by
// spaces.
inline std::string render(const Schedule& s, const RankProgram& p, const Phase* phase = nullptr,
                          std::int32_t microbatch = -2) {
  std::string out;
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    if (phase != nullptr && p.ops[i].phase != *phase) {
      continue;
    }
    if (microbatch != -2 && p.ops[i].microbatch != microbatch) {
      continue;
    }
    const std::string t = render_op(s, p, i);
    if (!t.empty()) {
      out += out.empty() ? t : " " + t;
    }
  }
  return out;
}

// Every op, one per line: "12 compute forward unit=L0 group=-1 mb=0 ev=-1 buf=-1 n=0".
inline std::string dump(const Schedule& s, const RankProgram& p) {
  std::string out;
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    out += std::to_string(i) + " " + std::string(to_string(op.stream)) + " " +
           std::string(to_string(op.kind)) + " " + std::string(to_string(op.phase)) +
           " unit=" + (op.unit >= 0 ? s.unit_names()[static_cast<std::size_t>(op.unit)] : "-") +
           " group=" + std::to_string(op.group) + " mb=" + std::to_string(op.microbatch) +
           " ev=" + std::to_string(op.event) + " buf=" + std::to_string(op.buffer) +
           " cls=" + std::string(to_string(op.buffer_class)) + " n=" + std::to_string(op.elements) +
           " bytes=" + std::to_string(op.bytes) + "\n";
  }
  return out;
}

}  // namespace fsdp::testing
