// SPDX-License-Identifier: Apache-2.0
// Built-in hardware: 8-GPU DGX systems of the A100, H100, H200 and B200 generations, with the
// figures of their published datasheets (docs/hardware.md cites each one). Latencies are modelling
// assumptions, not datasheet figures.
#pragma once

#include <span>
#include <string_view>

#include "core/base/expected.h"
#include "core/hardware/hardware.h"

namespace fsdp {

// "a100", "h100", "h200", "b200", in that order.
std::span<const Hardware> hardware_presets();
// The error for an unknown name lists the preset names.
Expected<Hardware> find_hardware_preset(std::string_view name);

}  // namespace fsdp
