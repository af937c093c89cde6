// SPDX-License-Identifier: Apache-2.0
// `fsdpsim hardware`: list the built-in hardware presets, or show one preset or a custom cluster
// file, as text or JSON; with --bus-bandwidth, the bus bandwidth the simulator predicts for its
// collectives per kind, size and GPU count (what nccl-tests would report).
#include <cstdint>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/list_argument.h"
#include "cli/subcommands.h"
#include "core/base/strings.h"
#include "core/hardware/hardware.h"
#include "core/hardware/hardware_json.h"
#include "core/hardware/hardware_presets.h"
#include "sim/model/cost_model.h"

#include <nlohmann/json.hpp>

namespace po = boost::program_options;

namespace fsdp::cli {


namespace {

constexpr std::string_view kCmd = "hardware";

constexpr std::string_view kUsage =
    "hardware [--show NAME | --file FILE] [--format text|json]\n"
    "       hardware --bus-bandwidth (--show NAME | --file FILE) [--gpus LIST] [--sizes LIST]";

constexpr std::string_view kDescription =
    "Lists the built-in hardware (8-GPU DGX A100, H100, H200 and B200 nodes with their datasheet\n"
    "figures; sources in docs/hardware.md), or shows one preset (--show) or a custom cluster\n"
    "described in a JSON file (--file; fields in docs/hardware.md). --bus-bandwidth prints the\n"
    "bus bandwidth the simulator predicts for all-gather, reduce-scatter, all-reduce and\n"
    "all-to-all on one mesh axis of --gpus GPUs (placed node-major) moving --sizes bytes, as\n"
    "nccl-tests would report it (busbw; all-to-all: the bytes each rank sends), with NCCL's\n"
    "algorithm and protocol (docs/validation.md compares it with published measurements).\n\n"
    "examples:\n"
    "  fsdpsim hardware\n"
    "  fsdpsim hardware --show h100\n"
    "  fsdpsim hardware --file my-cluster.json --format json\n"
    "  fsdpsim hardware --bus-bandwidth --show h100 --gpus 8,16,256 --sizes 1MiB,1GiB";

constexpr std::int64_t kMaxGpus = std::int64_t{1} << 20;
constexpr std::int64_t kMaxBytes = std::int64_t{1} << 40;

// "64 KiB", "16 MiB", "1 GiB", "4096 B".
std::string size_text(std::int64_t bytes) {
  if (bytes >= (std::int64_t{1} << 30) && bytes % (std::int64_t{1} << 30) == 0) {
    return str_cat(bytes >> 30, " GiB");
  }
  if (bytes >= (std::int64_t{1} << 20) && bytes % (std::int64_t{1} << 20) == 0) {
    return str_cat(bytes >> 20, " MiB");
  }
  if (bytes >= 1024 && bytes % 1024 == 0) {
    return str_cat(bytes >> 10, " KiB");
  }
  return str_cat(bytes, " B");
}

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

struct BusRow {
  std::string_view collective;  // "all-gather", ..., "all-to-all"
  std::int64_t bytes;
  std::int64_t gpus;
  sim::BusBandwidth bw;
};

int print_bus_bandwidth(const Hardware& hw, const std::vector<std::int64_t>& gpus,
                        const std::vector<std::int64_t>& sizes, bool json, Io& io) {
  const OpKind kinds[] = {OpKind::kAllGather, OpKind::kReduceScatter, OpKind::kAllReduce};
  constexpr std::string_view kAllToAll = "all-to-all";
  std::vector<std::string_view> collectives;
  for (OpKind kind : kinds) {
    collectives.push_back(to_string(kind));
  }
  collectives.push_back(kAllToAll);
  std::vector<BusRow> rows;
  for (std::size_t c = 0; c < collectives.size(); ++c) {
    for (std::int64_t bytes : sizes) {
      for (std::int64_t g : gpus) {
        auto bw = c < std::size(kinds)
                      ? sim::predicted_bus_bandwidth(kinds[c], bytes, g, hw, sim::CostOptions())
                      : sim::predicted_all_to_all_bus_bandwidth(bytes, g, hw);
        if (!bw) {
          return report_error(io, bw.error());
        }
        rows.push_back(BusRow{collectives[c], bytes, g, *bw});
      }
    }
  }
  if (json) {
    nlohmann::ordered_json out{{"hardware", hw.name()},
                               {"collectives", std::string(to_string(hw.collectives()))},
                               {"devices_per_node", hw.devices_per_node()}};
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const BusRow& r : rows) {
      nlohmann::ordered_json row{{"collective", std::string(r.collective)},
                                 {"bytes", r.bytes},
                                 {"gpus", r.gpus},
                                 {"bus_gb_per_s", r.bw.bus_bytes_per_s * 1e-9},
                                 {"alg_gb_per_s", r.bw.alg_bytes_per_s * 1e-9},
                                 {"time_us", r.bw.time.seconds() * 1e6}};
      if (r.collective == kAllToAll) {
        row["algorithm"] = "p2p";  // grouped send/receive, no NCCL algorithm or protocol
      } else {
        row["algorithm"] = std::string(sim::to_string(r.bw.algorithm));
        row["protocol"] = std::string(sim::to_string(r.bw.protocol));
      }
      list.push_back(std::move(row));
    }
    out["rows"] = list;
    io.out << out.dump(2, ' ', /*ensure_ascii=*/false,
                       nlohmann::ordered_json::error_handler_t::replace)
           << "\n";
    return kExitOk;
  }
  io.out << "predicted bus bandwidth (GB/s, as nccl-tests reports busbw) on '" << hw.name()
         << "', " << hw.devices_per_node() << " GPUs per node, " << to_string(hw.collectives())
         << " collectives\n";
  const bool nccl = hw.collectives() == CollectiveModel::kNccl;
  const int width = nccl ? 20 : 10;
  io.out << std::left << std::setw(16) << "collective" << std::right << std::setw(9) << "size";
  for (std::int64_t g : gpus) {
    io.out << std::setw(width) << str_cat(g, " GPUs");
  }
  io.out << "\n";
  std::size_t i = 0;
  for (std::string_view collective : collectives) {
    for (std::int64_t bytes : sizes) {
      io.out << std::left << std::setw(16) << collective << std::right << std::setw(9)
             << size_text(bytes);
      for (std::size_t g = 0; g < gpus.size(); ++g, ++i) {
        const sim::BusBandwidth& b = rows[i].bw;
        std::string cell = fixed(b.bus_bytes_per_s * 1e-9, 1);
        if (nccl) {
          cell += collective == kAllToAll
                      ? std::string(" p2p")
                      : str_cat(" ", sim::to_string(b.algorithm), "/", sim::to_string(b.protocol));
        }
        io.out << std::setw(width) << cell;
      }
      io.out << "\n";
    }
  }
  if (nccl) {
    io.out << "\neach cell: bus bandwidth, then the algorithm/protocol NCCL's tuner would pick"
              " (all-to-all: point-to-point sends and receives)\n";
  }
  return kExitOk;
}

}  // namespace

