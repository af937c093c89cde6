// SPDX-License-Identifier: Apache-2.0
// RapidCheck generators of FsdpConfig requests for the schedule properties: every strategy on a
// mesh of 1-8 ranks (2-axis dp_outer x dp_inner for HSDP/HFSDP), padded or unpadded layouts
// (unpadded on 1-D meshes only, as FsdpConfig requires), TensorAtomic ZeRO-1/2/3, 1-4
// microbatches, prefetch none / next(1) / next(2) / element budgets, a cap on in-flight
// all-gathers, unified or separate streams, recompute, mixed precision and the optimizer. Every
// generated request passes FsdpConfig::make.
#pragma once

#include "core/base/strings.h"
#include "core/policy/fsdp_config.h"
#include "core/policy/recompute_policy.h"

#include <rapidcheck.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace fsdp::gen {

struct PrefetchSpec {
  PrefetchMode mode = PrefetchMode::kNextUnits;
  std::int64_t amount = 1;
};

struct ConfigSpec {
  Strategy strategy = Strategy::kZero3;
  std::vector<std::int64_t> mesh = {1};  // one size per axis
  bool tensor_atomic = false;
  ShardLayout layout = ShardLayout::kPadded;
  std::int64_t microbatches = 1;
  PrefetchSpec forward;
  PrefetchSpec backward;
  std::int64_t max_inflight = 0;
  bool unified = false;
  RecomputePolicy recompute{};
  DType main_params = DType::kFp32;
  std::optional<DType> main_grads;
  std::optional<DType> compute;
  OptimizerKind optimizer = OptimizerKind::kAdam;
};

inline PrefetchPolicy make_prefetch(const PrefetchSpec& p) {
  switch (p.mode) {
    case PrefetchMode::kNone:
      return PrefetchPolicy::none();
    case PrefetchMode::kNextUnits:
      return PrefetchPolicy::next_units(p.amount).value();
    case PrefetchMode::kElementBudget:
      return PrefetchPolicy::element_budget(p.amount).value();
  }
  return PrefetchPolicy();
}

inline DeviceMesh make_mesh(const std::vector<std::int64_t>& sizes) {
  if (sizes.size() == 1) {
    return DeviceMesh::make({{"dp", sizes[0]}}).value();
  }
  return DeviceMesh::make({{"dp_outer", sizes[0]}, {"dp_inner", sizes[1]}}).value();
}

inline std::ostream& operator<<(std::ostream& os, const ConfigSpec& c) {
  os << to_string(c.strategy) << (c.tensor_atomic ? "(tensor-atomic)" : "") << " mesh "
     << to_string(make_mesh(c.mesh)) << " " << to_string(c.layout) << " mb " << c.microbatches
     << " forward " << to_string(make_prefetch(c.forward)) << " backward "
     << to_string(make_prefetch(c.backward)) << " inflight " << c.max_inflight
     << (c.unified ? " unified" : " separate") << " recompute " << to_string(c.recompute)
     << " main " << to_string(c.main_params) << " grads "
     << (c.main_grads ? std::string(to_string(*c.main_grads)) : "grad") << " compute "
     << (c.compute ? std::string(to_string(*c.compute)) : "param") << " " << to_string(c.optimizer);
  return os;
}

// The config, or the error FsdpConfig::make (or a policy factory) reports.
inline Expected<FsdpConfig> make_config(const ConfigSpec& c) {
  FsdpOptions o;
  o.shard_layout = c.layout;
  o.num_microbatches = c.microbatches;
  o.recompute = c.recompute;
  FSDP_TRY(o.mixed_precision, MixedPrecisionPolicy::make(c.main_params, c.main_grads, c.compute));
  FSDP_TRY(o.optimizer, OptimizerPolicy::make(c.optimizer));
  FSDP_TRY(o.schedule, SchedulePolicy::make(make_prefetch(c.forward), make_prefetch(c.backward),
                                            c.max_inflight, c.unified));
  return make_fsdp_config(c.strategy, make_mesh(c.mesh), o, c.tensor_atomic);
}

inline rc::Gen<PrefetchSpec> prefetch_spec() {
  return rc::gen::oneOf(rc::gen::just(PrefetchSpec{PrefetchMode::kNone, 0}),
                        rc::gen::just(PrefetchSpec{PrefetchMode::kNextUnits, 1}),
                        rc::gen::just(PrefetchSpec{PrefetchMode::kNextUnits, 2}),
                        rc::gen::map(rc::gen::inRange<std::int64_t>(1, 300), [](std::int64_t b) {
                          return PrefetchSpec{PrefetchMode::kElementBudget, b};
                        }));
}

inline rc::Gen<ConfigSpec> config_spec() {
  return rc::gen::exec([] {
    ConfigSpec c;
    c.strategy =
        *rc::gen::element(Strategy::kNoShard, Strategy::kZero1, Strategy::kZero2, Strategy::kZero3,
                          Strategy::kZero3, Strategy::kHsdp, Strategy::kHfsdp);
    if (strategy_mesh_ndim(c.strategy) == 2) {
      const auto outer = *rc::gen::inRange<std::int64_t>(1, 5);
      const auto inner = *rc::gen::inRange<std::int64_t>(1, 8 / outer + 1);
      c.mesh = {outer, inner};
    } else {
      c.mesh = {*rc::gen::inRange<std::int64_t>(1, 9)};
      c.layout = *rc::gen::element(ShardLayout::kPadded, ShardLayout::kUnpadded);
      c.tensor_atomic = c.strategy != Strategy::kNoShard && *rc::gen::arbitrary<bool>();
    }
    c.microbatches = *rc::gen::inRange<std::int64_t>(1, 5);
    c.forward = *prefetch_spec();
    c.backward = *prefetch_spec();
    c.max_inflight = *rc::gen::inRange<std::int64_t>(0, 4);
    c.unified = *rc::gen::arbitrary<bool>();
    c.recompute = RecomputePolicy::parse(*rc::gen::element<std::string>(
                                             "none", "full", "full-all-units", "selective-op",
                                             "selective-layer:1", "selective-layer:2",
                                             "selective-layer:3", "core-attention"))
                      .value();
    c.main_params = *rc::gen::element(DType::kFp32, DType::kBf16);
    c.main_grads = *rc::gen::element<std::optional<DType>>(std::nullopt, DType::kFp32);
    c.compute = *rc::gen::element<std::optional<DType>>(std::nullopt, std::nullopt, DType::kBf16);
    c.optimizer =
        *rc::gen::element(OptimizerKind::kAdam, OptimizerKind::kSgd, OptimizerKind::kSgdMomentum);
    return c;
  });
}

}  // namespace fsdp::gen
