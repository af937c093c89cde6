// SPDX-License-Identifier: Apache-2.0
// `fsdpsim layout`: build a RowAtomic/BlockAtomic (padded or unpadded) or TensorAtomic layout for
// tensors given inline, in a JSON file, or taken from a model, and print it as ASCII, JSON or a
// per-rank table.
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "cli/command.h"
#include "planner/resource_estimate.h"
#include "cli/run_options.h"
#include "cli/subcommands.h"
#include "core/base/printable.h"
#include "core/base/strings.h"
#include "core/layout/layout_builder.h"
#include "core/layout/owner_planner.h"
#include "core/model/hub_config.h"
#include "core/model/json_fields.h"
#include "core/model/param_groups.h"
#include "viz/layout_ascii.h"
#include "viz/layout_report.h"

#include <nlohmann/json.hpp>

namespace po = boost::program_options;

namespace fsdp::cli {
namespace {

constexpr std::string_view kUsage =
    "layout (--shapes LIST | --input FILE | --model M [--unit U]) --dp N [--block B] [--shard-layout padded|unpadded]\n"
    "                      [--placement row|block|tensor [--owners LIST | --plan-owners]]\n"
    "                      [--format ascii|json|table] [--dtype bf16|fp16|fp32|fp8]";

constexpr std::string_view kDescription =
    "Lays tensors out in one flat DBuffer exactly as Megatron-FSDP v2 does and shows what each of\n"
    "the dp ranks holds. RowAtomic (block 1) and BlockAtomic (block B) layouts never split a row\n"
    "(block of B rows) across ranks; 'padded' gives equal rank segments, 'unpadded' packs tensors\n"
    "and cuts at the row boundary nearest an even split. TensorAtomic keeps each tensor whole on\n"
    "its owner rank (owners given with --owners or planned with --plan-owners).\n\n"
    "examples:\n"
    "  fsdpsim layout --shapes 2x6,4x4,4x4,1x2,1x6 --dp 5\n"
    "  fsdpsim layout --shapes 2x6,4x4,1x2 --dp 2 --shard-layout unpadded --format table\n"
    "  fsdpsim layout --input tensors.json --dp 16 --placement tensor --plan-owners --format json\n"
    "  fsdpsim layout --model llama-3-8b --unit layers.0 --dp 16\n\n"
    "--input FILE holds {\"tensors\": [{\"name\": \"w1\", \"shape\": [4096, 14336]}, ...]}.\n"
    "--model takes a preset name (fsdpsim model --list) or a hub config.json / model JSON file;\n"
    "the tensors are the first parameter group of --unit (default: the first decoder layer).";

struct NamedShapes {
  std::vector<Shape> shapes;
  std::vector<std::string> names;
};

// The first parameter group of one unit of a model: what fully_shard lays out in one DBuffer.
Expected<NamedShapes> shapes_from_model(const std::string& model_arg, std::string unit_name) {
  FSDP_TRY(Model model, load_model_argument(model_arg));
  if (unit_name.empty()) {
    unit_name = model.find_unit("layers.0") >= 0 ? "layers.0" : model.units().front().name();
  }
  const std::int64_t u = model.find_unit(unit_name);
  if (u < 0) {
    std::vector<std::string> names;
    for (const Unit& unit : model.units()) {
      names.push_back(unit.name());
      if (names.size() == 6) {
        names.push_back("...");
        break;
      }
    }
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("model '", model.name(), "' has no unit '", unit_name,
                         "'; expected one of ", join(names, ", ")));
  }
  const Unit& unit = model.units()[static_cast<std::size_t>(u)];
  const std::vector<ParamGrouping> groups = group_params(unit.params());
  if (groups.empty()) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("unit '", unit_name, "' of model '", model.name(),
                         "' has no parameters; expected at least one"));
  }
  NamedShapes out;
  for (std::int64_t pi : groups.front().param_indices) {
    const Param& p = unit.params()[static_cast<std::size_t>(pi)];
    out.shapes.push_back(p.shape());
    out.names.push_back(p.name());
  }
  return out;
}

