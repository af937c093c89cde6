// SPDX-License-Identifier: Apache-2.0
// ShardLayout: how RowAtomic/BlockAtomic layouts cut rank segments: PADDED (equal segments, each a
// multiple of the chunk) or UNPADDED (packed tensors, boundaries on the nearest row/block).
#pragma once

#include <string_view>

#include "core/base/expected.h"

namespace fsdp {

enum class ShardLayout { kPadded, kUnpadded };

std::string_view to_string(ShardLayout layout);  // "padded" / "unpadded"
Expected<ShardLayout> parse_shard_layout(std::string_view text);

}  // namespace fsdp
