// SPDX-License-Identifier: Apache-2.0
#include "planner/torchtitan_config.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <utility>

#include "core/base/file_io.h"
#include "core/base/strings.h"
#include "core/mesh/axis_names.h"
#include "core/mesh/device_mesh.h"
#include "core/model/model_presets.h"

#include <toml++/toml.h>

namespace fsdp::planner {
namespace {

// The file's name in messages: the path as given.
Error config_error(const std::string& path, std::int64_t line, std::string_view field,
                   std::string_view what) {
  return Error(ErrorCode::kInvalidArgument, line > 0
                                                ? str_cat(path, ":", line, ": ", field, ": ", what)
                                                : str_cat(path, ": ", field, ": ", what));
}

// A value as the file writes it ("8B", 8192, true, [ 'float8' ]).
std::string text_of(const toml::node& node) {
  std::ostringstream os;
  if (const auto* s = node.as_string()) {
    os << "'" << s->get() << "'";
  } else {
    node.visit([&os](const auto& value) { os << value; });
  }
  return os.str();
}

// Looks fields up by dotted name, remembers which were read (so the rest can be listed as
// ignored) and turns wrong types into one-line errors.
class FieldReader {
 public:
  FieldReader(const toml::table& root, const std::string& path) : root_(root), path_(path) {}

  // The first of `names` the file has (the current name first, older releases' after it), or
  // nullptr. Every name found is marked read.
  const toml::node* find(std::initializer_list<std::string_view> names, std::string* found) {
    const toml::node* first = nullptr;
    for (std::string_view name : names) {
      const toml::node* node = root_.at_path(name).node();
      if (node == nullptr) {
        continue;
      }
      used_.insert(std::string(name));
      if (first == nullptr) {
        first = node;
        *found = std::string(name);
      }
    }
    return first;
  }

  Expected<std::optional<std::int64_t>> integer(std::initializer_list<std::string_view> names,
                                                std::int64_t least, std::string_view expected) {
    std::string name;
    const toml::node* node = find(names, &name);
    if (node == nullptr) {
      return std::optional<std::int64_t>();
    }
    const auto* v = node->as_integer();
    if (v == nullptr || v->get() < least) {
      return error(*node, name, str_cat("expected ", expected, ", got ", text_of(*node)));
    }
    return std::optional<std::int64_t>(v->get());
  }

  Expected<std::optional<bool>> boolean(std::initializer_list<std::string_view> names) {
    std::string name;
    const toml::node* node = find(names, &name);
    if (node == nullptr) {
      return std::optional<bool>();
    }
    const auto* v = node->as_boolean();
    if (v == nullptr) {
      return error(*node, name, str_cat("expected true or false, got ", text_of(*node)));
    }
    return std::optional<bool>(v->get());
  }

  // A string, or (selective_ac_option) an integer written without quotes, as text.
  Expected<std::optional<std::string>> text(std::initializer_list<std::string_view> names,
                                            std::string_view expected, std::string* found) {
    const toml::node* node = find(names, found);
    if (node == nullptr) {
      return std::optional<std::string>();
    }
    if (const auto* s = node->as_string()) {
      return std::optional<std::string>(s->get());
    }
    if (const auto* i = node->as_integer()) {
      return std::optional<std::string>(std::to_string(i->get()));
    }
    return error(*node, *found, str_cat("expected ", expected, ", got ", text_of(*node)));
  }

  // An array of strings; a single string is taken as a one-item list (torchtitan's CLI form).
  Expected<std::optional<std::vector<std::string>>> strings(
      std::initializer_list<std::string_view> names) {
    std::string name;
    const toml::node* node = find(names, &name);
    if (node == nullptr) {
      return std::optional<std::vector<std::string>>();
    }
    std::vector<std::string> out;
    if (const auto* s = node->as_string()) {
      out.push_back(s->get());
      return std::optional<std::vector<std::string>>(std::move(out));
    }
    const auto* array = node->as_array();
    if (array != nullptr) {
      for (const toml::node& item : *array) {
        const auto* s = item.as_string();
        if (s == nullptr) {
          array = nullptr;
          break;
        }
        out.push_back(s->get());
      }
    }
    if (array == nullptr) {
      return error(*node, name, str_cat("expected a list of strings, got ", text_of(*node)));
    }
    return std::optional<std::vector<std::string>>(std::move(out));
  }

