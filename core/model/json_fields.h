// SPDX-License-Identifier: Apache-2.0
// Reading JSON input with one-line errors that name the file, the field, the expected and the
// actual value: "<source>: field 'units[3].params[0].shape[1]': expected a non-negative integer,
// got -4". Shared by the model, hub-config and hardware parsers. No nlohmann exception escapes.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "core/base/expected.h"

#include <nlohmann/json.hpp>

namespace fsdp {

// Parses `text`; a syntax error (or invalid UTF-8) is "<source>: invalid JSON: <parser message>".
Expected<nlohmann::json> parse_json_text(std::string_view text, std::string_view source);

// A short one-line description of a value for error messages: scalars as JSON, strings cut to 60
// characters with control bytes escaped, small arrays of scalars in full, others by size. Never
// recurses into nested values, so hostile nesting depth costs nothing.
std::string describe_json(const nlohmann::json& value);

// A view of one JSON object at a path (e.g. "units[3]") inside a named source. Does not own the
// object; keep it alive while the view is used.
class JsonObjectReader {
 public:
  // Errors unless `value` is an object.
  static Expected<JsonObjectReader> make(const nlohmann::json& value, std::string source,
                                         std::string path);

  const std::string& source() const { return source_; }
  // "path.key" (or "key" at the top level).
  std::string field_path(std::string_view key) const;
  // "<source>: field '<path.key>': expected <expected>, got <got>" (kInvalidArgument).
  Error error(std::string_view key, std::string_view expected, std::string_view got,
              ErrorCode code = ErrorCode::kInvalidArgument) const;

  // The value of `key`, or nullptr when it is absent or null (JSON null means "not given").
  const nlohmann::json* find(std::string_view key) const;

  // Required integer >= min (int64; floats, strings and values beyond int64 are errors).
  Expected<std::int64_t> get_int(std::string_view key, std::int64_t min) const;
  // Optional integer >= min; nullopt when absent or null.
  Expected<std::optional<std::int64_t>> get_optional_int(std::string_view key,
                                                         std::int64_t min) const;
  Expected<std::int64_t> get_int_or(std::string_view key, std::int64_t min,
                                    std::int64_t fallback) const;
  Expected<bool> get_bool_or(std::string_view key, bool fallback) const;
  Expected<std::string> get_string(std::string_view key) const;
  Expected<std::optional<std::string>> get_optional_string(std::string_view key) const;
  // Required array / object.
  Expected<const nlohmann::json*> get_array(std::string_view key) const;
  Expected<const nlohmann::json*> get_object(std::string_view key) const;

  // Errors on the first key (in the object's order) that is not in `known`.
  Status reject_unknown(std::initializer_list<std::string_view> known) const;

 private:
  JsonObjectReader(const nlohmann::json& object, std::string source, std::string path)
      : object_(&object), source_(std::move(source)), path_(std::move(path)) {}

  const nlohmann::json* object_;
  std::string source_;
  std::string path_;
};

// Converts one JSON value to an integer >= min, naming `source` and `path` in the error.
Expected<std::int64_t> json_to_int(const nlohmann::json& value, std::int64_t min,
                                   std::string_view source, std::string_view path);

// "a positive integer", "a non-negative integer" or "an integer >= N".
std::string describe_int_bound(std::int64_t min);

// "<source>: field '<path>': expected <expected>, got <got>"; "top level" when path is empty.
Error field_error(std::string_view source, std::string_view path, std::string_view expected,
                  std::string_view got, ErrorCode code = ErrorCode::kInvalidArgument);

}  // namespace fsdp
