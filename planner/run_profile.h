// SPDX-License-Identifier: Apache-2.0
// Framework profiles (`--profile torchtitan|megatron-fsdp`): one word for the defaults a framework
// runs with, as a RunOptionsPatch under the config file and the user's options. The table and the
// source of each value: docs/cli.md, "Config files and profiles".
#pragma once

#include <span>
#include <string_view>

#include "core/base/expected.h"
#include "planner/run_options_patch.h"

namespace fsdp::planner {

// The profile names, in the order docs/cli.md lists them.
std::span<const std::string_view> profile_names();

// The defaults of profile `name`. Error: an unknown name ("--profile is 'x'; expected torchtitan
// or megatron-fsdp").
Expected<RunOptionsPatch> profile_defaults(std::string_view name);

}  // namespace fsdp::planner
