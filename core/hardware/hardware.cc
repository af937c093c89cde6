// SPDX-License-Identifier: Apache-2.0
#include "core/hardware/hardware.h"

#include <iomanip>
#include <sstream>
#include <utility>

#include "core/base/strings.h"

namespace fsdp {
namespace {

bool has_control(std::string_view text) {
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      return true;
    }
  }
  return false;
}

Error field_error(const HardwareSpec& spec, std::string_view field, std::string_view expected,
                  std::int64_t got) {
  return Error(ErrorCode::kInvalidArgument,
               str_cat("hardware '", spec.name, "': field '", field, "': expected ", expected,
                       ", got ", got));
}

// A decimal with up to `digits` fractional digits, trailing zeros dropped: 19.5, 989.5, 80.
std::string decimal(double value, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << value;
  std::string s = os.str();
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') {
      s.pop_back();
    }
    if (s.back() == '.') {
      s.pop_back();
    }
  }
  return s;
}

}  // namespace

std::string_view to_string(CollectiveModel model) {
  return model == CollectiveModel::kNccl ? "nccl" : "alpha-beta";
}

Expected<Hardware> Hardware::make(HardwareSpec spec) {
  if (spec.name.empty() || has_control(spec.name)) {
    return Error(ErrorCode::kInvalidArgument,
                 "hardware name: expected a non-empty string without control characters, got "
                 "an empty or unprintable name");
  }
  if (has_control(spec.description)) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("hardware '", spec.name,
                         "': field 'description': expected text without control characters, got "
                         "a control character"));
  }
  const std::pair<std::string_view, std::int64_t> positive[] = {
      {"devices_per_node", spec.devices_per_node},
      {"memory_bytes", spec.memory_bytes},
      {"peak_bf16_flops", spec.peak_bf16_flops},
      {"peak_fp32_flops", spec.peak_fp32_flops},
      {"hbm_bytes_per_s", spec.hbm_bytes_per_s},
      {"intra_node_bytes_per_s", spec.intra_node_bytes_per_s},
      {"inter_node_bytes_per_s", spec.inter_node_bytes_per_s},
  };
  for (const auto& [field, value] : positive) {
    if (value < 1) {
      return field_error(spec, field, "a positive integer", value);
    }
  }
  const std::pair<std::string_view, std::int64_t> non_negative[] = {
      {"intra_node_latency_ns", spec.intra_node_latency_ns},
      {"inter_node_latency_ns", spec.inter_node_latency_ns},
  };
  for (const auto& [field, value] : non_negative) {
    if (value < 0) {
      return field_error(spec, field, "a non-negative integer", value);
    }
  }
  if (spec.nics_per_node < 0) {
    return field_error(spec, "nics_per_node", "a positive integer (or 0: one per device)",
                       spec.nics_per_node);
  }
  if (spec.nics_per_node == 0) {
    spec.nics_per_node = spec.devices_per_node;
  }
  if (spec.nvls_permille < 0 || spec.nvls_permille > 1000) {
    return field_error(spec, "nvls_permille", "an integer in [0, 1000]", spec.nvls_permille);
  }
  if (spec.calibration) {
    if (Status s = validate_calibration(*spec.calibration); !s.ok()) {
      return s.error().with_context(str_cat("hardware '", spec.name, "'"));
    }
  }
  if (spec.compute_profile) {
    if (Status s = validate_compute_profile(*spec.compute_profile); !s.ok()) {
      return s.error().with_context(str_cat("hardware '", spec.name, "'"));
    }
  }
  return Hardware(std::move(spec));
}