  // The line of `name` in the file (0 when absent).
  std::int64_t line_of(std::string_view name) const {
    const toml::node* node = root_.at_path(name).node();
    return node != nullptr ? static_cast<std::int64_t>(node->source().begin.line) : 0;
  }

  Error error(const toml::node& node, std::string_view name, std::string_view what) const {
    return config_error(path_, static_cast<std::int64_t>(node.source().begin.line), name, what);
  }

  // Every leaf (a value or an array; tables are walked into) read (`read` true) or not, in
  // file order.
  std::vector<std::string> leaves(bool read) const {
    std::vector<std::pair<std::pair<std::int64_t, std::int64_t>, std::string>> leaves;
    collect(root_, "", &leaves);
    std::sort(leaves.begin(), leaves.end());
    std::vector<std::string> out;
    for (auto& leaf : leaves) {
      if ((used_.count(leaf.second) != 0) == read) {
        out.push_back(std::move(leaf.second));
      }
    }
    return out;
  }

 private:
  static void collect(
      const toml::table& table, const std::string& prefix,
      std::vector<std::pair<std::pair<std::int64_t, std::int64_t>, std::string>>* leaves) {
    for (const auto& [key, node] : table) {
      std::string name = prefix.empty() ? std::string(key.str()) : str_cat(prefix, ".", key.str());
      if (const auto* sub = node.as_table()) {
        collect(*sub, name, leaves);
        continue;
      }
      const auto& begin = node.source().begin;
      leaves->push_back(
          {{static_cast<std::int64_t>(begin.line), static_cast<std::int64_t>(begin.column)},
           std::move(name)});
    }
  }

  const toml::table& root_;
  const std::string& path_;
  std::set<std::string> used_;
};

// torchtitan's llama3 flavors and the presets that match them; a Llama 3.1 preset is preferred
// when it exists (torchtitan's llama3 train configs load the Llama 3.1 checkpoints,
// tests/cli/testdata/torchtitan/).
std::optional<std::string> preset_of(std::string_view name, std::string_view flavor) {
  if (name != "llama3") {
    return std::nullopt;
  }
  std::vector<std::string_view> candidates;
  if (flavor == "8B") {
    candidates = {"llama-3.1-8b", "llama-3-8b"};
  } else if (flavor == "70B") {
    candidates = {"llama-3.1-70b", "llama-3-70b"};
  } else if (flavor == "405B") {
    candidates = {"llama-3.1-405b"};
  }
  for (std::string_view preset : candidates) {
    if (find_model_preset(preset) != nullptr) {
      return std::string(preset);
    }
  }
  return std::nullopt;
}

// bfloat16 | float32 -> bf16 | fp32.
Expected<std::optional<std::string>> dtype_field(FieldReader& reader, std::string_view name,
                                                 const std::string& path) {
  std::string found;
  FSDP_TRY(auto text, reader.text({name}, "'bfloat16' or 'float32'", &found));
  if (!text) {
    return std::optional<std::string>();
  }
  if (*text == "bfloat16") {
    return std::optional<std::string>("bf16");
  }
  if (*text == "float32") {
    return std::optional<std::string>("fp32");
  }
  return config_error(path, reader.line_of(name), name,
                      str_cat("expected 'bfloat16' or 'float32', got '", *text, "'"));
}

}  // namespace

Expected<TorchtitanConfig> parse_torchtitan_config(std::string_view text, const std::string& path) {
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    return Error(ErrorCode::kInvalidArgument, str_cat(path, ":", begin.line, ":", begin.column,
                                                      ": TOML syntax error: ", e.description()));
  }
  TorchtitanConfig c;
  c.path = path;
  FieldReader r(root, path);
  RunOptionsPatch& o = c.options;
  // torchtitan runs FSDP2 (fully_shard) for its data-parallel sharding.
  o.framework = "fsdp2";

  // The model: torchtitan's defaults are llama3 / debugmodel, which no preset matches.
  std::string found;
  FSDP_TRY(auto name, r.text({"model.name"}, "a string", &found));
  FSDP_TRY(auto flavor, r.text({"model.flavor"}, "a string", &found));
  const std::string model_name = name.value_or("llama3");
  const std::string model_flavor = flavor.value_or("debugmodel");
  if (auto preset = preset_of(model_name, model_flavor)) {
    o.model = *preset;
  } else {
    const std::int64_t line = std::max(r.line_of("model.flavor"), r.line_of("model.name"));
    c.model_error = str_cat(line > 0 ? str_cat(path, ":", line) : path, ": model.name '",
                            model_name, "' with model.flavor '", model_flavor,
                            "' has no fsdpsim preset (llama3 8B, 70B and 405B do); give --model");
  }

