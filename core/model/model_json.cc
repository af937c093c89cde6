// SPDX-License-Identifier: Apache-2.0
#include "core/model/model_json.h"

#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/base/strings.h"
#include "core/model/json_fields.h"

namespace fsdp {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

Expected<Shape> parse_shape_field(const JsonObjectReader& r) {
  FSDP_TRY(const json* dims, r.get_array("shape"));
  const std::string path = r.field_path("shape");
  if (dims->size() > static_cast<std::size_t>(Shape::kMaxDims)) {
    return field_error(r.source(), path, str_cat("at most ", Shape::kMaxDims, " dims"),
                       describe_json(*dims));
  }
  std::vector<std::int64_t> values;
  for (std::size_t i = 0; i < dims->size(); ++i) {
    FSDP_TRY(const std::int64_t d,
             json_to_int((*dims)[i], 0, r.source(), str_cat(path, "[", i, "]")));
    values.push_back(d);
  }
  auto shape = Shape::make(values);
  if (!shape) {
    // Only the numel overflow is left to fail here.
    return field_error(r.source(), path, "a shape whose element count fits int64",
                       describe_json(*dims), shape.error().code());
  }
  return shape;
}

Expected<Param> parse_param(const json& value, const std::string& source, const std::string& path) {
  FSDP_TRY(const JsonObjectReader r, JsonObjectReader::make(value, source, path));
  FSDP_RETURN_IF_ERROR(r.reject_unknown({"name", "shape", "dtype", "requires_grad", "expert"}));
  FSDP_TRY(std::string name, r.get_string("name"));
  FSDP_TRY(const Shape shape, parse_shape_field(r));
  FSDP_TRY(const std::string dtype_text, r.get_string("dtype"));
  auto dtype = parse_dtype(dtype_text);
  if (!dtype) {
    return r.error("dtype", "one of bf16, fp16, fp32, fp8", describe_json(*r.find("dtype")));
  }
  FSDP_TRY(const bool requires_grad, r.get_bool_or("requires_grad", true));
  FSDP_TRY(const bool expert, r.get_bool_or("expert", false));
  auto param = Param::make(std::move(name), shape, *dtype, requires_grad, expert);
  if (!param) {
    return param.error().with_context(str_cat(source, ": field '", path, "'"));
  }
  return param;
}

// The optional "work" object of a unit (UnitWork): GEMM shapes, attention core, elementwise bytes.
Expected<UnitWork> parse_work(const JsonObjectReader& unit_reader, const std::string& source) {
  UnitWork work;
  FSDP_TRY(const json* obj, unit_reader.get_object("work"));
  const std::string path = unit_reader.field_path("work");
  FSDP_TRY(const JsonObjectReader r, JsonObjectReader::make(*obj, source, path));
  FSDP_RETURN_IF_ERROR(
      r.reject_unknown({"gemms", "attention", "elementwise_bytes", "fused_elementwise_bytes",
                        "te_elementwise_bytes", "collectives"}));
  if (r.find("gemms") != nullptr) {
    FSDP_TRY(const json* list, r.get_array("gemms"));
    for (std::size_t i = 0; i < list->size(); ++i) {
      FSDP_TRY(
          const JsonObjectReader g,
          JsonObjectReader::make((*list)[i], source, str_cat(r.field_path("gemms"), "[", i, "]")));
      FSDP_RETURN_IF_ERROR(g.reject_unknown(
          {"n", "k", "count", "rows_num", "rows_den", "input_group", "output_head"}));
      GemmShape shape;
      FSDP_TRY(shape.n, g.get_int("n", 1));
      FSDP_TRY(shape.k, g.get_int("k", 1));
      FSDP_TRY(shape.count, g.get_int_or("count", 1, 1));
      FSDP_TRY(shape.rows_num, g.get_int_or("rows_num", 1, 1));
      FSDP_TRY(shape.rows_den, g.get_int_or("rows_den", 1, 1));
      FSDP_TRY(shape.input_group, g.get_int_or("input_group", 0, 0));
      FSDP_TRY(shape.output_head, g.get_bool_or("output_head", false));
      work.gemms.push_back(shape);
    }
  }
  if (r.find("attention") != nullptr) {
    FSDP_TRY(const json* att, r.get_object("attention"));
    FSDP_TRY(const JsonObjectReader a,
             JsonObjectReader::make(*att, source, r.field_path("attention")));
    FSDP_RETURN_IF_ERROR(a.reject_unknown({"heads", "qk_head_dim", "v_head_dim", "causal"}));
    FSDP_TRY(work.attention.heads, a.get_int("heads", 1));
    FSDP_TRY(work.attention.qk_head_dim, a.get_int("qk_head_dim", 1));
    FSDP_TRY(work.attention.v_head_dim, a.get_int("v_head_dim", 1));
    FSDP_TRY(work.attention.causal, a.get_bool_or("causal", true));
  }
  FSDP_TRY(work.elementwise_bytes, r.get_int_or("elementwise_bytes", 0, 0));
  FSDP_TRY(work.fused_elementwise_bytes,
           r.get_int_or("fused_elementwise_bytes", 0, work.elementwise_bytes));
  FSDP_TRY(work.te_elementwise_bytes,
           r.get_int_or("te_elementwise_bytes", 0, work.fused_elementwise_bytes));
  if (r.find("collectives") != nullptr) {
    FSDP_TRY(const json* list, r.get_array("collectives"));
    for (std::size_t i = 0; i < list->size(); ++i) {
      const std::string at = str_cat(r.field_path("collectives"), "[", i, "]");
      FSDP_TRY(const JsonObjectReader c, JsonObjectReader::make((*list)[i], source, at));
      FSDP_RETURN_IF_ERROR(c.reject_unknown(
          {"pass", "kind", "axis", "site", "elements_per_token", "token_divisor"}));
      ActivationCollective a;
      FSDP_TRY(const std::string pass, c.get_string("pass"));
      FSDP_TRY(const std::string kind, c.get_string("kind"));
      FSDP_TRY(const std::string axis, c.get_string("axis"));
      bool known = false;
      for (const CollectivePass p : {CollectivePass::kForward, CollectivePass::kBackward}) {
        if (pass == to_string(p)) {
          a.pass = p;
          known = true;
        }
      }
      if (!known) {
        return c.error("pass", "forward or backward", str_cat("'", pass, "'"));
      }
      known = false;
      for (const ActivationCollectiveKind k :
           {ActivationCollectiveKind::kAllReduce, ActivationCollectiveKind::kAllGather,
            ActivationCollectiveKind::kReduceScatter, ActivationCollectiveKind::kAllToAll}) {
        if (kind == to_string(k)) {
          a.kind = k;
          known = true;
        }
      }
      if (!known) {
        return c.error("kind", "all-reduce, all-gather, reduce-scatter or all-to-all",
                       str_cat("'", kind, "'"));
      }
      if (axis != "tp" && axis != "ep") {
        return c.error("axis", "tp or ep", str_cat("'", axis, "'"));
      }
      a.axis = axis == "tp" ? ParallelAxis::kTensor : ParallelAxis::kExpert;
      FSDP_TRY(a.site, c.get_string("site"));
      FSDP_TRY(a.elements_per_token, c.get_int("elements_per_token", 1));
      FSDP_TRY(a.token_divisor, c.get_int_or("token_divisor", 1, 1));
      work.collectives.push_back(std::move(a));
    }
  }
  return work;
}

ordered_json work_to_json(const UnitWork& work) {
  ordered_json gemms = ordered_json::array();
  for (const GemmShape& g : work.gemms) {
    ordered_json e = {{"n", g.n}, {"k", g.k}, {"count", g.count}};
    if (g.rows_num != 1 || g.rows_den != 1) {
      e["rows_num"] = g.rows_num;
      e["rows_den"] = g.rows_den;
    }
    if (g.input_group != 0) {
      e["input_group"] = g.input_group;
    }
    if (g.output_head) {
      e["output_head"] = true;
    }
    gemms.push_back(std::move(e));
  }
  ordered_json out = {{"gemms", std::move(gemms)}};
  if (work.attention.heads > 0) {
    out["attention"] = {{"heads", work.attention.heads},
                        {"qk_head_dim", work.attention.qk_head_dim},
                        {"v_head_dim", work.attention.v_head_dim},
                        {"causal", work.attention.causal}};
  }
  out["elementwise_bytes"] = work.elementwise_bytes;
  out["fused_elementwise_bytes"] = work.fused_elementwise_bytes;
  out["te_elementwise_bytes"] = work.te_elementwise_bytes;
  if (!work.collectives.empty()) {
    ordered_json list = ordered_json::array();
    for (const ActivationCollective& c : work.collectives) {
      ordered_json e = {{"pass", to_string(c.pass)},
                        {"kind", to_string(c.kind)},
                        {"axis", to_string(c.axis)},
                        {"site", c.site},
                        {"elements_per_token", c.elements_per_token}};
      if (c.token_divisor != 1) {
        e["token_divisor"] = c.token_divisor;
      }
      list.push_back(std::move(e));
    }
    out["collectives"] = std::move(list);
  }
  return out;
}

// An optional per-mode figure block {"kept", "transient", "recompute_flops": {"matmul",
// "attention_per_seq"}} of activation_bytes_per_token; absent: nullopt (the unit is recomputed
// whole in that mode, docs/models.md).
Expected<std::optional<CheckpointFigures>> read_checkpoint_figures(const JsonObjectReader& a,
                                                                   std::string_view key,
                                                                   const std::string& source) {
  if (a.find(key) == nullptr) {
    return std::optional<CheckpointFigures>();
  }
  FSDP_TRY(const json* obj, a.get_object(key));
  FSDP_TRY(const JsonObjectReader r, JsonObjectReader::make(*obj, source, a.field_path(key)));
  FSDP_RETURN_IF_ERROR(r.reject_unknown({"kept", "transient", "unread", "recompute_flops"}));
  CheckpointFigures f;
  FSDP_TRY(f.kept, r.get_int("kept", 0));
  FSDP_TRY(f.transient, r.get_int("transient", 0));
  FSDP_TRY(f.unread, r.get_int_or("unread", 0, 0));
  if (r.find("recompute_flops") != nullptr) {
    FSDP_TRY(const json* fl, r.get_object("recompute_flops"));
    FSDP_TRY(const JsonObjectReader fr,
             JsonObjectReader::make(*fl, source, r.field_path("recompute_flops")));
    FSDP_RETURN_IF_ERROR(fr.reject_unknown({"matmul", "attention_per_seq"}));
    FSDP_TRY(f.flops.matmul, fr.get_int_or("matmul", 0, 0));
    FSDP_TRY(f.flops.attention_per_seq, fr.get_int_or("attention_per_seq", 0, 0));
  }
  return std::optional<CheckpointFigures>(f);
}

Expected<Unit> parse_unit(const json& value, const std::string& source, const std::string& path,
                          const std::unordered_map<std::string, std::int32_t>& earlier) {
  FSDP_TRY(const JsonObjectReader r, JsonObjectReader::make(value, source, path));
  FSDP_RETURN_IF_ERROR(r.reject_unknown(
      {"name", "parent", "params", "flops_per_token", "activation_bytes_per_token", "work"}));
  FSDP_TRY(std::string name, r.get_string("name"));
  std::int32_t parent = Unit::kNoParent;
  FSDP_TRY(const std::optional<std::string> parent_name, r.get_optional_string("parent"));
  if (parent_name) {
    const auto it = earlier.find(*parent_name);
    if (it == earlier.end()) {
      return r.error("parent", "the name of an earlier unit", describe_json(*r.find("parent")));
    }
    parent = it->second;
  }
  std::vector<Param> params;
  if (r.find("params") != nullptr) {
    FSDP_TRY(const json* list, r.get_array("params"));
    params.reserve(list->size());
    for (std::size_t i = 0; i < list->size(); ++i) {
      FSDP_TRY(Param p, parse_param((*list)[i], source, str_cat(r.field_path("params"), "[", i, "]")));
      params.push_back(std::move(p));
    }
  }
  UnitFlops flops;
  if (r.find("flops_per_token") != nullptr) {
    FSDP_TRY(const json* obj, r.get_object("flops_per_token"));
    FSDP_TRY(const JsonObjectReader f,
             JsonObjectReader::make(*obj, source, r.field_path("flops_per_token")));
    FSDP_RETURN_IF_ERROR(f.reject_unknown({"matmul", "attention_per_seq"}));
    FSDP_TRY(flops.matmul, f.get_int_or("matmul", 0, 0));
    FSDP_TRY(flops.attention_per_seq, f.get_int_or("attention_per_seq", 0, 0));
  }
  UnitActivations activations;
  if (r.find("activation_bytes_per_token") != nullptr) {
    FSDP_TRY(const json* obj, r.get_object("activation_bytes_per_token"));
    FSDP_TRY(const JsonObjectReader a,
             JsonObjectReader::make(*obj, source, r.field_path("activation_bytes_per_token")));
    FSDP_RETURN_IF_ERROR(a.reject_unknown(
        {"stored", "recompute", "selective_op", "core_attention", "block", "loss_logits"}));
    FSDP_TRY(activations.stored, a.get_int_or("stored", 0, 0));
    FSDP_TRY(activations.recompute, a.get_int_or("recompute", 0, 0));
    FSDP_TRY(activations.selective_op, read_checkpoint_figures(a, "selective_op", source));
    FSDP_TRY(activations.core_attention, read_checkpoint_figures(a, "core_attention", source));
    FSDP_TRY(activations.block, a.get_bool_or("block", true));
    FSDP_TRY(activations.loss_logits, a.get_int_or("loss_logits", 0, 0));
  }
  UnitWork work;
  if (r.find("work") != nullptr) {
    FSDP_TRY(work, parse_work(r, source));
  }
  auto unit =
      Unit::make(std::move(name), parent, std::move(params), flops, activations, std::move(work));
  if (!unit) {
    return unit.error().with_context(str_cat(source, ": field '", path, "'"));
  }
  return unit;
}

Expected<Model> model_from_json_impl(const json& doc, const std::string& source) {
  FSDP_TRY(const JsonObjectReader r, JsonObjectReader::make(doc, source, ""));
  FSDP_RETURN_IF_ERROR(r.reject_unknown({"format", "version", "name", "units"}));
  FSDP_TRY(const std::string format, r.get_string("format"));
  if (format != kModelFormatName) {
    return r.error("format", str_cat("\"", kModelFormatName, "\""), describe_json(*r.find("format")));
  }
  FSDP_TRY(const std::int64_t version, r.get_int("version", 1));
  if (version != kModelFormatVersion) {
    return r.error("version", str_cat(kModelFormatVersion), str_cat(version));
  }
  FSDP_TRY(std::string name, r.get_string("name"));
  FSDP_TRY(const json* list, r.get_array("units"));
  if (list->empty()) {
    return r.error("units", "at least one unit", "[]");
  }
  std::vector<Unit> units;
  units.reserve(list->size());
  std::unordered_map<std::string, std::int32_t> earlier;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const std::string path = str_cat("units[", i, "]");
    FSDP_TRY(Unit u, parse_unit((*list)[i], source, path, earlier));
    if (!earlier.emplace(u.name(), static_cast<std::int32_t>(i)).second) {
      return field_error(source, str_cat(path, ".name"), "a name no earlier unit has",
                         str_cat("'", u.name(), "' again"));
    }
    units.push_back(std::move(u));
  }
  auto model = Model::make(std::move(name), std::move(units));
  if (!model) {
    return model.error().with_context(source);
  }
  return model;
}

}  // namespace

