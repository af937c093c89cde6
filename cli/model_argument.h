// SPDX-License-Identifier: Apache-2.0
// The size options that shrink the --model argument (--layers, --hidden, --ffn, --heads,
// --kv-heads, --vocab) as Boost options; loading the model is planner/model_argument.h's.
#pragma once

#include "core/model/hub_arch.h"
#include "planner/model_argument.h"

#include <boost/program_options.hpp>

namespace fsdp::cli {

using planner::load_arch_argument;
using planner::load_model_argument;

// Adds the six size options; each is set in *sizes only when given.
void add_model_size_options(boost::program_options::options_description& desc, HubOverrides* sizes);

}  // namespace fsdp::cli
