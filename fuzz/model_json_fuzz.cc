// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the fsdpsim model file parser (and the auto-detecting loader): no crash, a
// one-line error for bad input, and model_to_json round trips for good input. Seeds:
// fuzz/corpus/model_json.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/layout/shard_layout.h"
#include "core/model/model_json.h"
#include "core/model/model_loader.h"
#include "core/model/param_groups.h"
#include "fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto model = fsdp::parse_model_json(text, "fuzz.json");
  if (!model) {
    fsdp::fuzz::check_error_line(model.error());
  } else {
    const std::string again = fsdp::model_to_json_text(*model);
    auto back = fsdp::parse_model_json(again, "again.json");
    fsdp::fuzz::check(back.has_value(), "serialised model does not parse",
                      back ? std::string() : back.error().message());
    fsdp::fuzz::check(*back == *model, "round trip changed the model", again);
    for (const fsdp::Unit& u : model->units()) {
      auto groups = fsdp::build_param_groups(u, 4, 1, fsdp::ShardLayout::kPadded);
      if (!groups) {
        fsdp::fuzz::check_error_line(groups.error());
      }
    }
    (void)model->forward_flops_per_token(4096);
  }
  auto loaded = fsdp::parse_model_text(text, "fuzz.json");
  if (!loaded) {
    fsdp::fuzz::check_error_line(loaded.error());
  }
  return 0;
}