Expected<Model> model_from_json(const json& doc, std::string_view source) {
  try {
    return model_from_json_impl(doc, std::string(source));
  } catch (const std::exception& e) {
    return Error(ErrorCode::kInternal, str_cat(source, ": unexpected error: ", e.what()));
  }
}

Expected<Model> parse_model_json(std::string_view text, std::string_view source) {
  FSDP_TRY(const json doc, parse_json_text(text, source));
  return model_from_json(doc, source);
}

ordered_json model_to_json(const Model& model) {
  ordered_json units = ordered_json::array();
  for (const Unit& u : model.units()) {
    ordered_json params = ordered_json::array();
    for (const Param& p : u.params()) {
      ordered_json shape = ordered_json::array();
      for (const std::int64_t d : p.shape().dims()) {
        shape.push_back(d);
      }
      ordered_json entry = {{"name", p.name()},
                            {"shape", std::move(shape)},
                            {"dtype", std::string(to_string(p.dtype()))},
                            {"requires_grad", p.requires_grad()}};
      if (p.expert()) {
        entry["expert"] = true;
      }
      params.push_back(std::move(entry));
    }
    ordered_json unit = {{"name", u.name()}};
    if (u.parent() != Unit::kNoParent) {
      unit["parent"] = model.units()[static_cast<std::size_t>(u.parent())].name();
    }
    unit["params"] = std::move(params);
    unit["flops_per_token"] = {{"matmul", u.flops().matmul},
                               {"attention_per_seq", u.flops().attention_per_seq}};
    const UnitActivations& a = u.activations();
    ordered_json activations = {{"stored", a.stored}, {"recompute", a.recompute}};
    for (const auto& [key, figures] : {std::pair{"selective_op", &a.selective_op},
                                       std::pair{"core_attention", &a.core_attention}}) {
      if (figures->has_value()) {
        activations[key] = {{"kept", (*figures)->kept},
                            {"transient", (*figures)->transient},
                            {"recompute_flops",
                             {{"matmul", (*figures)->flops.matmul},
                              {"attention_per_seq", (*figures)->flops.attention_per_seq}}}};
        if ((*figures)->unread != 0) {
          activations[key]["unread"] = (*figures)->unread;
        }
      }
    }
    if (!a.block) {
      activations["block"] = false;
    }
    if (a.loss_logits != 0) {
      activations["loss_logits"] = a.loss_logits;
    }
    unit["activation_bytes_per_token"] = std::move(activations);
    if (!u.work().empty() || !u.work().collectives.empty()) {
      unit["work"] = work_to_json(u.work());
    }
    units.push_back(std::move(unit));
  }
  return ordered_json{{"format", std::string(kModelFormatName)},
              {"version", kModelFormatVersion},
              {"name", model.name()},
              {"units", std::move(units)}};
}

std::string model_to_json_text(const Model& model, int indent) {
  return model_to_json(model).dump(indent, ' ', /*ensure_ascii=*/false,
                                   ordered_json::error_handler_t::replace);
}

}  // namespace fsdp
