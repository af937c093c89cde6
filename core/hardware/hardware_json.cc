// SPDX-License-Identifier: Apache-2.0
#include "core/hardware/hardware_json.h"

#include "core/base/strings.h"
#include "core/hardware/calibration_json.h"
#include "core/model/json_fields.h"

namespace fsdp {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

Expected<Hardware> hardware_from_json_impl(const json& doc, const std::string& source) {
  FSDP_TRY(const JsonObjectReader r, JsonObjectReader::make(doc, source, ""));
  FSDP_RETURN_IF_ERROR(r.reject_unknown(
      {"format", "version", "name", "description", "devices_per_node", "memory_bytes",
       "peak_bf16_flops", "peak_fp32_flops", "hbm_bytes_per_s", "intra_node_bytes_per_s",
       "intra_node_latency_ns", "inter_node_bytes_per_s", "inter_node_latency_ns", "nics_per_node",
       "nvls_permille", "collectives", "calibration", "compute_profile"}));
  FSDP_TRY(const std::optional<std::string> format, r.get_optional_string("format"));
  if (format && *format != kHardwareFormatName) {
    return r.error("format", str_cat("\"", kHardwareFormatName, "\""),
                   describe_json(*r.find("format")));
  }
  FSDP_TRY(const std::int64_t version, r.get_int_or("version", 1, kHardwareFormatVersion));
  if (version != kHardwareFormatVersion) {
    return r.error("version", str_cat(kHardwareFormatVersion), str_cat(version));
  }
  HardwareSpec spec;
  FSDP_TRY(spec.name, r.get_string("name"));
  FSDP_TRY(const std::optional<std::string> description, r.get_optional_string("description"));
  spec.description = description.value_or("");
  FSDP_TRY(spec.devices_per_node, r.get_int("devices_per_node", 1));
  FSDP_TRY(spec.memory_bytes, r.get_int("memory_bytes", 1));
  FSDP_TRY(spec.peak_bf16_flops, r.get_int("peak_bf16_flops", 1));
  FSDP_TRY(spec.peak_fp32_flops, r.get_int("peak_fp32_flops", 1));
  FSDP_TRY(spec.hbm_bytes_per_s, r.get_int("hbm_bytes_per_s", 1));
  FSDP_TRY(spec.intra_node_bytes_per_s, r.get_int("intra_node_bytes_per_s", 1));
  FSDP_TRY(spec.intra_node_latency_ns, r.get_int("intra_node_latency_ns", 0));
  FSDP_TRY(spec.inter_node_bytes_per_s, r.get_int("inter_node_bytes_per_s", 1));
  FSDP_TRY(spec.inter_node_latency_ns, r.get_int("inter_node_latency_ns", 0));
  FSDP_TRY(spec.nics_per_node, r.get_int_or("nics_per_node", 1, spec.devices_per_node));
  FSDP_TRY(spec.nvls_permille, r.get_int_or("nvls_permille", 0, 0));
  FSDP_TRY(const std::optional<std::string> collectives, r.get_optional_string("collectives"));
  if (collectives && *collectives != "nccl" && *collectives != "alpha-beta") {
    return r.error("collectives", "\"nccl\" or \"alpha-beta\"",
                   describe_json(*r.find("collectives")));
  }
  spec.collectives =
      collectives && *collectives == "nccl" ? CollectiveModel::kNccl : CollectiveModel::kAlphaBeta;
  if (const json* calibration = r.find("calibration")) {
    FSDP_TRY(spec.calibration, calibration_from_json(*calibration, source));
  }
  if (r.find("compute_profile") != nullptr) {
    FSDP_TRY(const json* obj, r.get_object("compute_profile"));
    FSDP_TRY(const JsonObjectReader p,
             JsonObjectReader::make(*obj, source, r.field_path("compute_profile")));
    FSDP_RETURN_IF_ERROR(p.reject_unknown(
        {"sm_count", "gemm_tile_m", "gemm_tile_n", "peak_fp8_flops", "gemm_permille",
         "attention_forward_flops", "attention_backward_flops", "cudnn_attention_forward_flops",
         "cudnn_attention_backward_flops", "elementwise_permille", "fp8_gemm_relative_permille"}));
    ComputeProfile profile;
    FSDP_TRY(profile.sm_count, p.get_int("sm_count", 1));
    FSDP_TRY(profile.gemm_tile_m, p.get_int_or("gemm_tile_m", 1, profile.gemm_tile_m));
    FSDP_TRY(profile.gemm_tile_n, p.get_int_or("gemm_tile_n", 1, profile.gemm_tile_n));
    FSDP_TRY(profile.peak_fp8_flops, p.get_int_or("peak_fp8_flops", 0, 0));
    FSDP_TRY(profile.gemm_permille, p.get_int("gemm_permille", 1));
    FSDP_TRY(profile.fp8_gemm_relative_permille,
             p.get_int_or("fp8_gemm_relative_permille", 1, profile.fp8_gemm_relative_permille));
    FSDP_TRY(profile.attention_forward_flops, p.get_int("attention_forward_flops", 1));
    FSDP_TRY(profile.attention_backward_flops, p.get_int("attention_backward_flops", 1));
    FSDP_TRY(profile.cudnn_attention_forward_flops,
             p.get_int_or("cudnn_attention_forward_flops", 1, profile.attention_forward_flops));
    FSDP_TRY(profile.cudnn_attention_backward_flops,
             p.get_int_or("cudnn_attention_backward_flops", 1, profile.attention_backward_flops));
    FSDP_TRY(profile.elementwise_permille, p.get_int("elementwise_permille", 1));
    spec.compute_profile = profile;
  }
  auto hw = Hardware::make(std::move(spec));
  if (!hw) {
    return hw.error().with_context(source);
  }
  return hw;
}

}  // namespace

