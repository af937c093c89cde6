// SPDX-License-Identifier: Apache-2.0
#include "core/policy/recompute_policy.h"

#include <algorithm>
#include <charconv>

#include "core/base/strings.h"

namespace fsdp {

namespace {

constexpr std::string_view kSelectiveLayer = "selective-layer:";

Error bad_text(std::string_view text) {
  return Error(ErrorCode::kInvalidArgument,
               str_cat("--recompute is '", text,
                       "'; expected none, full, full-all-units, selective-op, "
                       "selective-layer:K or core-attention"));
}

// The whole unit from its checkpointed input.
UnitCheckpoint whole(const Unit& unit) {
  const UnitActivations& a = unit.activations();
  return UnitCheckpoint{.recomputed = true,
                        .kept = a.recompute,
                        .transient = std::max<std::int64_t>(a.stored - a.recompute, 0),
                        .flops = unit.flops()};
}

UnitCheckpoint kept_all(const Unit& unit) {
  return UnitCheckpoint{.kept = unit.activations().stored};
}

UnitCheckpoint selective(const Unit& unit, const std::optional<CheckpointFigures>& figures,
                         bool compiled) {
  if (!figures.has_value()) {
    return whole(unit);
  }
  return UnitCheckpoint{.recomputed = figures->transient > 0 || figures->flops != UnitFlops{},
                        .kept = compiled ? figures->kept - figures->unread : figures->kept,
                        .transient = figures->transient,
                        .flops = figures->flops};
}

}  // namespace

Expected<RecomputePolicy> RecomputePolicy::make(RecomputeMode mode, std::int64_t layer_frequency) {
  if (mode == RecomputeMode::kSelectiveLayer && layer_frequency < 1) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("--recompute selective-layer:K needs K >= 1, got ", layer_frequency));
  }
  if (mode != RecomputeMode::kSelectiveLayer && layer_frequency != 0) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("--recompute: a layer frequency belongs to selective-layer:K only, got ",
                         layer_frequency));
  }
  RecomputePolicy out;
  out.mode_ = mode;
  out.layer_frequency_ = layer_frequency;
  return out;
}

RecomputePolicy RecomputePolicy::full() {
  RecomputePolicy out;
  out.mode_ = RecomputeMode::kFull;
  return out;
}

RecomputePolicy RecomputePolicy::full_all_units() {
  RecomputePolicy out;
  out.mode_ = RecomputeMode::kFullAllUnits;
  return out;
}

Expected<RecomputePolicy> RecomputePolicy::parse(std::string_view text) {
  if (text == "none") {
    return RecomputePolicy{};
  }
  if (text == "full") {
    return full();
  }
  if (text == "full-all-units") {
    return full_all_units();
  }
  if (text == "selective-op") {
    return make(RecomputeMode::kSelectiveOp);
  }
  if (text == "core-attention") {
    return make(RecomputeMode::kCoreAttention);
  }
  if (text.starts_with(kSelectiveLayer)) {
    const std::string_view k = text.substr(kSelectiveLayer.size());
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(k.data(), k.data() + k.size(), value);
    if (k.empty() || ec != std::errc() || end != k.data() + k.size() || value < 1) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("--recompute is '", text,
                           "'; expected selective-layer:K with an integer K >= 1"));
    }
    return make(RecomputeMode::kSelectiveLayer, value);
  }
  return bad_text(text);
}

UnitCheckpoint checkpoint_of(const RecomputePolicy& policy, const Unit& unit,
                             std::int64_t block_index, bool compiled) {
  switch (policy.mode()) {
    case RecomputeMode::kNone:
      return kept_all(unit);
    case RecomputeMode::kFull:
      // torchtitan's apply_ac and Megatron-LM's full granularity wrap the transformer blocks
      // only (docs/models.md, "Activation checkpointing modes").
      return unit.activations().block && block_index >= 0 ? whole(unit) : kept_all(unit);
    case RecomputeMode::kFullAllUnits:
      return whole(unit);
    case RecomputeMode::kSelectiveOp:
      return selective(unit, unit.activations().selective_op, compiled);
    case RecomputeMode::kCoreAttention:
      return selective(unit, unit.activations().core_attention, compiled);
    case RecomputeMode::kSelectiveLayer:
      // torchtitan's _apply_layer_sac counts the blocks from 1 and checkpoints count % K == 0.
      if (unit.activations().block && block_index >= 0 &&
          (block_index + 1) % policy.layer_frequency() == 0) {
        return whole(unit);
      }
      return kept_all(unit);
  }
  return kept_all(unit);
}

std::vector<UnitCheckpoint> checkpoints_of(const RecomputePolicy& policy, const Model& model,
                                           bool compiled) {
  std::vector<UnitCheckpoint> out;
  out.reserve(model.units().size());
  std::int64_t block = 0;
  for (const Unit& unit : model.units()) {
    out.push_back(checkpoint_of(policy, unit, unit.activations().block ? block++ : -1, compiled));
  }
  return out;
}

std::string to_string(const RecomputePolicy& policy) {
  switch (policy.mode()) {
    case RecomputeMode::kNone:
      return "none";
    case RecomputeMode::kFull:
      return "full";
    case RecomputeMode::kFullAllUnits:
      return "full-all-units";
    case RecomputeMode::kSelectiveOp:
      return "selective-op";
    case RecomputeMode::kSelectiveLayer:
      return str_cat(kSelectiveLayer, policy.layer_frequency());
    case RecomputeMode::kCoreAttention:
      return "core-attention";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, const RecomputePolicy& policy) {
  return os << to_string(policy);
}

}  // namespace fsdp