Expected<NamedShapes> shapes_from_list(const std::string& list) {
  NamedShapes out;
  std::size_t pos = 0;
  while (pos <= list.size()) {
    const std::size_t comma = list.find(',', pos);
    const std::string item =
        list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    auto shape = parse_shape(item);
    if (!shape) {
      return shape.error().with_context(str_cat("--shapes item ", out.shapes.size()));
    }
    out.names.push_back(str_cat("P", out.shapes.size()));
    out.shapes.push_back(*shape);
    if (comma == std::string::npos) {
      break;
    }
    pos = comma + 1;
  }
  return out;
}

Expected<NamedShapes> shapes_from_json_file(const std::string& path) {
  FSDP_TRY(std::string text, read_text_file(path));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return Error(ErrorCode::kInvalidArgument, str_cat(path, ": malformed JSON"));
  }
  if (!j.is_object() || !j.contains("tensors") || !j["tensors"].is_array()) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(path, ": field 'tensors' is missing or not an array; expected ",
                         "{\"tensors\": [{\"name\": ..., \"shape\": [...]}, ...]}"));
  }
  NamedShapes out;
  const auto& tensors = j["tensors"];
  // The same bound as a hub config's tensors: a 3x10^7-tensor file once grew until killed.
  if (tensors.size() > static_cast<std::size_t>(kMaxHubTensors)) {
    return Error(ErrorCode::kOutOfRange,
                 str_cat(path, ": field 'tensors' has ", tensors.size(),
                         " entries; expected at most ", kMaxHubTensors));
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    const std::string where = str_cat(path, ": tensors[", i, "]");
    if (!t.is_object()) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat(where, " is ", t.type_name(), "; expected an object"));
    }
    std::string name = str_cat("P", i);
    if (t.contains("name")) {
      if (!t["name"].is_string()) {
        return Error(ErrorCode::kInvalidArgument,
                     str_cat(where, ".name is ", t["name"].type_name(), "; expected a string"));
      }
      name = t["name"].get<std::string>();
      // A name reaches the terminal and the messages below: no escape sequences (issue 16).
      if (auto printable = check_printable_name("tensor", name); !printable) {
        return printable.error().with_context(where);
      }
    }
    if (!t.contains("shape") || !t["shape"].is_array()) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat(where, " ('", name, "') field 'shape' is missing or not an array"));
    }
    std::vector<std::int64_t> dims;
    for (std::size_t d = 0; d < t["shape"].size(); ++d) {
      const auto& v = t["shape"][d];
      if (!v.is_number_integer()) {
        return Error(ErrorCode::kInvalidArgument,
                     str_cat(where, " ('", name, "') shape[", d, "] is ", describe_json(v),
                             "; expected an integer >= 0"));
      }
      if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
        return Error(ErrorCode::kOutOfRange, str_cat(where, " ('", name, "') shape[", d, "] is ",
                                                     v.dump(), "; expected at most ", INT64_MAX));
      }
      dims.push_back(v.get<std::int64_t>());
    }
    auto shape = Shape::make(dims);
    if (!shape) {
      return shape.error().with_context(str_cat(where, " ('", name, "')"));
    }
    out.shapes.push_back(*shape);
    out.names.push_back(std::move(name));
  }
  return out;
}

Expected<std::vector<std::int64_t>> parse_int_list(const std::string& what,
                                                   const std::string& text) {
  std::vector<std::int64_t> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = text.find(',', pos);
    const std::string item =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    std::int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size()) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat(what, " item ", out.size(), " is '", item, "'; expected an integer"));
    }
    out.push_back(v);
    if (comma == std::string::npos) {
      break;
    }
    pos = comma + 1;
  }
  return out;
}

Expected<std::int64_t> dtype_bytes(const std::string& dtype) {
  if (dtype == "fp32" || dtype == "float32") {
    return 4;
  }
  if (dtype == "bf16" || dtype == "bfloat16" || dtype == "fp16" || dtype == "float16") {
    return 2;
  }
  if (dtype == "fp8" || dtype == "mxfp8") {
    return 1;
  }
  return Error(ErrorCode::kInvalidArgument,
               str_cat("dtype '", dtype, "' is unknown; expected bf16, fp16, fp32 or fp8"));
}

