// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the hardware JSON parser: no crash, a one-line error for bad input, and a
// round trip for good input. Seeds: fuzz/corpus/hardware_json.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/hardware/hardware_json.h"
#include "fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto hw = fsdp::parse_hardware_json(text, "hardware.json");
  if (!hw) {
    fsdp::fuzz::check_error_line(hw.error());
    return 0;
  }
  auto back = fsdp::parse_hardware_json(fsdp::hardware_to_json_text(*hw), "again.json");
  fsdp::fuzz::check(back.has_value() && *back == *hw, "round trip changed the hardware",
                    back ? std::string() : back.error().message());
  (void)fsdp::to_string(*hw);
  return 0;
}
