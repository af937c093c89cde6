// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the hub config.json importer: no crash, a one-line error for bad input, and
// for good input a model whose JSON form round trips. Seeds: fuzz/corpus/hub_config (the files of
// shared/data/models).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/model/hub_config.h"
#include "core/model/model_json.h"
#include "fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto model = fsdp::import_hub_config(text, "config.json");
  if (!model) {
    fsdp::fuzz::check_error_line(model.error());
    return 0;
  }
  // Large imports are legal but slow to serialise under sanitizers; round trip the small ones.
  std::size_t tensors = 0;
  for (const fsdp::Unit& u : model->units()) {
    tensors += u.params().size();
  }
  if (tensors <= 2000) {
    auto back = fsdp::parse_model_json(fsdp::model_to_json_text(*model, -1), "again.json");
    fsdp::fuzz::check(back.has_value() && *back == *model, "round trip changed the model",
                      back ? std::string() : back.error().message());
  }
  auto flops = model->training_flops_per_token(8192);
  if (!flops) {
    fsdp::fuzz::check_error_line(flops.error());
  }
  return 0;
}