// What a layout needs, estimated before it is built: `--dp 1000000 --format json` once grew past
// the memory limit and ended in std::terminate (the JSON tree's destructor allocates). Measured
// in the release build: about 1 KiB per rank and 0.9 KiB per tensor for JSON, under 16 B per
// rank and 0.5 KiB per tensor for ASCII and the table; the constants leave a margin.
constexpr std::int64_t kLayoutBytesPerRank = 32;
constexpr std::int64_t kLayoutBytesPerTensor = 768;
constexpr std::int64_t kLayoutJsonBytesPerRank = 1536;
constexpr std::int64_t kLayoutJsonBytesPerTensor = 1536;

// kOutOfRange when the estimate passes memory_budget_bytes(); ok for a --dp outside [1, 2^31 - 1]
// (the layout builder names that range).
Status check_layout_memory(std::int64_t dp, std::int64_t tensors, bool json) {
  if (dp < 1 || dp > std::numeric_limits<std::int32_t>::max()) {
    return ok_status();
  }
  const std::int64_t per_rank = json ? kLayoutJsonBytesPerRank : kLayoutBytesPerRank;
  const std::int64_t per_tensor = json ? kLayoutJsonBytesPerTensor : kLayoutBytesPerTensor;
  // In double: only the comparison matters.
  const double need = static_cast<double>(dp) * static_cast<double>(per_rank) +
                      static_cast<double>(tensors) * static_cast<double>(per_tensor);
  const double budget = static_cast<double>(planner::memory_budget_bytes());
  if (need <= budget) {
    return ok_status();
  }
  const auto gib = [](double bytes) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
    return std::string(buf);
  };
  return Error(ErrorCode::kOutOfRange,
               str_cat("the layout needs about ", gib(need), " (", dp, " ranks x ", per_rank,
                       " B + ", tensors, " tensors x ", per_tensor, " B", json ? ", as JSON" : "",
                       "), more than the ", gib(budget),
                       " this process may use; try a smaller --dp",
                       json ? " or --format table" : ""));
}

}  // namespace

