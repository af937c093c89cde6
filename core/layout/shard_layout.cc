// SPDX-License-Identifier: Apache-2.0
#include "core/layout/shard_layout.h"

#include "core/base/strings.h"

namespace fsdp {

std::string_view to_string(ShardLayout layout) {
  return layout == ShardLayout::kPadded ? "padded" : "unpadded";
}

Expected<ShardLayout> parse_shard_layout(std::string_view text) {
  if (text == "padded" || text == "PADDED") {
    return ShardLayout::kPadded;
  }
  if (text == "unpadded" || text == "UNPADDED") {
    return ShardLayout::kUnpadded;
  }
  return Error(ErrorCode::kInvalidArgument,
               str_cat("shard layout '", text, "' is unknown; expected 'padded' or 'unpadded'"));
}

}  // namespace fsdp
