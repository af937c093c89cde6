// SPDX-License-Identifier: Apache-2.0
// The fsdpsim model file: round trips, defaults, and one-line errors naming file, field, expected
// and actual value.
#include "core/model/model_json.h"

#include <string>

#include "core/model/model_loader.h"
#include "core/model/model_presets.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace fsdp {
namespace {

using nlohmann::json;

json tiny() {
  return json::parse(R"({
    "format": "fsdpsim-model", "version": 1, "name": "tiny",
    "units": [
      {"name": "embedding",
       "params": [{"name": "emb.weight", "shape": [100, 8], "dtype": "bf16"}],
       "activation_bytes_per_token": {"stored": 8, "recompute": 8}},
      {"name": "block",
       "params": [{"name": "block.w", "shape": [8, 8], "dtype": "bf16"},
                  {"name": "block.scale", "shape": [8], "dtype": "fp32", "requires_grad": false}],
       "flops_per_token": {"matmul": 128, "attention_per_seq": 32},
       "activation_bytes_per_token": {"stored": 64, "recompute": 16}},
      {"name": "block.inner", "parent": "block",
       "params": [{"name": "block.inner.w", "shape": [8, 2], "dtype": "fp8"}]},
      {"name": "head", "flops_per_token": {"matmul": 1600}}
    ]})");
}

std::string parse_error(const json& doc) {
  const auto m = parse_model_json(doc.dump(), "m.json");
  EXPECT_FALSE(m.has_value());
  return m ? std::string() : m.error().message();
}

TEST(ModelJsonTest, ParsesTheDocumentedFormat) {
  const auto m = parse_model_json(tiny().dump(), "m.json");
  ASSERT_TRUE(m.has_value()) << m.error().message();
  EXPECT_EQ(m->name(), "tiny");
  ASSERT_EQ(m->num_units(), 4);
  EXPECT_EQ(m->units()[2].parent(), 1);
  EXPECT_EQ(m->units()[3].parent(), Unit::kNoParent);
  EXPECT_EQ(m->num_parameters(), 800 + 64 + 8 + 16);
  EXPECT_EQ(m->num_trainable_parameters(), 800 + 64 + 16);
  EXPECT_EQ(m->units()[1].params()[1].dtype(), DType::kFp32);
  EXPECT_TRUE(m->units()[0].params()[0].requires_grad());  // default
  EXPECT_EQ(m->units()[3].params().size(), 0U);
  EXPECT_EQ(m->forward_flops_per_token(10).value(), 128 + 1600 + 320);
}

TEST(ModelJsonTest, RoundTripsToAnEqualModel) {
  const Model m = parse_model_json(tiny().dump(), "m.json").value();
  const std::string text = model_to_json_text(m);
  const auto again = parse_model_json(text, "again.json");
  ASSERT_TRUE(again.has_value()) << again.error().message();
  EXPECT_EQ(*again, m);
}

TEST(ModelJsonTest, ImportedModelsRoundTrip) {
  for (const ModelPreset& p : model_presets()) {
    Model hub = load_model_preset(p.name).value();
    if (p.name == "deepseek-v3") {
      // The whole model is 5 MB of JSON (slow under sanitizers): keep 3 dense + 2 MoE layers.
      std::vector<Unit> units(hub.units().begin(), hub.units().begin() + 6);
      hub = Model::make(hub.name(), std::move(units)).value();
    }
    const auto back = parse_model_json(model_to_json_text(hub, -1), p.name);
    ASSERT_TRUE(back.has_value()) << back.error().message();
    EXPECT_EQ(*back, hub) << p.name;
  }
}

TEST(ModelJsonTest, ReadsTheCheckpointFiguresAndDefaultsOlderFilesToWholeUnits) {
  json doc = tiny();
  doc["units"][1]["activation_bytes_per_token"]["selective_op"] = {
      {"kept", 40}, {"transient", 30}, {"unread", 12}, {"recompute_flops", {{"matmul", 64}}}};
  doc["units"][1]["activation_bytes_per_token"]["core_attention"] = {
      {"kept", 60}, {"transient", 6}, {"recompute_flops", {{"attention_per_seq", 32}}}};
  doc["units"][0]["activation_bytes_per_token"]["block"] = false;
  const Model m = parse_model_json(doc.dump(), "m.json").value();
  const UnitActivations& a = m.units()[1].activations();
  EXPECT_EQ(a.selective_op,
            (CheckpointFigures{.kept = 40, .transient = 30, .flops = {64, 0}, .unread = 12}));
  EXPECT_EQ(a.core_attention, (CheckpointFigures{.kept = 60, .transient = 6, .flops = {0, 32}}));
  EXPECT_TRUE(a.block);
  EXPECT_FALSE(m.units()[0].activations().block);
  // A file without the figures (every file before them) leaves them unknown: the unit can
  // only be recomputed whole (RecomputePolicy's checkpoint_of).
  const Model old = parse_model_json(tiny().dump(), "m.json").value();
  EXPECT_FALSE(old.units()[1].activations().selective_op.has_value());
  EXPECT_FALSE(old.units()[1].activations().core_attention.has_value());
  EXPECT_TRUE(old.units()[0].activations().block);
  // Written back only where present: the old file's text has no new field.
  EXPECT_EQ(model_to_json_text(old).find("selective_op"), std::string::npos);
  EXPECT_EQ(model_to_json_text(old).find("\"block\":"), std::string::npos);
  EXPECT_EQ(parse_model_json(model_to_json_text(m), "again.json").value(), m);
}

