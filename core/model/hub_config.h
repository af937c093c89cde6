// SPDX-License-Identifier: Apache-2.0
// Importer for the config.json files that model hubs publish for decoder-only language models:
// model_type llama, mistral, mixtral, qwen2, deepseek_v3 and gpt2 (which also covers GPT-3-shaped
// configs). One FSDP unit "embedding", one "layers.<i>" per decoder layer, one "head"; tensor
// names and shapes follow the hub checkpoints. FLOPs and activation bytes per token follow
// docs/models.md. Rules per family are in docs/models.md too.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "core/base/expected.h"
#include "core/model/hub_arch.h"
#include "core/model/model.h"
#include "core/model/model_split.h"

#include <nlohmann/json.hpp>

namespace fsdp {

// Imports a hub config. `source` (usually the path) starts every error message, which names the
// field, the expected and the actual value. The model is called `name` when it is non-empty, else
// "_name_or_path" when the config has one, else the file name of `source` without ".json".
// Errors: malformed JSON, an unknown model_type, a missing, mistyped or out-of-range size, heads
// that do not divide the hidden size, counts that overflow int64, or a model too large to list
// tensor by tensor (more than kMaxHubTensors tensors or kMaxHubLayers layers). Never throws.
Expected<Model> import_hub_config(std::string_view text, std::string_view source,
                                  std::string name = {});
Expected<Model> hub_config_to_model(const nlohmann::json& doc, std::string_view source,
                                    std::string name = {});

// The Model of an architecture read by read_hub_arch (and maybe shrunk by apply_hub_overrides),
// called `name` ("model" when empty); `source` starts the errors (counts that overflow int64).
// hub_config_to_model is read_hub_arch followed by this. With a split (core/model/model_split.h)
// the model is one rank's: heads, key-value heads, MLP widths and the vocabulary (padded up to a
// multiple of tp) divided by tp, experts by ep, and each unit's work lists the activation
// collectives the split issues (docs/design/parallelism.md); the errors of check_model_split
// come first.
Expected<Model> hub_arch_to_model(const HubArch& arch, std::string_view source, std::string name,
                                  const ModelSplit& split = ModelSplit());

// Whether `split` divides the architecture, one line naming the config field, the axis and both
// values: tp must divide the attention heads, the key-value heads (grouped-query attention), the
// dense and expert MLP widths and the shared experts' width; ep > 1 needs experts and must divide
// them. The vocabulary is padded, never refused.
Status check_model_split(const HubArch& arch, const ModelSplit& split, std::string_view source);

// Limits that keep a hostile config from asking for billions of tensor records.
inline constexpr std::int64_t kMaxHubLayers = 10000;
inline constexpr std::int64_t kMaxHubTensors = 1000000;

}  // namespace fsdp
