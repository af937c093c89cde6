// SPDX-License-Identifier: Apache-2.0
// A preset's architecture shrunk so that a schedule of it builds and simulates at once (2 layers,
// hidden 256, 4 heads, 2 key-value heads, MLP 512, vocabulary 1024), for tests of splits.
#pragma once

#include <string_view>

#include "core/model/hub_arch.h"
#include "core/model/json_fields.h"
#include "core/model/model_presets.h"

#include <gtest/gtest.h>

namespace fsdp::testing {

inline HubArch small_preset_arch(std::string_view preset) {
  const ModelPreset* p = find_model_preset(preset);
  EXPECT_NE(p, nullptr) << preset;
  const HubArch arch =
      read_hub_arch(parse_json_text(p->config_json, preset).value(), preset).value();
  HubOverrides o;
  o.layers = 2;
  o.hidden = 256;
  o.heads = 4;
  o.kv_heads = 2;
  o.ffn = 512;
  o.vocab = 1024;
  return apply_hub_overrides(arch, o).value();
}

}  // namespace fsdp::testing