Expected<Hardware> hardware_from_json(const json& doc, std::string_view source) {
  try {
    return hardware_from_json_impl(doc, std::string(source));
  } catch (const std::exception& e) {
    return Error(ErrorCode::kInternal, str_cat(source, ": unexpected error: ", e.what()));
  }
}

Expected<Hardware> parse_hardware_json(std::string_view text, std::string_view source) {
  FSDP_TRY(const json doc, parse_json_text(text, source));
  return hardware_from_json(doc, source);
}

ordered_json hardware_to_json(const Hardware& hw) {
  const HardwareSpec& s = hw.spec();
  ordered_json out{{"format", std::string(kHardwareFormatName)},
                   {"version", kHardwareFormatVersion},
                   {"name", s.name},
                   {"description", s.description},
                   {"devices_per_node", s.devices_per_node},
                   {"memory_bytes", s.memory_bytes},
                   {"peak_bf16_flops", s.peak_bf16_flops},
                   {"peak_fp32_flops", s.peak_fp32_flops},
                   {"hbm_bytes_per_s", s.hbm_bytes_per_s},
                   {"intra_node_bytes_per_s", s.intra_node_bytes_per_s},
                   {"intra_node_latency_ns", s.intra_node_latency_ns},
                   {"inter_node_bytes_per_s", s.inter_node_bytes_per_s},
                   {"inter_node_latency_ns", s.inter_node_latency_ns},
                   {"nics_per_node", s.nics_per_node},
                   {"nvls_permille", s.nvls_permille},
                   {"collectives", std::string(to_string(s.collectives))}};
  if (s.calibration) {
    out["calibration"] = calibration_to_json(*s.calibration);
  }
  if (const ComputeProfile* p = hw.compute_profile()) {
    out["compute_profile"] = {{"sm_count", p->sm_count},
                              {"gemm_tile_m", p->gemm_tile_m},
                              {"gemm_tile_n", p->gemm_tile_n},
                              {"peak_fp8_flops", p->peak_fp8_flops},
                              {"gemm_permille", p->gemm_permille},
                              {"fp8_gemm_relative_permille", p->fp8_gemm_relative_permille},
                              {"attention_forward_flops", p->attention_forward_flops},
                              {"attention_backward_flops", p->attention_backward_flops},
                              {"cudnn_attention_forward_flops", p->cudnn_attention_forward_flops},
                              {"cudnn_attention_backward_flops", p->cudnn_attention_backward_flops},
                              {"elementwise_permille", p->elementwise_permille}};
  }
  return out;
}

std::string hardware_to_json_text(const Hardware& hw, int indent) {
  return hardware_to_json(hw).dump(indent, ' ', /*ensure_ascii=*/false,
                                   ordered_json::error_handler_t::replace);
}

}  // namespace fsdp