int run_hardware_command(std::span<const std::string> args, Io& io) {
  po::options_description desc("options");
  std::string show;
  std::string file;
  std::string format = "text";
  std::string gpus_text = "8,16,64,256";
  std::string sizes_text = "64KiB,1MiB,16MiB,256MiB,4GiB";
  desc.add_options()
      ("show", po::value(&show), "show one preset: a100, a100-40gb, h100, h100-96gb, h200, b200, gb200")
      ("file", po::value(&file), "show a custom cluster from a hardware JSON file")
      ("format", po::value(&format)->default_value("text"), "text | json")
      ("bus-bandwidth", po::bool_switch(), "print the predicted bus bandwidth of its collectives")
      ("gpus", po::value(&gpus_text)->default_value(gpus_text), "with --bus-bandwidth: GPU counts, comma-separated")
      ("sizes", po::value(&sizes_text)->default_value(sizes_text), "with --bus-bandwidth: sizes in bytes (KiB, MiB, GiB)");
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
  const bool bus = vm["bus-bandwidth"].as<bool>();
  if (!bus && (!vm["gpus"].defaulted() || !vm["sizes"].defaulted())) {
    return report_usage_error(io, kCmd, "--gpus and --sizes need --bus-bandwidth");
  }
  if (bus && vm.count("show") + vm.count("file") == 0) {
    return report_usage_error(io, kCmd, "--bus-bandwidth needs --show NAME or --file FILE");
  }
  std::vector<std::int64_t> gpus;
  std::vector<std::int64_t> sizes;
  if (bus) {
    auto g = parse_int_list(gpus_text, "--gpus", /*with_units=*/false, 2, kMaxGpus);
    if (!g) {
      return report_usage_error(io, kCmd, g.error().message());
    }
    auto z = parse_int_list(sizes_text, "--sizes", /*with_units=*/true, 1, kMaxBytes);
    if (!z) {
      return report_usage_error(io, kCmd, z.error().message());
    }
    gpus = std::move(*g);
    sizes = std::move(*z);
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
  if (bus) {
    return print_bus_bandwidth(*hw, gpus, sizes, format == "json", io);
  }
  if (format == "json") {
    io.out << dump(hardware_to_json(*hw)) << "\n";
  } else {
    io.out << to_string(*hw);
  }
  return kExitOk;
}

}  // namespace fsdp::cli
