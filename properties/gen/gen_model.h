// SPDX-License-Identifier: Apache-2.0
// RapidCheck generators of small models: 1-6 units, flat or nested (any parent-before-child
// tree), 0-3 parameters per unit with 1-D or 2-D shapes of dims 1-9, bf16/fp16/fp32 dtypes and
// mixed requires_grad, small FLOP and activation figures. Every generated model passes
// Model::make; the parameter names are unique ("u<i>.p<j>").
#pragma once

#include "core/base/strings.h"
#include "core/model/model.h"
#include "core/model/param_groups.h"

#include <rapidcheck.h>

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace fsdp::gen {

// The plain description a Model is built from (shrinks as data, prints readably).
struct ParamSpec {
  std::vector<std::int64_t> dims;
  DType dtype = DType::kBf16;
  bool requires_grad = true;
};

struct UnitSpec {
  std::int32_t parent = Unit::kNoParent;
  std::vector<ParamSpec> params;
  std::int64_t matmul_flops = 0;
  std::int64_t stored = 0;
  std::int64_t recompute = 0;
  // Selective checkpointing figures (kept, transient, recomputed matmul FLOPs), used for both
  // selective-op and core-attention when set; a unit that is no block keeps them all.
  bool selective = false;
  std::int64_t selective_kept = 0;
  std::int64_t selective_transient = 0;
  std::int64_t selective_flops = 0;
  bool block = true;
};

struct ModelSpec {
  std::vector<UnitSpec> units;
};

inline std::ostream& operator<<(std::ostream& os, const ModelSpec& m) {
  os << "model{";
  for (std::size_t i = 0; i < m.units.size(); ++i) {
    const UnitSpec& u = m.units[i];
    os << (i > 0 ? "; " : "") << "u" << i << "(parent " << u.parent << ":";
    for (const ParamSpec& p : u.params) {
      os << " [" << join(p.dims, "x") << "] " << to_string(p.dtype) << (p.requires_grad ? "" : "!");
    }
    os << ")";
  }
  return os << "}";
}

// Builds the Model; FSDP_CHECKs that the spec is valid (every generated one is).
inline Model make_model(const ModelSpec& spec) {
  std::vector<Unit> units;
  for (std::size_t i = 0; i < spec.units.size(); ++i) {
    const UnitSpec& u = spec.units[i];
    std::vector<Param> params;
    for (std::size_t j = 0; j < u.params.size(); ++j) {
      const ParamSpec& p = u.params[j];
      params.push_back(Param::make(str_cat("u", i, ".p", j), Shape::make(p.dims).value(), p.dtype,
                                   p.requires_grad)
                           .value());
    }
    UnitActivations activations{.stored = u.stored, .recompute = u.recompute, .block = u.block};
    if (u.selective) {
      const CheckpointFigures figures{.kept = u.selective_kept,
                                      .transient = u.selective_transient,
                                      .flops = {std::min(u.selective_flops, u.matmul_flops), 0}};
      activations.selective_op = figures;
      activations.core_attention = figures;
    }
    units.push_back(Unit::make(str_cat("u", i), u.parent, std::move(params),
                               UnitFlops{u.matmul_flops, 0}, activations)
                        .value());
  }
  return Model::make("generated", std::move(units)).value();
}

inline rc::Gen<ParamSpec> param_spec() {
  return rc::gen::build<ParamSpec>(
      rc::gen::set(&ParamSpec::dims,
                   rc::gen::mapcat(rc::gen::inRange<std::size_t>(1, 3),
                                   [](std::size_t rank) {
                                     return rc::gen::container<std::vector<std::int64_t>>(
                                         rank, rc::gen::inRange<std::int64_t>(1, 10));
                                   })),
      rc::gen::set(&ParamSpec::dtype,
                   rc::gen::element(DType::kBf16, DType::kBf16, DType::kFp32, DType::kFp16)),
      rc::gen::set(&ParamSpec::requires_grad,
                   rc::gen::weightedElement<bool>({{4, true}, {1, false}})));
}

inline rc::Gen<UnitSpec> unit_spec(rc::Gen<std::int32_t> parent) {
  return rc::gen::build<UnitSpec>(
      rc::gen::set(&UnitSpec::parent, std::move(parent)),
      rc::gen::set(&UnitSpec::params,
                   rc::gen::mapcat(rc::gen::inRange<std::size_t>(0, 4),
                                   [](std::size_t k) {
                                     return rc::gen::container<std::vector<ParamSpec>>(
                                         k, param_spec());
                                   })),
      rc::gen::set(&UnitSpec::matmul_flops, rc::gen::inRange<std::int64_t>(0, 1000)),
      rc::gen::set(&UnitSpec::stored, rc::gen::inRange<std::int64_t>(0, 64)),
      rc::gen::set(&UnitSpec::recompute, rc::gen::inRange<std::int64_t>(0, 16)),
      rc::gen::set(&UnitSpec::selective, rc::gen::arbitrary<bool>()),
      rc::gen::set(&UnitSpec::selective_kept, rc::gen::inRange<std::int64_t>(0, 64)),
      rc::gen::set(&UnitSpec::selective_transient, rc::gen::inRange<std::int64_t>(0, 64)),
      rc::gen::set(&UnitSpec::selective_flops, rc::gen::inRange<std::int64_t>(0, 1000)),
      rc::gen::set(&UnitSpec::block, rc::gen::weightedElement<bool>({{3, true}, {1, false}})));
}

// 1-6 units; unit i's parent is -1 or any earlier unit (a flat model half of the time).
inline rc::Gen<ModelSpec> model_spec() {
  return rc::gen::exec([] {
    const auto n = *rc::gen::inRange<std::size_t>(1, 7);
    const bool flat = *rc::gen::arbitrary<bool>();
    ModelSpec m;
    for (std::size_t i = 0; i < n; ++i) {
      auto parent = flat || i == 0 ? rc::gen::just(std::int32_t{Unit::kNoParent})
                                   : rc::gen::inRange<std::int32_t>(Unit::kNoParent,
                                                                    static_cast<std::int32_t>(i));
      m.units.push_back(*unit_spec(std::move(parent)));
    }
    return m;
  });
}

// Parameter groups of the model (§4.1 step 2e) and how many are trainable.
struct GroupCounts {
  std::int64_t groups = 0;
  std::int64_t trainable = 0;
};

inline GroupCounts count_groups(const Model& model) {
  GroupCounts c;
  for (const Unit& u : model.units()) {
    for (const ParamGrouping& g : group_params(u.params())) {
      ++c.groups;
      c.trainable += g.requires_grad ? 1 : 0;
    }
  }
  return c;
}

}  // namespace fsdp::gen