  // Float8: model.converters (2025: "float8"; from 2025-09: "quantize.linear.float8"), or the
  // oldest releases' float8.enable_float8_linear.
  bool fp8 = false;
  FSDP_TRY(auto converters, r.strings({"model.converters"}));
  for (const std::string& converter : converters.value_or(std::vector<std::string>{})) {
    if (converter == "float8" || converter == "quantize.linear.float8") {
      fp8 = true;
    } else {
      return config_error(path, r.line_of("model.converters"), "model.converters",
                          str_cat("converter '", converter,
                                  "' is not modelled; expected "
                                  "'float8' or 'quantize.linear.float8'"));
    }
  }
  FSDP_TRY(auto float8_linear, r.boolean({"float8.enable_float8_linear"}));
  fp8 = fp8 || float8_linear.value_or(false);
  o.compute_dtype = fp8 ? "fp8" : "bf16";
  FSDP_TRY(auto fp8_gather, r.boolean({"quantize.linear.float8.enable_fsdp_float8_all_gather",
                                       "float8.enable_fsdp_float8_all_gather"}));
  // torchtitan applies the float8 all-gather only to the linears the converter swapped.
  o.fp8_all_gather = fp8 && fp8_gather.value_or(false);

  // The optimizer: torchtitan builds Adam or AdamW (fsdpsim's adam: the same memory and kernels).
  FSDP_TRY(auto optimizer, r.text({"optimizer.name"}, "a string", &found));
  if (optimizer && *optimizer != "AdamW" && *optimizer != "Adam") {
    return config_error(path, r.line_of("optimizer.name"), "optimizer.name",
                        str_cat("expected 'AdamW' or 'Adam', got '", *optimizer, "'"));
  }
  o.optimizer = "adam";

  // Batch and sequence (older releases: training.batch_size).
  FSDP_TRY(auto seq_len, r.integer({"training.seq_len"}, 1, "a positive integer"));
  o.seq_len = seq_len.value_or(2048);
  FSDP_TRY(auto local, r.integer({"training.local_batch_size", "training.batch_size"}, 1,
                                 "a positive integer"));
  c.local_batch_size = local.value_or(8);
  o.micro_batch_size = c.local_batch_size;
  FSDP_TRY(auto global, r.integer({"training.global_batch_size"}, -1, "a positive integer or -1"));
  c.global_batch_size = global.value_or(-1);
  if (c.global_batch_size == 0) {
    return config_error(path, r.line_of("training.global_batch_size"), "training.global_batch_size",
                        "expected a positive integer or -1, got 0");
  }

  // Precision (MixedPrecisionPolicy of fully_shard).
  FSDP_TRY(auto param_dtype, dtype_field(r, "training.mixed_precision_param", path));
  o.param_dtype = param_dtype.value_or("bf16");
  FSDP_TRY(auto reduce_dtype, dtype_field(r, "training.mixed_precision_reduce", path));
  o.reduce_dtype = reduce_dtype.value_or("fp32");

  // torch.compile: compile.enable with compile.components (model, loss); older: training.compile.
  FSDP_TRY(auto compile_enable, r.boolean({"compile.enable", "training.compile"}));
  FSDP_TRY(auto components, r.strings({"compile.components"}));
  const std::vector<std::string> parts =
      components.value_or(std::vector<std::string>{"model", "loss"});
  o.compile = compile_enable.value_or(false) &&
              std::find(parts.begin(), parts.end(), "model") != parts.end();