TEST(ModelJsonTest, BadCheckpointFiguresAreOneLineErrors) {
  json doc = tiny();
  doc["units"][1]["activation_bytes_per_token"]["selective_op"] = {{"kept", 40}};
  EXPECT_NE(parse_error(doc).find("transient"), std::string::npos) << parse_error(doc);
  doc["units"][1]["activation_bytes_per_token"]["selective_op"] = {{"kept", -1}, {"transient", 0}};
  EXPECT_NE(parse_error(doc).find("kept"), std::string::npos) << parse_error(doc);
  doc["units"][1]["activation_bytes_per_token"]["selective_op"] = {
      {"kept", 1}, {"transient", 0}, {"flops", 3}};
  EXPECT_NE(parse_error(doc).find("flops"), std::string::npos) << parse_error(doc);
  doc["units"][1]["activation_bytes_per_token"]["selective_op"] = {
      {"kept", 1}, {"transient", 0}, {"unread", 2}};
  EXPECT_NE(parse_error(doc).find("unread: expected at most kept (1), got 2"), std::string::npos)
      << parse_error(doc);
  doc["units"][1]["activation_bytes_per_token"].erase("selective_op");
  doc["units"][1]["activation_bytes_per_token"]["block"] = 3;
  EXPECT_NE(parse_error(doc).find("block"), std::string::npos) << parse_error(doc);
}

TEST(ModelJsonTest, LoaderTellsTheKindsApart) {
  EXPECT_EQ(detect_model_file_kind(tiny().dump(), "m.json").value(), ModelFileKind::kModelJson);
  const std::string_view hub = find_model_preset("qwen2.5-7b")->config_json;
  EXPECT_EQ(detect_model_file_kind(hub, "c.json").value(), ModelFileKind::kHubConfig);
  EXPECT_EQ(parse_model_text(hub, "qwen.json").value().num_parameters(), 7'615'616'512);
  EXPECT_EQ(parse_model_text(tiny().dump(), "m.json").value().name(), "tiny");
  const auto neither = parse_model_text(R"({"units": []})", "x.json");
  ASSERT_FALSE(neither.has_value());
  EXPECT_EQ(neither.error().message(),
            "x.json: top level: expected a hub config.json (with \"model_type\") or an fsdpsim "
            "model file (with \"format\": \"fsdpsim-model\"), got an object with 1 fields");
  const auto missing = load_model_file("/nonexistent/model.json");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().message().rfind("/nonexistent/model.json: cannot open the file", 0),
            0U);
}

TEST(ModelJsonErrorTest, MissingFields) {
  json d = tiny();
  d.erase("name");
  EXPECT_EQ(parse_error(d),
            "m.json: field 'name': expected a string, got nothing (the field is missing)");
  d = tiny();
  d["units"][1]["params"][0].erase("shape");
  EXPECT_EQ(parse_error(d),
            "m.json: field 'units[1].params[0].shape': expected an array, got nothing (the field "
            "is missing)");
  d = tiny();
  d["units"][0]["params"][0].erase("dtype");
  EXPECT_EQ(parse_error(d),
            "m.json: field 'units[0].params[0].dtype': expected a string, got nothing (the field "
            "is missing)");
}

