// SPDX-License-Identifier: Apache-2.0
#include "core/hardware/calibration_json.h"

#include <string>
#include <utility>

#include "core/base/strings.h"
#include "core/model/json_fields.h"

namespace fsdp {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

constexpr OpKind kComputeKinds[] = {OpKind::kForward,  OpKind::kBackward, OpKind::kRecompute,
                                    OpKind::kGradCopy, OpKind::kCast,     OpKind::kOptimizerStep};
constexpr OpKind kCollectiveKinds[] = {OpKind::kAllGather, OpKind::kReduceScatter,
                                       OpKind::kAllReduce};

// The op kind named `key` of `r`, one of `kinds`.
template <std::size_t N>
Expected<OpKind> get_kind(const JsonObjectReader& r, std::string_view key,
                          const OpKind (&kinds)[N]) {
  FSDP_TRY(const std::string name, r.get_string(key));
  std::string names;
  for (const OpKind k : kinds) {
    if (name == to_string(k)) {
      return k;
    }
    names += str_cat(names.empty() ? "" : ", ", to_string(k));
  }
  return r.error(key, str_cat("one of ", names), describe_json(*r.find(key)));
}

// The array `key` of `r`, or an empty one when absent.
Expected<json> get_optional_array(const JsonObjectReader& r, std::string_view key) {
  if (r.find(key) == nullptr) {
    return json::array();
  }
  FSDP_TRY(const json* array, r.get_array(key));
  return *array;
}

std::string at(std::string_view key, std::size_t i) {
  return str_cat("calibration.", key, "[", i, "]");
}

Expected<ComputeRate> compute_from_json(const json& v, std::string_view source, std::string path) {
  FSDP_TRY(const JsonObjectReader r, JsonObjectReader::make(v, std::string(source), path));
  FSDP_RETURN_IF_ERROR(r.reject_unknown({"op", "flops_per_s", "bytes_per_s"}));
  ComputeRate rate;
  FSDP_TRY(rate.kind, get_kind(r, "op", kComputeKinds));
  FSDP_TRY(rate.flops_per_s, r.get_int_or("flops_per_s", 0, 0));
  FSDP_TRY(rate.bytes_per_s, r.get_int_or("bytes_per_s", 0, 0));
  return rate;
}

Expected<CollectiveCurve> curve_from_json(const json& v, std::string_view source,
                                          const std::string& path) {
  FSDP_TRY(const JsonObjectReader r, JsonObjectReader::make(v, std::string(source), path));
  FSDP_RETURN_IF_ERROR(r.reject_unknown({"op", "ranks", "points"}));
  CollectiveCurve curve;
  FSDP_TRY(curve.kind, get_kind(r, "op", kCollectiveKinds));
  FSDP_TRY(curve.ranks, r.get_int("ranks", 2));
  FSDP_TRY(const json* points, r.get_array("points"));
  for (std::size_t i = 0; i < points->size(); ++i) {
    FSDP_TRY(const JsonObjectReader p,
             JsonObjectReader::make((*points)[i], std::string(source),
                                    str_cat(path, ".points[", i, "]")));
    FSDP_RETURN_IF_ERROR(p.reject_unknown({"bytes", "ns"}));
    CollectivePoint point;
    FSDP_TRY(point.bytes, p.get_int("bytes", 1));
    FSDP_TRY(point.ns, p.get_int("ns", 0));
    curve.points.push_back(point);
  }
  return curve;
}

Expected<MatmulRate> matmul_from_json(const json& v, std::string_view source, std::string path) {
  FSDP_TRY(const JsonObjectReader r, JsonObjectReader::make(v, std::string(source), path));
  FSDP_RETURN_IF_ERROR(r.reject_unknown({"m", "n", "k", "flops_per_s"}));
  MatmulRate m;
  FSDP_TRY(m.m, r.get_int("m", 1));
  FSDP_TRY(m.n, r.get_int("n", 1));
  FSDP_TRY(m.k, r.get_int("k", 1));
  FSDP_TRY(m.flops_per_s, r.get_int("flops_per_s", 1));
  return m;
}

}  // namespace

Expected<Calibration> calibration_from_json(const json& value, std::string_view source) {
  FSDP_TRY(const JsonObjectReader r,
           JsonObjectReader::make(value, std::string(source), "calibration"));
  FSDP_RETURN_IF_ERROR(r.reject_unknown({"source", "ranks", "copy_bytes_per_s",
                                         "compute_slowdown_permille", "compute", "collectives",
                                         "matmuls"}));
  Calibration c;
  FSDP_TRY(const std::optional<std::string> text, r.get_optional_string("source"));
  c.source = text.value_or("");
  FSDP_TRY(c.ranks, r.get_int("ranks", 1));
  FSDP_TRY(c.copy_bytes_per_s, r.get_int("copy_bytes_per_s", 1));
  FSDP_TRY(c.compute_slowdown_permille, r.get_int_or("compute_slowdown_permille", 1000, 1000));
  FSDP_TRY(const json compute, get_optional_array(r, "compute"));
  for (std::size_t i = 0; i < compute.size(); ++i) {
    FSDP_TRY(ComputeRate rate, compute_from_json(compute[i], source, at("compute", i)));
    c.compute.push_back(rate);
  }
  FSDP_TRY(const json collectives, get_optional_array(r, "collectives"));
  for (std::size_t i = 0; i < collectives.size(); ++i) {
    FSDP_TRY(CollectiveCurve curve, curve_from_json(collectives[i], source, at("collectives", i)));
    c.collectives.push_back(std::move(curve));
  }
  FSDP_TRY(const json matmuls, get_optional_array(r, "matmuls"));
  for (std::size_t i = 0; i < matmuls.size(); ++i) {
    FSDP_TRY(MatmulRate m, matmul_from_json(matmuls[i], source, at("matmuls", i)));
    c.matmuls.push_back(m);
  }
  if (Status s = validate_calibration(c); !s.ok()) {
    return s.error().with_context(source);
  }
  return c;
}

ordered_json calibration_to_json(const Calibration& c) {
  ordered_json compute = ordered_json::array();
  for (const ComputeRate& r : c.compute) {
    compute.push_back(ordered_json{{"op", std::string(to_string(r.kind))},
                                   {"flops_per_s", r.flops_per_s},
                                   {"bytes_per_s", r.bytes_per_s}});
  }
  ordered_json collectives = ordered_json::array();
  for (const CollectiveCurve& curve : c.collectives) {
    ordered_json points = ordered_json::array();
    for (const CollectivePoint& p : curve.points) {
      points.push_back(ordered_json{{"bytes", p.bytes}, {"ns", p.ns}});
    }
    collectives.push_back(ordered_json{{"op", std::string(to_string(curve.kind))},
                                       {"ranks", curve.ranks},
                                       {"points", std::move(points)}});
  }
  ordered_json matmuls = ordered_json::array();
  for (const MatmulRate& m : c.matmuls) {
    matmuls.push_back(
        ordered_json{{"m", m.m}, {"n", m.n}, {"k", m.k}, {"flops_per_s", m.flops_per_s}});
  }
  return ordered_json{{"source", c.source},
                      {"ranks", c.ranks},
                      {"copy_bytes_per_s", c.copy_bytes_per_s},
                      {"compute_slowdown_permille", c.compute_slowdown_permille},
                      {"compute", std::move(compute)},
                      {"collectives", std::move(collectives)},
                      {"matmuls", std::move(matmuls)}};
}

}  // namespace fsdp