  // Activation checkpointing. torchtitan's full wraps each transformer block: fsdpsim's full
  // (docs/cli.md, the --recompute row).
  std::string mode_field;
  FSDP_TRY(auto ac_mode, r.text({"activation_checkpoint.mode"}, "a string", &mode_field));
  std::string option_field;
  FSDP_TRY(auto ac_option, r.text({"activation_checkpoint.selective_ac_option"},
                                  "'op' or an integer", &option_field));
  const std::string mode = ac_mode.value_or("selective");
  if (mode == "none") {
    o.recompute = "none";
  } else if (mode == "full") {
    o.recompute = "full";
  } else if (mode == "selective") {
    const std::string option = ac_option.value_or("2");
    if (option == "op") {
      o.recompute = "selective-op";
    } else {
      std::int64_t k = 0;
      std::size_t used = 0;
      try {
        k = std::stoll(option, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != option.size() || k < 1) {
        return config_error(path, r.line_of("activation_checkpoint.selective_ac_option"),
                            "activation_checkpoint.selective_ac_option",
                            str_cat("expected 'op' or a positive integer, got '", option, "'"));
      }
      o.recompute = str_cat("selective-layer:", k);
    }
  } else {
    return config_error(path, r.line_of("activation_checkpoint.mode"), "activation_checkpoint.mode",
                        str_cat("expected 'none', 'selective' or 'full', got '", mode, "'",
                                mode == "memory_budget" ? " (not modelled)" : ""));
  }

  // Parallelism (older releases: the degrees under [training], pipeline and context parallelism
  // and async TP under [experimental]).
  for (const auto& [field, older] :
       {std::pair<std::string_view, std::string_view>{"parallelism.pipeline_parallel_degree",
                                                      "experimental.pipeline_parallel_degree"},
        {"parallelism.context_parallel_degree", "experimental.context_parallel_degree"}}) {
    std::string which;
    const toml::node* node = r.find({field, older}, &which);
    if (node == nullptr) {
      continue;
    }
    const auto* v = node->as_integer();
    if (v == nullptr || v->get() < 1) {
      return r.error(*node, which, str_cat("expected a positive integer, got ", text_of(*node)));
    }
    if (v->get() > 1) {
      return r.error(*node, which,
                     str_cat(v->get(),
                             ": pipeline and context parallelism are not modelled; "
                             "expected 1"));
    }
  }
  FSDP_TRY(auto replicate, r.integer({"parallelism.data_parallel_replicate_degree",
                                      "training.data_parallel_replicate_degree"},
                                     1, "a positive integer"));
  c.dp_replicate = replicate.value_or(1);
  FSDP_TRY(auto shard, r.integer({"parallelism.data_parallel_shard_degree",
                                  "training.data_parallel_shard_degree"},
                                 -1, "a positive integer or -1"));
  c.dp_shard = shard.value_or(-1);
  {
    std::string field = "parallelism.data_parallel_shard_degree";
    std::int64_t line = r.line_of(field);
    if (line == 0 && r.line_of("training.data_parallel_shard_degree") > 0) {
      field = "training.data_parallel_shard_degree";
      line = r.line_of(field);
    }
    c.dp_shard_at = line > 0 ? str_cat(path, ":", line, ": ", field)
                             : str_cat(path, ": ", field, " (torchtitan's default)");
  }
  if (c.dp_shard == 0) {
    return config_error(path, r.line_of("parallelism.data_parallel_shard_degree"),
                        "parallelism.data_parallel_shard_degree",
                        "expected a positive integer or -1, got 0");
  }
  FSDP_TRY(auto tp,
           r.integer({"parallelism.tensor_parallel_degree", "training.tensor_parallel_degree"}, 1,
                     "a positive integer"));
  c.tp = tp.value_or(1);
  FSDP_TRY(auto ep, r.integer({"parallelism.expert_parallel_degree"}, 1, "a positive integer"));
  c.ep = ep.value_or(1);
  if (c.ep > 1 && c.dp_shard > 0 && c.dp_shard % c.ep != 0) {
    return config_error(path, r.line_of("parallelism.expert_parallel_degree"),
                        "parallelism.expert_parallel_degree",
                        str_cat(c.ep, " does not divide data_parallel_shard_degree ", c.dp_shard,
                                " (torchtitan borrows the expert-parallel ranks from it)"));
  }
  if (c.ep > 1 && c.dp_replicate > 1) {
    return config_error(path, r.line_of("parallelism.expert_parallel_degree"),
                        "parallelism.expert_parallel_degree",
                        str_cat(c.ep, " with data_parallel_replicate_degree ", c.dp_replicate,
                                " is not modelled; expected 1 for one of them"));
  }
  // FSDP over the shard degree; HSDP with a replicate degree; DDP (noshard) with only that.
  o.strategy = c.dp_replicate > 1 ? (c.dp_shard == 1 ? "noshard" : "hsdp") : "zero3";
  if (c.dp_shard > 0) {
    std::string mesh;
    if (c.dp_replicate > 1 && c.dp_shard > 1) {
      mesh = str_cat("dp_outer=", c.dp_replicate, ",dp_inner=", c.dp_shard);
    } else if (c.dp_replicate > 1) {
      mesh = str_cat("dp=", c.dp_replicate);
    } else if (c.ep > 1) {
      mesh = str_cat("dp=", c.dp_shard / c.ep, ",ep=", c.ep);
    } else {
      mesh = str_cat("dp=", c.dp_shard);
    }
    if (c.tp > 1) {
      mesh += str_cat(",tp=", c.tp);
    }
    o.mesh = mesh;
  }
  // torchtitan's tensor parallelism shards the norms' sequence (SequenceParallel): always on.
  o.sequence_parallel = c.tp > 1;
  FSDP_TRY(auto reshard,
           r.text({"parallelism.fsdp_reshard_after_forward", "training.fsdp_reshard_after_forward"},
                  "'default', 'always' or 'never'", &found));
  const std::string policy = reshard.value_or("default");
  if (policy == "default") {
    // Without pipeline parallelism: every block but the last (docs/design/simulator.md).
    o.reshard_after_forward = "all-but-last";
  } else if (policy == "always") {
    o.reshard_after_forward = "all";
  } else if (policy == "never") {
    o.reshard_after_forward = "none";
  } else {
    return config_error(path, r.line_of(found), found,
                        str_cat("expected 'default', 'always' or 'never', got '", policy, "'"));
  }

  c.ignored_fields = r.leaves(/*read=*/false);
  c.read_fields = r.leaves(/*read=*/true);
  return c;
}

Expected<TorchtitanConfig> read_torchtitan_config(const std::string& path) {
  auto text = read_input_file(path);
  if (!text) {
    return Error(text.error()).with_context("--config");
  }
  return parse_torchtitan_config(*text, path);
}

std::optional<std::int64_t> config_gpus(const TorchtitanConfig& config) {
  if (config.dp_shard < 1) {
    return std::nullopt;
  }
  return config.dp_replicate * config.dp_shard * config.tp;
}

std::optional<std::int64_t> config_global_batch(const TorchtitanConfig& config) {
  if (config.global_batch_size > 0) {
    return config.global_batch_size;
  }
  if (config.dp_shard < 1) {
    return std::nullopt;
  }
  return config.local_batch_size * config.dp_replicate * config.dp_shard;
}

Status layer_run_options(const RunOptionsPatch& profile, const TorchtitanConfig* config,
                         const std::function<bool(std::string_view option)>& given,
                         RunOptions* options) {
  auto was_given = [&](std::string_view name) { return given && given(name); };
  apply_patch(config != nullptr ? layer(profile, config->options) : profile, given, options);
  if (config == nullptr) {
    return ok_status();
  }
  if (!config->model_error.empty() && !was_given("model")) {
    return Error(ErrorCode::kInvalidArgument, config->model_error);
  }
  if (!config->options.mesh && !was_given("mesh")) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(config->dp_shard_at,
                         " is -1 (the GPUs left over), so "
                         "the file does not give the job size; give --mesh, e.g. dp=64",
                         config->tp > 1 ? str_cat(",tp=", config->tp) : std::string()));
  }
  if (!was_given("microbatches")) {
    if (config->global_batch_size < 0) {
      options->microbatches = 1;
    } else {
      auto mesh = parse_run_mesh(options->mesh);
      if (!mesh) {
        return Error(mesh.error()).with_context("--mesh");
      }
      std::int64_t data_ranks = 1;
      for (const MeshAxis& axis : mesh->axes()) {
        data_ranks *= axis.name == "tp" ? 1 : axis.size;
      }
      const std::int64_t per_step = options->micro_batch_size * data_ranks;
      if (config->global_batch_size % per_step != 0) {
        return Error(
            ErrorCode::kInvalidArgument,
            str_cat(config->path, ": training.global_batch_size ", config->global_batch_size,
                    " is not a multiple of training.local_batch_size (micro-batch size) ",
                    options->micro_batch_size, " x data-parallel degree ", data_ranks, " (mesh ",
                    options->mesh, ") = ", per_step));
      }
      options->microbatches = config->global_batch_size / per_step;
    }
  }
  return ok_status();
}

}  // namespace fsdp::planner