TEST(ModelJsonErrorTest, NegativeAndMistypedValues) {
  json d = tiny();
  d["units"][1]["params"][0]["shape"][1] = -4;
  EXPECT_EQ(parse_error(d),
            "m.json: field 'units[1].params[0].shape[1]': expected a non-negative integer, got -4");
  d = tiny();
  d["units"][1]["flops_per_token"]["matmul"] = -1;
  EXPECT_EQ(parse_error(d),
            "m.json: field 'units[1].flops_per_token.matmul': expected a non-negative integer, "
            "got -1");
  d = tiny();
  d["units"][1]["activation_bytes_per_token"]["stored"] = "lots";
  EXPECT_EQ(parse_error(d),
            "m.json: field 'units[1].activation_bytes_per_token.stored': expected a non-negative "
            "integer, got \"lots\"");
  d = tiny();
  d["units"][0]["params"][0]["dtype"] = "int8";
  EXPECT_EQ(parse_error(d),
            "m.json: field 'units[0].params[0].dtype': expected one of bf16, fp16, fp32, fp8, got "
            "\"int8\"");
  d = tiny();
  d["units"][0]["params"][0]["requires_grad"] = 1;
  EXPECT_EQ(parse_error(d),
            "m.json: field 'units[0].params[0].requires_grad': expected true or false, got 1");
  d = tiny();
  d["units"] = json::object();
  EXPECT_EQ(parse_error(d), "m.json: field 'units': expected an array, got an empty object");
}

TEST(ModelJsonErrorTest, ContradictoryStructure) {
  json d = tiny();
  d["units"][2]["parent"] = "head";  // a later unit
  EXPECT_EQ(parse_error(d),
            "m.json: field 'units[2].parent': expected the name of an earlier unit, got \"head\"");
  d = tiny();
  d["units"][3]["name"] = "block";
  EXPECT_EQ(parse_error(d),
            "m.json: field 'units[3].name': expected a name no earlier unit has, got 'block' "
            "again");
  d = tiny();
  d["units"][3]["params"] = json::parse(R"([{"name": "emb.weight", "shape": [1], "dtype": "bf16"}])");
  EXPECT_EQ(parse_error(d),
            "m.json: model 'tiny': parameter names: expected unique names, got 'emb.weight' in "
            "units 'embedding' and 'head'");
  d = tiny();
  d["units"][1]["params"][1]["name"] = "block.w";
  EXPECT_EQ(parse_error(d),
            "m.json: field 'units[1]': unit 'block': parameter names: expected unique names, got "
            "'block.w' twice");
  d = tiny();
  d["format"] = "other";
  EXPECT_EQ(parse_error(d), "m.json: field 'format': expected \"fsdpsim-model\", got \"other\"");
  d = tiny();
  d["version"] = 2;
  EXPECT_EQ(parse_error(d), "m.json: field 'version': expected 1, got 2");
  d = tiny();
  d["units"] = json::array();
  EXPECT_EQ(parse_error(d), "m.json: field 'units': expected at least one unit, got []");
}

TEST(ModelJsonErrorTest, UnknownFieldsAreRejected) {
  json d = tiny();
  d["units"][0]["flops"] = 3;
  EXPECT_EQ(parse_error(d),
            "m.json: field 'units[0].flops': expected one of the known fields (name, parent, "
            "params, flops_per_token, activation_bytes_per_token, work), got an unknown field");
}

TEST(ModelJsonErrorTest, SizesThatOverflowInt64) {
  json d = tiny();
  d["units"][1]["params"][0]["shape"] = json::parse("[4294967296, 4294967296]");
  EXPECT_EQ(parse_error(d),
            "m.json: field 'units[1].params[0].shape': expected a shape whose element count fits "
            "int64, got [4294967296, 4294967296]");
  d = tiny();
  d["units"][1]["params"][0]["shape"] = json::parse("[9223372036854775808]");
  EXPECT_EQ(parse_error(d),
            "m.json: field 'units[1].params[0].shape[0]': expected a non-negative integer that "
            "fits int64, got 9223372036854775808");
  d = tiny();
  d["units"][1]["flops_per_token"]["matmul"] = 9223372036854775807LL;
  d["units"][3]["flops_per_token"]["matmul"] = 9223372036854775807LL;
  const std::string e = parse_error(d);
  EXPECT_EQ(e,
            "m.json: model 'tiny': unit 'head': total FLOPs: expected a value that fits int64, got "
            "an overflow");
}

TEST(ModelJsonErrorTest, MalformedJson) {
  const auto m = parse_model_json("{\"format\": \"fsdpsim-model\",", "m.json");
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.error().message().rfind("m.json: invalid JSON: parse error at line 1", 0), 0U)
      << m.error().message();
  const auto bad_utf8 = parse_model_json("{\"name\": \"\xff\"}", "m.json");
  ASSERT_FALSE(bad_utf8.has_value());
  EXPECT_EQ(bad_utf8.error().message().find('\n'), std::string::npos);
}

}  // namespace
}  // namespace fsdp