int run_layout_command(std::span<const std::string> args, Io& io) {
  po::options_description desc("options");
  std::string shapes_text;
  std::string input_path;
  std::int64_t dp = 0;
  std::int64_t block = 1;
  std::string shard_layout_text = "padded";
  std::string placement = "row";
  std::string owners_text;
  std::string format;
  std::string dtype = "bf16";
  std::string model_arg;
  std::string unit_name;
  desc.add_options()
      ("shapes", po::value(&shapes_text), "comma-separated shapes, dims separated by 'x': 2x6,4x4,18")
      ("input", po::value(&input_path), "JSON file {\"tensors\": [{\"name\", \"shape\"}, ...]}")
      ("model", po::value(&model_arg), "model preset or config file (layout of one unit)")
      ("unit", po::value(&unit_name), "with --model: the unit to lay out (default layers.0)")
      ("dp", po::value(&dp)->required(), "number of data-parallel rank segments (>= 1)")
      ("block", po::value(&block)->default_value(1), "rows kept together on one rank (BlockAtomic)")
      ("shard-layout", po::value(&shard_layout_text)->default_value("padded"), "padded | unpadded")
      ("placement", po::value(&placement)->default_value("row"), "row | block | tensor")
      ("owners", po::value(&owners_text), "tensor placement: owner rank per tensor, e.g. 0,1,1,0")
      ("plan-owners", "tensor placement: balance bytes over ranks, largest tensor first")
      ("format", po::value(&format), "ascii | json | table (default: ascii, table when large)")
      ("dtype", po::value(&dtype)->default_value("bf16"), "element type for byte counts")
      ("all-ranks", "draw every rank, however many");
  po::variables_map vm;
  if (auto done = parse_command_line("layout", kUsage, kDescription, desc, args, vm, io)) {
    return *done;
  }
  const std::string kCmd = "layout";
  if (vm.count("shapes") + vm.count("input") + vm.count("model") != 1) {
    return report_usage_error(io, kCmd, "give exactly one of --shapes, --input and --model");
  }
  if (vm.count("unit") != 0 && vm.count("model") == 0) {
    return report_usage_error(io, kCmd, "--unit needs --model");
  }
  if (placement != "row" && placement != "block" && placement != "tensor") {
    return report_usage_error(
        io, kCmd, str_cat("--placement is '", placement, "'; expected row, block or tensor"));
  }
  if (placement == "row" && block != 1) {
    return report_usage_error(io, kCmd,
                              str_cat("--block ", block, " needs --placement block (row is block 1)"));
  }
  const bool tensor = placement == "tensor";
  if (tensor && vm.count("owners") + vm.count("plan-owners") != 1) {
    return report_usage_error(io, kCmd,
                              "--placement tensor needs exactly one of --owners and --plan-owners");
  }
  if (!tensor && (vm.count("owners") != 0 || vm.count("plan-owners") != 0)) {
    return report_usage_error(io, kCmd, "--owners and --plan-owners need --placement tensor");
  }
  if (!format.empty() && format != "ascii" && format != "json" && format != "table") {
    return report_usage_error(io, kCmd,
                              str_cat("--format is '", format, "'; expected ascii, json or table"));
  }
  auto layout_kind = parse_shard_layout(shard_layout_text);
  if (!layout_kind) {
    return report_usage_error(io, kCmd, layout_kind.error().message());
  }
  auto bytes = dtype_bytes(dtype);
  if (!bytes) {
    return report_usage_error(io, kCmd, bytes.error().message());
  }

  auto named = vm.count("shapes") != 0  ? shapes_from_list(shapes_text)
               : vm.count("input") != 0 ? shapes_from_json_file(input_path)
                                        : shapes_from_model(model_arg, unit_name);
  if (!named) {
    return report_error(io, named.error());
  }
  if (Status s = check_layout_memory(dp, static_cast<std::int64_t>(named->shapes.size()),
                                     format == "json");
      !s.ok()) {
    return report_error(io, s.error());
  }
  viz::LayoutRequest request;
  request.placement = placement;
  request.shard_layout = tensor ? "unpadded" : std::string(to_string(*layout_kind));
  request.block_size = block;
  request.dtype = dtype;
  request.bytes_per_element = *bytes;
  request.tensor_names = named->names;

  Expected<GlobalLayout> layout = Error(ErrorCode::kInternal, "no layout built");
  if (tensor) {
    Expected<std::vector<std::int64_t>> owners =
        vm.count("owners") != 0 ? parse_int_list("--owners", owners_text)
                                : plan_tensor_owners(named->shapes, dp);
    if (!owners) {
      return report_error(io, owners.error());
    }
    request.owners = *owners;
    layout = build_for_tensor_atomic(std::move(named->shapes), dp, *owners);
  } else {
    layout = build_row_atomic_layout(std::move(named->shapes), dp, block, *layout_kind);
  }
  if (!layout) {
    return report_error(io, layout.error());
  }

  if (format.empty()) {
    format = layout->num_tensors() > 4096 ? "table" : "ascii";
  }
  if (format == "json") {
    io.out << viz::layout_to_json(*layout, request).dump(2) << "\n";
  } else if (format == "table") {
    io.out << viz::render_layout_table(*layout, request,
                                       vm.count("all-ranks") != 0 ? INT64_MAX : 64);
  } else {
    viz::AsciiLayoutOptions options;
    if (vm.count("all-ranks") != 0) {
      options.max_ranks = INT64_MAX;
    }
    io.out << viz::render_layout_ascii(*layout, options) << "\n"
           << viz::render_layout_summary(*layout, request);
    bool named_tensors = false;
    for (std::size_t i = 0; i < request.tensor_names.size(); ++i) {
      named_tensors = named_tensors || request.tensor_names[i] != str_cat("P", i);
    }
    if (named_tensors && layout->num_tensors() <= 64) {
      io.out << "legend:";
      for (std::size_t i = 0; i < request.tensor_names.size(); ++i) {
        io.out << (i == 0 ? " " : ", ") << "P" << i << " = " << request.tensor_names[i] << " "
               << to_string(layout->tensor_shapes()[i]);
      }
      io.out << "\n";
    }
  }
  return kExitOk;
}

}  // namespace fsdp::cli
