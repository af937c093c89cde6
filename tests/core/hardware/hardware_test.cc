// SPDX-License-Identifier: Apache-2.0
// Hardware: the factory's checks, the presets' datasheet figures, and the JSON form.
#include "core/hardware/hardware.h"

#include "core/hardware/hardware_json.h"
#include "core/hardware/hardware_presets.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace fsdp {
namespace {

using nlohmann::json;

TEST(HardwareTest, PresetsCarryTheirDatasheetFigures) {
  ASSERT_EQ(hardware_presets().size(), 7U);
  const Hardware h100 = find_hardware_preset("h100").value();
  EXPECT_EQ(h100.devices_per_node(), 8);
  EXPECT_EQ(h100.memory_bytes(), 80LL << 30);
  EXPECT_EQ(h100.peak_bf16_flops(), 989'500'000'000'000);
  EXPECT_EQ(h100.peak_fp32_flops(), 67'000'000'000'000);
  EXPECT_EQ(h100.hbm_bytes_per_s(), 3'350'000'000'000);
  EXPECT_EQ(h100.intra_node_bytes_per_s(), 450'000'000'000);
  EXPECT_EQ(h100.inter_node_bytes_per_s(), 50'000'000'000);  // 400 Gb/s NDR per GPU
  const Hardware a100 = find_hardware_preset("a100").value();
  EXPECT_EQ(a100.peak_bf16_flops(), 312'000'000'000'000);
  EXPECT_EQ(a100.peak_fp32_flops(), 19'500'000'000'000);
  EXPECT_EQ(a100.inter_node_bytes_per_s(), 25'000'000'000);  // 200 Gb/s HDR per GPU
  const Hardware h200 = find_hardware_preset("h200").value();
  EXPECT_EQ(h200.memory_bytes(), 141LL << 30);
  EXPECT_EQ(h200.hbm_bytes_per_s(), 4'800'000'000'000);
  const Hardware b200 = find_hardware_preset("b200").value();
  EXPECT_EQ(b200.peak_bf16_flops(), 2'250'000'000'000'000);
  EXPECT_EQ(b200.intra_node_bytes_per_s(), 900'000'000'000);
  EXPECT_EQ(b200.memory_bytes(), 180LL << 30);
}

TEST(HardwareTest, UnknownPresetListsTheNames) {
  const auto hw = find_hardware_preset("tpu");
  ASSERT_FALSE(hw.has_value());
  EXPECT_EQ(hw.error().message(),
            "hardware preset: expected one of a100, a100-40gb, h100, h100-96gb, h200, b200, gb200, "
            "got 'tpu'");
}

TEST(HardwareTest, FactoryRejectsNonPositiveFigures) {
  HardwareSpec spec = find_hardware_preset("h100")->spec();
  spec.memory_bytes = 0;
  auto hw = Hardware::make(spec);
  ASSERT_FALSE(hw.has_value());
  EXPECT_EQ(hw.error().message(),
            "hardware 'h100': field 'memory_bytes': expected a positive integer, got 0");
  spec = find_hardware_preset("h100")->spec();
  spec.inter_node_latency_ns = -5;
  hw = Hardware::make(spec);
  ASSERT_FALSE(hw.has_value());
  EXPECT_EQ(hw.error().message(),
            "hardware 'h100': field 'inter_node_latency_ns': expected a non-negative integer, "
            "got -5");
  spec.name = "";
  EXPECT_FALSE(Hardware::make(spec).has_value());
}

TEST(HardwareTest, TextShowsHumanUnits) {
  const std::string text = to_string(find_hardware_preset("a100").value());
  EXPECT_NE(text.find("memory per device:    80 GiB"), std::string::npos) << text;
  EXPECT_NE(text.find("peak bf16 (dense):    312 TFLOP/s"), std::string::npos) << text;
  EXPECT_NE(text.find("peak fp32:            19.5 TFLOP/s"), std::string::npos) << text;
  EXPECT_NE(text.find("inter-node bandwidth: 25 GB/s"), std::string::npos) << text;
}

TEST(HardwareJsonTest, PresetsRoundTrip) {
  for (const Hardware& hw : hardware_presets()) {
    const auto back = parse_hardware_json(hardware_to_json_text(hw), hw.name());
    ASSERT_TRUE(back.has_value()) << back.error().message();
    EXPECT_EQ(*back, hw);
  }
}

json custom() {
  return json::parse(R"({
    "name": "lab", "devices_per_node": 4, "memory_bytes": 25769803776,
    "peak_bf16_flops": 100000000000000, "peak_fp32_flops": 20000000000000,
    "hbm_bytes_per_s": 900000000000, "intra_node_bytes_per_s": 64000000000,
    "intra_node_latency_ns": 2000, "inter_node_bytes_per_s": 12500000000,
    "inter_node_latency_ns": 8000})");
}

std::string parse_error(const json& doc) {
  const auto hw = parse_hardware_json(doc.dump(), "hw.json");
  EXPECT_FALSE(hw.has_value());
  return hw ? std::string() : hw.error().message();
}

TEST(HardwareJsonTest, ComputeProfileRoundTripsAndIsOptional) {
  nlohmann::json doc = custom();
  doc["compute_profile"] = {{"sm_count", 64},
                            {"gemm_permille", 650},
                            {"attention_forward_flops", 50'000'000'000'000},
                            {"attention_backward_flops", 40'000'000'000'000},
                            {"elementwise_permille", 700}};
  const Hardware hw = parse_hardware_json(doc.dump(), "hw.json").value();
  ASSERT_NE(hw.compute_profile(), nullptr);
  EXPECT_EQ(hw.compute_profile()->sm_count, 64);
  EXPECT_EQ(hw.compute_profile()->peak_fp8_flops, 0);  // absent: no fp8
  // cuDNN attention defaults to the flash figures.
  EXPECT_EQ(hw.compute_profile()->cudnn_attention_forward_flops, 50'000'000'000'000);
  // absent: fp8 GEMMs at the bf16 GEMMs' share
  EXPECT_EQ(hw.compute_profile()->fp8_gemm_relative_permille, 1000);
  EXPECT_EQ(parse_hardware_json(hardware_to_json_text(hw), "again").value(), hw);
  doc["compute_profile"]["fp8_gemm_relative_permille"] = 839;
  const Hardware fp8 = parse_hardware_json(doc.dump(), "hw.json").value();
  EXPECT_EQ(fp8.compute_profile()->fp8_gemm_relative_permille, 839);
  EXPECT_EQ(parse_hardware_json(hardware_to_json_text(fp8), "again").value(), fp8);
  doc["compute_profile"]["fp8_gemm_relative_permille"] = 1001;
  EXPECT_EQ(parse_error(doc),
            "hw.json: hardware 'lab': compute_profile.fp8_gemm_relative_permille: expected an "
            "integer in [1, 1000], got 1001");
  doc["compute_profile"].erase("fp8_gemm_relative_permille");
  EXPECT_EQ(parse_hardware_json(custom().dump(), "hw.json")->compute_profile(), nullptr);
  doc["compute_profile"]["gemm_permille"] = 1200;
  const auto bad = parse_hardware_json(doc.dump(), "hw.json");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message(),
            "hw.json: hardware 'lab': compute_profile.gemm_permille: expected an integer in [1, "
            "1000], got 1200");
}

TEST(HardwareTest, PresetsCarryTheirNicsAndNvls) {
  for (const char* name : {"a100", "a100-40gb", "h100", "h100-96gb", "h200", "b200"}) {
    const Hardware hw = find_hardware_preset(name).value();
    EXPECT_EQ(hw.nics_per_node(), 8) << name;  // one compute NIC per GPU on every DGX/HGX node
    EXPECT_EQ(hw.collectives(), CollectiveModel::kNccl) << name;
  }
  EXPECT_EQ(find_hardware_preset("gb200")->nics_per_node(), 72);
  EXPECT_EQ(find_hardware_preset("a100")->nvls_permille(), 0);  // no NVLink SHARP on Ampere
  EXPECT_EQ(find_hardware_preset("h100")->nvls_permille(), 850);
  EXPECT_EQ(find_hardware_preset("b200")->nvls_permille(), 740);
}

TEST(HardwareJsonTest, OldFilesGetOneNicPerDeviceNoNvlsAndAlphaBeta) {
  const Hardware hw = parse_hardware_json(custom().dump(), "hw.json").value();
  EXPECT_EQ(hw.nics_per_node(), 4);  // devices_per_node
  EXPECT_EQ(hw.nvls_permille(), 0);
  EXPECT_EQ(hw.collectives(), CollectiveModel::kAlphaBeta);
  // A spec built in code with nics_per_node 0 means the same.
  HardwareSpec spec = hw.spec();
  spec.nics_per_node = 0;
  EXPECT_EQ(Hardware::make(spec)->nics_per_node(), 4);
}

TEST(HardwareJsonTest, NicsNvlsAndCollectivesRoundTrip) {
  json doc = custom();
  doc["nics_per_node"] = 2;
  doc["nvls_permille"] = 850;
  doc["collectives"] = "nccl";
  const Hardware hw = parse_hardware_json(doc.dump(), "hw.json").value();
  EXPECT_EQ(hw.nics_per_node(), 2);
  EXPECT_EQ(hw.nvls_permille(), 850);
  EXPECT_EQ(hw.collectives(), CollectiveModel::kNccl);
  EXPECT_EQ(parse_hardware_json(hardware_to_json_text(hw), "again").value(), hw);
  const std::string text = to_string(hw);
  EXPECT_NE(text.find("NICs per node:        2"), std::string::npos) << text;
  EXPECT_NE(text.find("NVLink SHARP:         85% efficiency"), std::string::npos) << text;
  EXPECT_NE(text.find("GB/s per NIC per direction"), std::string::npos) << text;
}

TEST(HardwareJsonTest, BadNicsNvlsOrCollectivesAreNamed) {
  json d = custom();
  d["nics_per_node"] = 0;
  EXPECT_EQ(parse_error(d), "hw.json: field 'nics_per_node': expected a positive integer, got 0");
  d = custom();
  d["nvls_permille"] = 1001;
  EXPECT_EQ(parse_error(d),
            "hw.json: hardware 'lab': field 'nvls_permille': expected an integer in [0, 1000], "
            "got 1001");
  d = custom();
  d["collectives"] = "mpi";
  EXPECT_EQ(parse_error(d),
            "hw.json: field 'collectives': expected \"nccl\" or \"alpha-beta\", got \"mpi\"");
  HardwareSpec spec = parse_hardware_json(custom().dump(), "hw.json")->spec();
  spec.nics_per_node = -1;
  EXPECT_EQ(Hardware::make(spec).error().message(),
            "hardware 'lab': field 'nics_per_node': expected a positive integer (or 0: one per "
            "device), got -1");
}

TEST(HardwareJsonTest, ParsesACustomCluster) {
  const auto hw = parse_hardware_json(custom().dump(), "hw.json");
  ASSERT_TRUE(hw.has_value()) << hw.error().message();
  EXPECT_EQ(hw->name(), "lab");
  EXPECT_EQ(hw->devices_per_node(), 4);
  EXPECT_EQ(hw->description(), "");
  EXPECT_EQ(hw->inter_node_latency_ns(), 8000);
}

TEST(HardwareJsonTest, ErrorsNameFileFieldExpectedAndActual) {
  json d = custom();
  d.erase("hbm_bytes_per_s");
  EXPECT_EQ(parse_error(d),
            "hw.json: field 'hbm_bytes_per_s': expected a positive integer, got nothing (the "
            "field is missing)");
  d = custom();
  d["devices_per_node"] = -8;
  EXPECT_EQ(parse_error(d),
            "hw.json: field 'devices_per_node': expected a positive integer, got -8");
  d = custom();
  d["intra_node_latency_ns"] = 1.5;
  EXPECT_EQ(parse_error(d),
            "hw.json: field 'intra_node_latency_ns': expected a non-negative integer, got 1.5");
  d = custom();
  d["memory_bytes"] = json::parse("99999999999999999999");
  EXPECT_EQ(parse_error(d),
            "hw.json: field 'memory_bytes': expected a positive integer that fits int64, got "
            "1e+20");
  d = custom();
  d["memory_gb"] = 80;
  EXPECT_EQ(parse_error(d).rfind("hw.json: field 'memory_gb': expected one of the known fields",
                                 0),
            0U);
  d = custom();
  d["format"] = "fsdpsim-model";
  EXPECT_EQ(parse_error(d),
            "hw.json: field 'format': expected \"fsdpsim-hardware\", got \"fsdpsim-model\"");
  EXPECT_EQ(parse_error(json::array()), "hw.json: top level: expected a JSON object, got []");
  const auto bad = parse_hardware_json("{", "hw.json");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message().rfind("hw.json: invalid JSON: ", 0), 0U);
}

}  // namespace
}  // namespace fsdp
