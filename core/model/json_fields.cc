// SPDX-License-Identifier: Apache-2.0
#include "core/model/json_fields.h"

#include <limits>

#include "core/base/strings.h"
#include "core/model/internal/names.h"

namespace fsdp {

using nlohmann::json;

Expected<json> parse_json_text(std::string_view text, std::string_view source) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    // nlohmann prefixes "[json.exception.parse_error.101] "; the rest says where, what was
    // expected and what was read.
    std::string_view what = e.what();
    if (const auto close = what.find("] "); what.starts_with("[json.exception") &&
                                            close != std::string_view::npos) {
      what.remove_prefix(close + 2);
    }
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(internal::printable(source), ": invalid JSON: ",
                         internal::printable(what, 300)));
  }
}

namespace {

std::string describe_scalar(const json& value) {
  if (value.is_string()) {
    return str_cat("\"", internal::printable(value.get_ref<const std::string&>(), 60), "\"");
  }
  // Numbers, booleans and null: nlohmann prints them exactly as JSON.
  return value.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
}

}  // namespace

std::string describe_json(const json& value) {
  if (value.is_object()) {
    return value.empty() ? "an empty object" : str_cat("an object with ", value.size(), " fields");
  }
  if (value.is_array()) {
    if (value.empty()) {
      return "[]";
    }
    bool small = value.size() <= 8;
    for (const json& v : value) {
      small = small && !v.is_structured();
    }
    if (!small) {
      return str_cat("an array of ", value.size(), " elements");
    }
    std::string out = "[";
    for (std::size_t i = 0; i < value.size(); ++i) {
      out += (i == 0 ? "" : ", ") + describe_scalar(value[i]);
    }
    return out + "]";
  }
  if (value.is_binary()) {
    return "binary data";
  }
  return describe_scalar(value);
}

std::string describe_int_bound(std::int64_t min) {
  if (min == 1) {
    return "a positive integer";
  }
  if (min == 0) {
    return "a non-negative integer";
  }
  return str_cat("an integer >= ", min);
}

Error field_error(std::string_view source, std::string_view path, std::string_view expected,
                  std::string_view got, ErrorCode code) {
  const std::string where =
      path.empty() ? std::string("top level") : str_cat("field '", internal::printable(path), "'");
  return Error(code, str_cat(internal::printable(source), ": ", where, ": expected ", expected,
                             ", got ", got));
}

Expected<std::int64_t> json_to_int(const json& value, std::int64_t min, std::string_view source,
                                   std::string_view path) {
  const std::string expected = describe_int_bound(min);
  if (value.is_number_unsigned()) {
    const auto u = value.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return field_error(source, path, str_cat(expected, " that fits int64"), describe_json(value),
                         ErrorCode::kOutOfRange);
    }
  } else if (value.is_number_float()) {
    // Integers beyond uint64 arrive as doubles: report them as out of range, not as fractions.
    const auto d = value.get<double>();
    const bool huge = d >= 9.2e18 || d <= -9.2e18;
    return field_error(source, path, huge ? str_cat(expected, " that fits int64") : expected,
                       describe_json(value),
                       huge ? ErrorCode::kOutOfRange : ErrorCode::kInvalidArgument);
  } else if (!value.is_number_integer()) {
    return field_error(source, path, expected, describe_json(value));
  }
  const auto v = value.get<std::int64_t>();
  if (v < min) {
    return field_error(source, path, expected, describe_json(value));
  }
  return v;
}

Expected<JsonObjectReader> JsonObjectReader::make(const json& value, std::string source,
                                                  std::string path) {
  if (!value.is_object()) {
    return field_error(source, path, "a JSON object", describe_json(value));
  }
  return JsonObjectReader(value, std::move(source), std::move(path));
}

std::string JsonObjectReader::field_path(std::string_view key) const {
  return path_.empty() ? std::string(key) : str_cat(path_, ".", key);
}

Error JsonObjectReader::error(std::string_view key, std::string_view expected, std::string_view got,
                              ErrorCode code) const {
  return field_error(source_, field_path(key), expected, got, code);
}

const json* JsonObjectReader::find(std::string_view key) const {
  const auto it = object_->find(key);
  if (it == object_->end() || it->is_null()) {
    return nullptr;
  }
  return &*it;
}

Expected<std::int64_t> JsonObjectReader::get_int(std::string_view key, std::int64_t min) const {
  const json* v = find(key);
  if (v == nullptr) {
    return error(key, describe_int_bound(min), "nothing (the field is missing)");
  }
  return json_to_int(*v, min, source_, field_path(key));
}

Expected<std::optional<std::int64_t>> JsonObjectReader::get_optional_int(std::string_view key,
                                                                         std::int64_t min) const {
  const json* v = find(key);
  if (v == nullptr) {
    return std::optional<std::int64_t>();
  }
  FSDP_TRY(const std::int64_t i, json_to_int(*v, min, source_, field_path(key)));
  return std::optional<std::int64_t>(i);
}

Expected<std::int64_t> JsonObjectReader::get_int_or(std::string_view key, std::int64_t min,
                                                    std::int64_t fallback) const {
  FSDP_TRY(const std::optional<std::int64_t> v, get_optional_int(key, min));
  return v.value_or(fallback);
}

Expected<bool> JsonObjectReader::get_bool_or(std::string_view key, bool fallback) const {
  const json* v = find(key);
  if (v == nullptr) {
    return fallback;
  }
  if (!v->is_boolean()) {
    return error(key, "true or false", describe_json(*v));
  }
  return v->get<bool>();
}

Expected<std::string> JsonObjectReader::get_string(std::string_view key) const {
  FSDP_TRY(std::optional<std::string> v, get_optional_string(key));
  if (!v) {
    return error(key, "a string", "nothing (the field is missing)");
  }
  return std::move(*v);
}

Expected<std::optional<std::string>> JsonObjectReader::get_optional_string(
    std::string_view key) const {
  const json* v = find(key);
  if (v == nullptr) {
    return std::optional<std::string>();
  }
  if (!v->is_string()) {
    return error(key, "a string", describe_json(*v));
  }
  return std::optional<std::string>(v->get<std::string>());
}

Expected<const json*> JsonObjectReader::get_array(std::string_view key) const {
  const json* v = find(key);
  if (v == nullptr) {
    return error(key, "an array", "nothing (the field is missing)");
  }
  if (!v->is_array()) {
    return error(key, "an array", describe_json(*v));
  }
  return v;
}

Expected<const json*> JsonObjectReader::get_object(std::string_view key) const {
  const json* v = find(key);
  if (v == nullptr) {
    return error(key, "an object", "nothing (the field is missing)");
  }
  if (!v->is_object()) {
    return error(key, "an object", describe_json(*v));
  }
  return v;
}

Status JsonObjectReader::reject_unknown(std::initializer_list<std::string_view> known) const {
  for (const auto& [key, value] : object_->items()) {
    bool ok = false;
    for (const std::string_view k : known) {
      ok = ok || key == k;
    }
    if (!ok) {
      return error(key, str_cat("one of the known fields (", join(known, ", "), ")"),
                   "an unknown field");
    }
  }
  return ok_status();
}

}  // namespace fsdp
