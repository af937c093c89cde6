// SPDX-License-Identifier: Apache-2.0
// `fsdpsim model`: import a hub config.json, an fsdpsim model file or a built-in preset and print
// its FSDP units, their tensors, parameter counts, FLOPs and activation bytes per token.
#include <cstdint>
#include <iomanip>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/command.h"
#include "cli/model_argument.h"
#include "cli/subcommands.h"
#include "core/base/checked_math.h"
#include "core/base/strings.h"
#include "core/model/model.h"
#include "core/model/model_json.h"
#include "core/model/model_loader.h"
#include "core/model/model_presets.h"

#include <nlohmann/json.hpp>

namespace po = boost::program_options;

namespace fsdp::cli {


namespace {

constexpr std::string_view kCmd = "model";

constexpr std::string_view kUsage =
    "model (--config FILE | --preset NAME | --list) [--seq-len N]\n"
    "                     [--format text|table|json|model] [--summary]\n"
    "                     [--layers N] [--hidden N] [--ffn N] [--heads N] [--kv-heads N]\n"
    "                     [--vocab N] [--dtype D]";

constexpr std::string_view kDescription =
    "Shows a model as FSDP units: one per decoder layer plus the embedding and the head, each\n"
    "with its parameter tensors, its forward FLOPs per token (2 x multiply-accumulates; backward\n"
    "is twice that; attention grows with --seq-len; MoE layers count only routed experts) and the\n"
    "activation bytes per token it keeps for backward, with and without recomputation.\n\n"
    "--config reads a hub config.json (model_type llama, mistral, mixtral, qwen2, deepseek_v3,\n"
    "gpt2) or an fsdpsim model file (docs/models.md); the kind is detected from its fields.\n"
    "--format model writes the model as an fsdpsim model file, to edit and read back.\n"
    "--layers, --hidden, --ffn, --heads, --kv-heads, --vocab and --dtype change a preset's or\n"
    "hub config's sizes: with --dtype fp32 it is the network `fsdpsim train --model` runs.\n\n"
    "examples:\n"
    "  fsdpsim model --list\n"
    "  fsdpsim model --preset llama-3-8b --summary\n"
    "  fsdpsim model --config config.json --seq-len 8192 --format table\n"
    "  fsdpsim model --preset mixtral-8x7b --format json\n"
    "  fsdpsim model --preset llama-3-8b --layers 2 --hidden 256 --heads 4 --dtype fp32";

// 8030261248 -> "8,030,261,248".
std::string grouped(std::int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) {
      out += ',';
    }
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

// 8030261248 -> "8.03 B"; small numbers stay exact.
std::string human(std::int64_t v) {
  static constexpr std::pair<double, const char*> kUnits[] = {
      {1e15, "P"}, {1e12, "T"}, {1e9, "B"}, {1e6, "M"}, {1e3, "K"}};
  for (const auto& [scale, suffix] : kUnits) {
    if (static_cast<double>(v) >= scale) {
      std::ostringstream os;
      os << std::fixed << std::setprecision(2) << static_cast<double>(v) / scale << " " << suffix;
      return os.str();
    }
  }
  return std::to_string(v);
}

std::string shape_text(const Shape& s) {
  return str_cat("[", join(s.dims(), ", "), "]");
}

// Everything printed about one unit or the whole model at the chosen sequence length.
struct Figures {
  std::int64_t forward = 0;
  std::int64_t backward = 0;
  std::int64_t attention = 0;
};

Expected<Figures> figures(const UnitFlops& flops, std::int64_t seq_len, std::string_view what) {
  auto forward = forward_flops_per_token(flops, seq_len);
  if (!forward) {
    return forward.error().with_context(what);
  }
  Figures f;
  f.forward = *forward;
  f.attention = f.forward - flops.matmul;
  if (!checked_mul(f.forward, 2, &f.backward)) {
    return Error(ErrorCode::kOutOfRange,
                 str_cat(what, ": backward FLOPs per token: expected a value that fits int64, got "
                               "2 x ",
                         f.forward));
  }
  return f;
}

std::string parent_name(const Model& m, const Unit& u) {
  return u.parent() == Unit::kNoParent
             ? std::string()
             : m.units()[static_cast<std::size_t>(u.parent())].name();
}

Status print_text(const Model& m, std::string_view source, std::int64_t seq_len, bool summary,
                  std::ostream& os) {
  os << "model " << m.name() << " (" << source << ")\n";
  os << "FLOPs are per token at sequence length " << seq_len
     << "; backward = 2 x forward; activations are bytes per token kept for backward\n";
  std::int64_t tensors = 0;
  for (const Unit& u : m.units()) {
    FSDP_TRY(const Figures f, figures(u.flops(), seq_len, str_cat("unit '", u.name(), "'")));
    tensors += static_cast<std::int64_t>(u.params().size());
    os << "\nunit " << u.name();
    if (u.parent() != Unit::kNoParent) {
      os << " (in " << parent_name(m, u) << ")";
    }
    os << ": " << u.params().size() << (u.params().size() == 1 ? " tensor, " : " tensors, ")
       << grouped(u.num_parameters()) << " parameters\n"
       << "  forward " << grouped(f.forward) << " FLOPs (matmul " << grouped(u.flops().matmul)
       << ", attention " << grouped(f.attention) << "), backward " << grouped(f.backward) << "\n"
       << "  activations " << grouped(u.activations().stored) << " bytes, "
       << grouped(u.activations().recompute) << " with recompute\n";
    // The selective checkpointing modes, where the unit has their figures (docs/models.md).
    for (const auto& [mode, figures] :
         {std::pair{"selective-op", &u.activations().selective_op},
          std::pair{"core-attention", &u.activations().core_attention}}) {
      if (figures->has_value()) {
        os << "  " << mode << " keeps " << grouped((*figures)->kept) << " bytes";
        if ((*figures)->unread > 0) {
          os << " (" << grouped((*figures)->kept - (*figures)->unread) << " compiled)";
        }
        os << ", re-materialises " << grouped((*figures)->transient) << ", recomputes "
           << grouped((*figures)->flops.matmul) << " matmul FLOPs + "
           << grouped((*figures)->flops.attention_per_seq) << " x s attention\n";
      }
    }
    if (summary) {
      continue;
    }
    std::size_t name_width = 0;
    std::size_t shape_width = 0;
    for (const Param& p : u.params()) {
      name_width = std::max(name_width, p.name().size());
      shape_width = std::max(shape_width, shape_text(p.shape()).size());
    }
    for (const Param& p : u.params()) {
      os << "    " << std::left << std::setw(static_cast<int>(name_width)) << p.name() << "  "
         << std::setw(static_cast<int>(shape_width)) << shape_text(p.shape()) << "  "
         << std::setw(4) << to_string(p.dtype()) << std::right << "  " << std::setw(15)
         << grouped(p.numel()) << (p.requires_grad() ? "" : "  (no grad)") << "\n";
    }
  }
  FSDP_TRY(const Figures total, figures(m.flops(), seq_len, str_cat("model '", m.name(), "'")));
  FSDP_TRY(const std::int64_t training, m.training_flops_per_token(seq_len));
  os << "\ntotal: " << m.num_units() << " units, " << grouped(tensors) << " tensors\n"
     << "  parameters           " << grouped(m.num_parameters()) << " ("
     << human(m.num_parameters()) << "), trainable " << grouped(m.num_trainable_parameters())
     << ", " << grouped(m.param_bytes()) << " bytes\n"
     << "  forward FLOPs/token  " << grouped(total.forward) << " (matmul "
     << grouped(m.flops().matmul) << ", attention " << grouped(total.attention) << ")\n"
     << "  backward FLOPs/token " << grouped(total.backward) << "\n"
     << "  training FLOPs/token " << grouped(training) << " (" << human(training) << ")\n"
     << "  activations/token    " << grouped(m.activations().stored) << " bytes, "
     << grouped(m.activations().recompute) << " with every unit recomputed\n";
  return ok_status();
}

Status print_table(const Model& m, std::int64_t seq_len, std::ostream& os) {
  std::size_t name_width = 5;
  for (const Unit& u : m.units()) {
    name_width = std::max(name_width, u.name().size());
  }
  const auto row = [&](std::string_view index, std::string_view name, std::string_view tensors,
                       std::string_view params, std::string_view forward,
                       std::string_view attention, std::string_view stored,
                       std::string_view recompute) {
    os << std::right << std::setw(5) << index << "  " << std::left
       << std::setw(static_cast<int>(name_width)) << name << std::right << "  " << std::setw(7)
       << tensors << "  " << std::setw(19) << params << "  " << std::setw(19) << forward << "  "
       << std::setw(17) << attention << "  " << std::setw(13) << stored << "  " << std::setw(11)
       << recompute << "\n";
  };
  row("index", "unit", "tensors", "parameters", "forward FLOPs/tok",
      str_cat("attn @ ", seq_len), "act bytes/tok", "recompute");
  std::int64_t tensors = 0;
  for (std::size_t i = 0; i < m.units().size(); ++i) {
    const Unit& u = m.units()[i];
    FSDP_TRY(const Figures f, figures(u.flops(), seq_len, str_cat("unit '", u.name(), "'")));
    tensors += static_cast<std::int64_t>(u.params().size());
    row(std::to_string(i), u.name(), std::to_string(u.params().size()),
        grouped(u.num_parameters()), grouped(f.forward), grouped(f.attention),
        grouped(u.activations().stored), grouped(u.activations().recompute));
  }
  FSDP_TRY(const Figures total, figures(m.flops(), seq_len, str_cat("model '", m.name(), "'")));
  row("", "total", std::to_string(tensors), grouped(m.num_parameters()), grouped(total.forward),
      grouped(total.attention), grouped(m.activations().stored),
      grouped(m.activations().recompute));
  return ok_status();
}

Expected<nlohmann::ordered_json> summary_json(const Model& m, std::string_view source,
                                              std::int64_t seq_len, bool summary) {
  using nlohmann::ordered_json;
  ordered_json units = ordered_json::array();
  for (const Unit& u : m.units()) {
    FSDP_TRY(const Figures f, figures(u.flops(), seq_len, str_cat("unit '", u.name(), "'")));
    ordered_json unit = {{"name", u.name()}};
    unit["parent"] = u.parent() == Unit::kNoParent ? ordered_json(nullptr)
                                                   : ordered_json(parent_name(m, u));
    unit["parameters"] = u.num_parameters();
    unit["param_bytes"] = u.param_bytes();
    unit["flops_per_token"] = {{"forward", f.forward},
                               {"backward", f.backward},
                               {"matmul", u.flops().matmul},
                               {"attention", f.attention},
                               {"attention_per_seq", u.flops().attention_per_seq}};
    unit["activation_bytes_per_token"] = {{"stored", u.activations().stored},
                                          {"recompute", u.activations().recompute}};
    if (!summary) {
      ordered_json params = ordered_json::array();
      for (const Param& p : u.params()) {
        params.push_back({{"name", p.name()},
                          {"shape", std::vector<std::int64_t>(p.shape().dims().begin(),
                                                              p.shape().dims().end())},
                          {"dtype", std::string(to_string(p.dtype()))},
                          {"requires_grad", p.requires_grad()},
                          {"numel", p.numel()}});
      }
      unit["params"] = std::move(params);
    }
    units.push_back(std::move(unit));
  }
  FSDP_TRY(const Figures total, figures(m.flops(), seq_len, str_cat("model '", m.name(), "'")));
  FSDP_TRY(const std::int64_t training, m.training_flops_per_token(seq_len));
  return ordered_json{
      {"name", m.name()},
      {"source", std::string(source)},
      {"seq_len", seq_len},
      {"parameters", m.num_parameters()},
      {"trainable_parameters", m.num_trainable_parameters()},
      {"param_bytes", m.param_bytes()},
      {"flops_per_token",
       {{"forward", total.forward},
        {"backward", total.backward},
        {"training", training},
        {"matmul", m.flops().matmul},
        {"attention", total.attention},
        {"attention_per_seq", m.flops().attention_per_seq}}},
      {"activation_bytes_per_token",
       {{"stored", m.activations().stored}, {"recompute", m.activations().recompute}}},
      {"units", std::move(units)}};
}

void print_presets(std::ostream& os) {
  os << "model presets (hub config.json files built in; use --preset NAME):\n";
  for (const ModelPreset& p : model_presets()) {
    os << "  " << std::left << std::setw(16) << p.name << std::right << p.description << "\n";
  }
}

}  // namespace

int run_model_command(std::span<const std::string> args, Io& io) {
  po::options_description desc("options");
  std::string config_path;
  std::string preset_name;
  std::int64_t seq_len = 4096;
  std::string format = "text";
  std::string dtype_text;
  // clang-format off
  desc.add_options()
      ("config", po::value(&config_path), "hub config.json or fsdpsim model file")
      ("preset", po::value(&preset_name), "built-in model (see --list)")
      ("list", "list the built-in models")
      ("seq-len", po::value(&seq_len)->default_value(4096), "sequence length for attention FLOPs")
      ("format", po::value(&format)->default_value("text"), "text | table | json | model")
      ("summary", "units and totals only, no tensor list")
      ("dtype", po::value(&dtype_text),
       "parameter dtype replacing the config's torch_dtype (fp32 is what `fsdpsim train` runs)");
  // clang-format on
  HubOverrides sizes;
  add_model_size_options(desc, &sizes);
  po::variables_map vm;
  if (auto done = parse_command_line(kCmd, kUsage, kDescription, desc, args, vm, io)) {
    return *done;
  }
  if (vm.count("list") != 0) {
    if (vm.count("config") + vm.count("preset") != 0) {
      return report_usage_error(io, kCmd, "--list takes no --config or --preset");
    }
    print_presets(io.out);
    return kExitOk;
  }
  if (vm.count("config") + vm.count("preset") != 1) {
    return report_usage_error(io, kCmd, "give exactly one of --config and --preset");
  }
  if (format != "text" && format != "table" && format != "json" && format != "model") {
    return report_usage_error(
        io, kCmd, str_cat("--format is '", format, "'; expected text, table, json or model"));
  }
  if (seq_len < 1) {
    return report_usage_error(io, kCmd,
                              str_cat("--seq-len is ", seq_len, "; expected a positive integer"));
  }
  if (!dtype_text.empty()) {
    auto dtype = parse_dtype(dtype_text);
    if (!dtype) {
      return report_usage_error(io, kCmd, dtype.error().with_context("--dtype").message());
    }
    sizes.dtype = *dtype;
  }
  const bool from_preset = vm.count("preset") != 0;
  const std::string source = from_preset ? str_cat("preset ", preset_name) : config_path;
  // A --preset that names no preset is the preset loader's error (it lists them), even when a
  // file of that name exists.
  Expected<Model> model = from_preset && find_model_preset(preset_name) == nullptr
                              ? load_model_preset(preset_name)
                              : load_model_argument(from_preset ? preset_name : config_path, sizes);
  if (!model) {
    return report_error(io, model.error());
  }
  const bool summary = vm.count("summary") != 0;
  Status printed;
  if (format == "model") {
    io.out << model_to_json_text(*model) << "\n";
  } else if (format == "json") {
    auto doc = summary_json(*model, source, seq_len, summary);
    if (!doc) {
      return report_error(io, doc.error());
    }
    io.out << doc->dump(2, ' ', /*ensure_ascii=*/false,
                        nlohmann::ordered_json::error_handler_t::replace)
           << "\n";
  } else if (format == "table") {
    std::ostringstream os;
    printed = print_table(*model, seq_len, os);
    io.out << os.str();
  } else {
    std::ostringstream os;
    printed = print_text(*model, source, seq_len, summary, os);
    io.out << os.str();
  }
  if (!printed) {
    return report_error(io, printed.error());
  }
  return kExitOk;
}

}  // namespace fsdp::cli