std::string to_string(const Hardware& hw) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  std::ostringstream os;
  os << "name:                 " << hw.name() << "\n";
  if (!hw.description().empty()) {
    os << "description:          " << hw.description() << "\n";
  }
  os << "devices per node:     " << hw.devices_per_node() << "\n"
     << "memory per device:    " << decimal(static_cast<double>(hw.memory_bytes()) / kGiB, 2)
     << " GiB (" << hw.memory_bytes() << " bytes)\n"
     << "peak bf16 (dense):    " << decimal(static_cast<double>(hw.peak_bf16_flops()) / 1e12, 3)
     << " TFLOP/s\n"
     << "peak fp32:            " << decimal(static_cast<double>(hw.peak_fp32_flops()) / 1e12, 3)
     << " TFLOP/s\n"
     << "HBM bandwidth:        " << decimal(static_cast<double>(hw.hbm_bytes_per_s()) / 1e9, 3)
     << " GB/s\n"
     << "intra-node bandwidth: "
     << decimal(static_cast<double>(hw.intra_node_bytes_per_s()) / 1e9, 3)
     << " GB/s per device per direction\n"
     << "intra-node latency:   "
     << decimal(static_cast<double>(hw.intra_node_latency_ns()) / 1e3, 3) << " us\n"
     << "inter-node bandwidth: "
     << decimal(static_cast<double>(hw.inter_node_bytes_per_s()) / 1e9, 3)
     << (hw.collectives() == CollectiveModel::kNccl ? " GB/s per NIC per direction\n"
                                                    : " GB/s per device per direction\n")
     << "inter-node latency:   "
     << decimal(static_cast<double>(hw.inter_node_latency_ns()) / 1e3, 3) << " us\n"
     << "NICs per node:        " << hw.nics_per_node() << "\n"
     << "NVLink SHARP:         "
     << (hw.nvls_permille() > 0
             ? str_cat(decimal(static_cast<double>(hw.nvls_permille()) / 10.0, 1), "% efficiency")
             : std::string("none"))
     << "\n"
     << "collectives:          " << to_string(hw.collectives()) << "\n";
  if (const Calibration* c = hw.calibration()) {
    os << "calibration:          measured with " << c->ranks << " rank(s) at once"
       << (c->source.empty() ? "" : ", ") << c->source << "\n"
       << "  copy bandwidth:     "
       << decimal(static_cast<double>(c->copy_bytes_per_s) / 1e9, 3) << " GB/s\n";
    for (const ComputeRate& r : c->compute) {
      os << "  " << to_string(r.kind) << ": "
         << decimal(static_cast<double>(r.flops_per_s) / 1e9, 3) << " GFLOP/s, "
         << decimal(static_cast<double>(r.bytes_per_s) / 1e9, 3) << " GB/s\n";
    }
    for (const CollectiveCurve& curve : c->collectives) {
      os << "  " << to_string(curve.kind) << " on " << curve.ranks << " ranks: "
         << curve.points.size() << " sizes, "
         << decimal(static_cast<double>(curve.points.front().ns) / 1e3, 3) << " us at "
         << curve.points.front().bytes << " B, "
         << decimal(static_cast<double>(curve.points.back().ns) / 1e3, 3) << " us at "
         << curve.points.back().bytes << " B\n";
    }
    os << "  compute slowdown during communication: "
       << decimal(static_cast<double>(c->compute_slowdown_permille) / 1e3, 3) << "x\n";
  }
  if (const ComputeProfile* p = hw.compute_profile()) {
    os << "per-op compute:       " << p->sm_count << " SMs, GEMM tile " << p->gemm_tile_m << "x"
       << p->gemm_tile_n << ", large GEMMs at "
       << decimal(static_cast<double>(p->gemm_permille) / 10.0, 1) << "% of peak, elementwise at "
       << decimal(static_cast<double>(p->elementwise_permille) / 10.0, 1) << "% of HBM\n"
       << "  peak fp8 (dense):   "
       << (p->peak_fp8_flops > 0
               ? decimal(static_cast<double>(p->peak_fp8_flops) / 1e12, 3) +
                     " TFLOP/s, large fp8 GEMMs at " +
                     decimal(static_cast<double>(p->fp8_gemm_relative_permille) / 10.0, 1) +
                     "% of the bf16 GEMMs' share"
               : std::string("none"))
       << "\n"
       << "  flash attention:    "
       << decimal(static_cast<double>(p->attention_forward_flops) / 1e12, 3) << " TFLOP/s forward, "
       << decimal(static_cast<double>(p->attention_backward_flops) / 1e12, 3)
       << " TFLOP/s backward (FlashAttention-2), "
       << decimal(static_cast<double>(p->cudnn_attention_forward_flops) / 1e12, 3) << " / "
       << decimal(static_cast<double>(p->cudnn_attention_backward_flops) / 1e12, 3) << " (cuDNN)\n";
  }
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Hardware& hardware) {
  return os << to_string(hardware);
}

}  // namespace fsdp
