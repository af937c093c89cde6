// SPDX-License-Identifier: Apache-2.0
// Comma-separated integer lists of the command line ("8,16,256", "64KiB,16MiB,1GiB"): one parser
// for commbench's and hardware's --sizes and hardware's --gpus.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/expected.h"

namespace fsdp::cli {

// The items of `text` split at commas, spaces dropped ("a, b" -> {"a", "b"}; "" -> {""}).
std::vector<std::string> split_commas(const std::string& text);

// Each item an integer, or with `with_units` a size ("4096", "64KiB", "16MiB", "1GiB"), in
// [min, max] (min >= 1). Error (kInvalidArgument), naming `flag` and the item: "--sizes item
// '1TB': expected a size like 4096, 64KiB, 16MiB or 1GiB in [1, 1099511627776]".
Expected<std::vector<std::int64_t>> parse_int_list(const std::string& text, std::string_view flag,
                                                   bool with_units, std::int64_t min,
                                                   std::int64_t max);

}  // namespace fsdp::cli
