// SPDX-License-Identifier: Apache-2.0
// `fsdpsim hardware`: list the built-in hardware presets, or show one preset or a custom cluster
// file, as text or JSON.
#include <iomanip>
#include <sstream>
#include <string>

#include "cli/command.h"
#include "cli/subcommands.h"
#include "core/base/strings.h"
#include "core/hardware/hardware.h"
#include "core/hardware/hardware_json.h"
#include "core/hardware/hardware_presets.h"

#include <nlohmann/json.hpp>

namespace po = boost::program_options;

namespace fsdp::cli {


namespace {

constexpr std::string_view kCmd = "hardware";

constexpr std::string_view kUsage =
    "hardware [--show NAME | --file FILE] [--format text|json]";

constexpr std::string_view kDescription =
    "Lists the built-in hardware (8-GPU DGX A100, H100, H200 and B200 nodes with their datasheet\n"
    "figures; sources in docs/hardware.md), or shows one preset (--show) or a custom cluster\n"
    "described in a JSON file (--file; fields in docs/hardware.md).\n\n"
    "examples:\n"
    "  fsdpsim hardware\n"
    "  fsdpsim hardware --show h100\n"
    "  fsdpsim hardware --file my-cluster.json --format json";

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

void print_list(std::ostream& os) {
  const auto row = [&](std::string_view name, std::string_view devices, std::string_view memory,
                       std::string_view bf16, std::string_view fp32, std::string_view hbm,
                       std::string_view intra, std::string_view inter) {
    os << std::left << std::setw(6) << name << std::right << std::setw(9) << devices
       << std::setw(9) << memory << std::setw(12) << bf16 << std::setw(12) << fp32
       << std::setw(10) << hbm << std::setw(12) << intra << std::setw(12) << inter << "\n";
  };
  row("name", "gpus/node", "mem GiB", "bf16 TFLOPS", "fp32 TFLOPS", "HBM TB/s", "NVLink GB/s",
      "net GB/s");
  for (const Hardware& hw : hardware_presets()) {
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    row(hw.name(), std::to_string(hw.devices_per_node()),
        fixed(static_cast<double>(hw.memory_bytes()) / kGiB, 0),
        fixed(static_cast<double>(hw.peak_bf16_flops()) / 1e12, 1),
        fixed(static_cast<double>(hw.peak_fp32_flops()) / 1e12, 1),
        fixed(static_cast<double>(hw.hbm_bytes_per_s()) / 1e12, 2),
        fixed(static_cast<double>(hw.intra_node_bytes_per_s()) / 1e9, 0),
        fixed(static_cast<double>(hw.inter_node_bytes_per_s()) / 1e9, 1));
  }
  os << "\nbandwidths are per GPU and per direction; 'fsdpsim hardware --show NAME' for details\n";
  for (const Hardware& hw : hardware_presets()) {
    os << "  " << std::left << std::setw(6) << hw.name() << std::right << hw.description() << "\n";
  }
}

}  // namespace

int run_hardware_command(std::span<const std::string> args, Io& io) {
  po::options_description desc("options");
  std::string show;
  std::string file;
  std::string format = "text";
  desc.add_options()
      ("show", po::value(&show), "show one preset: a100, h100, h200, b200")
      ("file", po::value(&file), "show a custom cluster from a hardware JSON file")
      ("format", po::value(&format)->default_value("text"), "text | json");
  po::variables_map vm;
  if (auto done = parse_command_line(kCmd, kUsage, kDescription, desc, args, vm, io)) {
    return *done;
  }
  if (vm.count("show") + vm.count("file") > 1) {
    return report_usage_error(io, kCmd, "give at most one of --show and --file");
  }
  if (format != "text" && format != "json") {
    return report_usage_error(io, kCmd, str_cat("--format is '", format, "'; expected text or json"));
  }
  const auto dump = [](const nlohmann::ordered_json& j) {
    return j.dump(2, ' ', /*ensure_ascii=*/false, nlohmann::ordered_json::error_handler_t::replace);
  };
  if (vm.count("show") + vm.count("file") == 0) {
    if (format == "json") {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (const Hardware& hw : hardware_presets()) {
        list.push_back(hardware_to_json(hw));
      }
      io.out << dump(list) << "\n";
    } else {
      print_list(io.out);
    }
    return kExitOk;
  }
  Expected<Hardware> hw = Error(ErrorCode::kInternal, "no hardware");
  if (vm.count("show") != 0) {
    hw = find_hardware_preset(show);
  } else {
    auto text = read_text_file(file);
    if (!text) {
      return report_error(io, text.error());
    }
    hw = parse_hardware_json(*text, file);
  }
  if (!hw) {
    return report_error(io, hw.error());
  }
  if (format == "json") {
    io.out << dump(hardware_to_json(*hw)) << "\n";
  } else {
    io.out << to_string(*hw);
  }
  return kExitOk;
}

}  // namespace fsdp::cli
