// SPDX-License-Identifier: Apache-2.0
// `fsdpsim plan`: the best configurations of a model on N GPUs at a fixed sequence length and
// global batch, ranked by tokens/s/GPU with why the winner wins (planner/plan.h).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/command.h"
#include "cli/list_argument.h"
#include "cli/model_argument.h"
#include "cli/run_options.h"
#include "cli/subcommands.h"
#include "core/base/checked_math.h"
#include "core/base/strings.h"
#include "planner/plan.h"

namespace po = boost::program_options;

namespace fsdp::cli {
namespace {

constexpr std::string_view kUsage =
    "plan --model M --gpus N --seq-len S --global-batch-tokens T [--hardware H]\n"
    "         [--framework F] [--compile] [--compute-dtype D] [--strategies LIST] [--tp LIST]\n"
    "         [--ep LIST] [--recompute LIST] [--reshard-after-forward LIST] [--prefetch LIST]\n"
    "         [--top K] [--jobs N] [--dry-run] [--format text|json] [--config FILE.toml]\n"
    "         [--profile NAME]";

constexpr std::string_view kDescription =
    "Finds the fastest configurations of a model on N GPUs for one global batch: it searches\n"
    "sharding strategies (zero3, hsdp and hfsdp with shard groups of a node and more, zero2,\n"
    "zero1, noshard), tensor-parallel sizes with and without sequence parallelism, expert-\n"
    "parallel sizes for MoE models, micro-batch size x microbatch count (only those giving the\n"
    "global batch exactly), activation checkpointing, reshard after forward and prefetch depth.\n"
    "Configurations whose memory lower bound (resident buffers, runtime, one microbatch's\n"
    "activations) exceeds the device are not simulated; the rest are simulated in order of their\n"
    "throughput bound (compute alone) until none left can enter the top K. It ranks those that\n"
    "fit (peak reserved + runtime within device memory) by tokens/s/GPU and says why the winner\n"
    "beats the runner-up. `fsdpsim sweep` simulates raw grids instead.\n\n"
    "examples:\n"
    "  fsdpsim plan --model llama-3-8b --gpus 64 --seq-len 8192 --global-batch-tokens 4194304\n"
    "  fsdpsim plan --model llama-3.1-405b --gpus 1024 --seq-len 8192 \\\n"
    "      --global-batch-tokens 16777216 --framework fsdp2 --compile --reduce-dtype fp32\n"
    "  fsdpsim plan --model mixtral-8x7b --gpus 64 --seq-len 4096 --global-batch-tokens 4194304 \\\n"
    "      --ep 1,2,4,8 --dry-run\n"
    "  fsdpsim plan --config llama3_8b.toml --gpus 64 --global-batch-size 64";

Expected<std::vector<std::string>> words(const char* option, const std::string& text) {
  std::vector<std::string> out;
  if (text.empty()) {
    return out;
  }
  for (std::string& item : split_commas(text)) {
    if (item.empty()) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("--", option, " '", text, "' has an empty item; expected a "
                           "comma-separated list"));
    }
    out.push_back(std::move(item));
  }
  return out;
}

Expected<std::vector<std::int64_t>> counts(const char* option, const std::string& text,
                                           std::int64_t least, std::int64_t most) {
  FSDP_TRY(const std::vector<std::string> items, words(option, text));
  std::vector<std::int64_t> out;
  for (const std::string& item : items) {
    std::int64_t v = 0;
    std::size_t used = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < least || v > most) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("--", option, " item '", item, "': expected an integer in [", least,
                           ", ", most, "]"));
    }
    out.push_back(v);
  }
  return out;
}

// The fields of `config` that were read but that plan does not use, in file order, listed with
// the ignored ones: checkpointing and reshard after forward (the planner chooses them); the
// degrees unless they give the job size or the global batch; the batch fields unless they give
// the global batch.
std::vector<std::string> fields_plan_does_not_use(const planner::TorchtitanConfig& config,
                                                  bool size_from_file, bool batch_from_file) {
  const bool batch_from_degrees = batch_from_file && config.global_batch_size < 0;
  std::vector<std::string> out;
  for (const std::string& field : config.read_fields) {
    const bool local = field == "training.local_batch_size" || field == "training.batch_size";
    const bool degree = field.ends_with("data_parallel_replicate_degree") ||
                        field.ends_with("data_parallel_shard_degree") ||
                        field.ends_with("tensor_parallel_degree") ||
                        field.ends_with("expert_parallel_degree");
    if (field.rfind("activation_checkpoint.", 0) == 0 ||
        field.ends_with(".fsdp_reshard_after_forward") ||
        (degree && !size_from_file && !batch_from_degrees) ||
        (local && !batch_from_degrees) ||
        (field == "training.global_batch_size" && !batch_from_file)) {
      out.push_back(field);
    }
  }
  return out;
}

}  // namespace

int run_plan_command(std::span<const std::string> args, Io& io) {
  po::options_description desc("options");
  planner::PlanRequest req;
  RunOptions& base = req.base;
  std::int64_t nodes = 0;
  std::int64_t global_batch_size = 0;
  std::string strategies;
  std::string tp;
  std::string ep;
  std::string recompute;
  std::string reshard;
  std::string prefetch;
  std::string format = "text";
  int jobs = 0;
  // clang-format off
  desc.add_options()
      ("model", po::value(&base.model)->default_value(base.model),
       "preset name (fsdpsim model --list) or a hub config.json / fsdpsim model JSON file")
      ("hardware", po::value(&req.sim.hardware)->default_value(req.sim.hardware),
       "a preset (fsdpsim hardware) or a hardware JSON file")
      ("gpus", po::value(&req.gpus), "GPUs in the job")
      ("nodes", po::value(&nodes), "nodes instead of --gpus: GPUs = nodes x the hardware's devices per node")
      ("seq-len", po::value(&base.seq_len)->default_value(base.seq_len), "tokens per sequence")
      ("global-batch-tokens", po::value(&req.global_batch_tokens),
       "tokens per optimizer step over the whole job (a multiple of --seq-len)")
      ("global-batch-size", po::value(&global_batch_size),
       "sequences per optimizer step instead of --global-batch-tokens (torchtitan's "
       "training.global_batch_size, Megatron's --global-batch-size)")
      ("strategies", po::value(&strategies),
       "sharding strategies to search (default: zero3,hsdp,hfsdp,zero2,zero1,noshard)")
      ("tp", po::value(&tp), "tensor-parallel sizes (default: 1,2,4,8 up to the node size)")
      ("ep", po::value(&ep), "expert-parallel sizes (default: 1 for dense models; powers of two "
       "dividing the experts for MoE)")
      ("recompute", po::value(&recompute),
       "checkpointing modes to search (default: none,selective-op,full)")
      ("reshard-after-forward", po::value(&reshard), "all | all-but-last | none, a list (default: all,none)")
      ("prefetch", po::value(&prefetch), "prefetch depths to search (default: 1,2)")
      ("max-micro-batch-size", po::value(&req.max_micro_batch_size)->default_value(req.max_micro_batch_size),
       "largest micro-batch size (sequences per data rank) to try")
      ("top", po::value(&req.top)->default_value(req.top), "configurations to rank and show")
      ("jobs,j", po::value(&jobs)->default_value(0), "threads (0: one per core)")
      ("dry-run", po::bool_switch(&req.dry_run),
       "count the space and what the memory bound leaves; simulate nothing")
      ("format", po::value(&format)->default_value(format), "text | json")
      ("framework", po::value(&base.framework)->default_value(base.framework),
       "megatron-fsdp | fsdp2 | fsdp1")
      ("compile", po::bool_switch(&base.compile), "the model runs under torch.compile")
      ("compute-dtype", po::value(&base.compute_dtype)->default_value(base.compute_dtype), "bf16 | fp8")
      ("kernels", po::value(&base.kernels)->default_value(base.kernels), "torch | te | auto")
      ("param-dtype", po::value(&base.param_dtype), "bf16 | fp32 (default: the model's)")
      ("reduce-dtype", po::value(&base.reduce_dtype), "fp32 | bf16 (default: the gradient dtype)")
      ("fp8-all-gather", po::bool_switch(&base.fp8_all_gather), "weights gathered in fp8")
      ("main-params", po::value(&base.main_params)->default_value(base.main_params), "fp32 | bf16 | fp16")
      ("optimizer", po::value(&base.optimizer)->default_value(base.optimizer), "sgd | sgd-momentum | adam")
      ("capacity-factor", po::value(&base.capacity_factor)->default_value(base.capacity_factor),
       "with ep: routed tokens per expert as a multiple of the balanced share");
  // clang-format on
  add_model_size_options(desc, &base.sizes);
  ConfigArguments config_args;
  add_config_options(desc, &config_args);
  po::variables_map vm;
  if (auto done = parse_command_line("plan", kUsage, kDescription, desc, args, vm, io)) {
    return *done;
  }
  auto usage = [&](const std::string& message) { return report_usage_error(io, "plan", message); };
  if (format != "text" && format != "json") {
    return usage(str_cat("--format is '", format, "'; expected text or json"));
  }
  if (vm.count("gpus") != 0 && vm.count("nodes") != 0) {
    return usage("--gpus and --nodes both give the job's size; give one");
  }
  if (vm.count("global-batch-tokens") != 0 && vm.count("global-batch-size") != 0) {
    return usage("--global-batch-tokens and --global-batch-size both give the global batch; give one");
  }
  // The planner chooses these itself; a config's values for them are not used (and listed).
  static constexpr std::string_view kChosen[] = {
      "mesh", "strategy", "microbatches", "micro-batch-size", "recompute",
      "reshard-after-forward", "sequence-parallel"};
  auto config = layer_config_arguments(vm, config_args, kChosen, &base);
  if (!config) {
    return report_error(io, config.error());
  }
  std::vector<std::string> ignored;
  const bool size_given = vm.count("gpus") != 0 || vm.count("nodes") != 0;
  const bool batch_given = vm.count("global-batch-tokens") != 0 || vm.count("global-batch-size") != 0;
  if (*config) {
    const auto gpus = size_given ? std::nullopt : planner::config_gpus(**config);
    const auto sequences = batch_given ? std::nullopt : planner::config_global_batch(**config);
    req.gpus = gpus.value_or(req.gpus);
    global_batch_size = sequences.value_or(global_batch_size);
    ignored = (*config)->ignored_fields;
    for (std::string& field :
         fields_plan_does_not_use(**config, gpus.has_value(), sequences.has_value())) {
      ignored.push_back(std::move(field));
    }
  }
  if (!size_given && req.gpus == 0) {
    return usage(*config ? "the job's size is missing (the config's data_parallel_shard_degree is -1): "
                           "give --gpus N or --nodes N"
                         : "the job's size is missing: give --gpus N or --nodes N");
  }
  if (!batch_given && global_batch_size == 0) {
    return usage(*config ? "the global batch is missing (the config gives neither training."
                           "global_batch_size nor a data_parallel_shard_degree): give "
                           "--global-batch-tokens T or --global-batch-size B"
                         : "the global batch is missing: give --global-batch-tokens T or "
                           "--global-batch-size B");
  }
  if (jobs < 0) {
    return usage(str_cat("--jobs is ", jobs, "; expected >= 0 (0: one per core)"));
  }
  req.jobs = jobs > 0 ? jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (vm.count("nodes") != 0) {
    auto hardware = load_hardware_argument(req.sim.hardware);
    if (!hardware) {
      return report_error(io, hardware.error().with_context("--hardware"));
    }
    if (nodes < 1 || !checked_mul(nodes, hardware->devices_per_node(), &req.gpus)) {
      return report_error(io, Error(ErrorCode::kInvalidArgument,
                                    str_cat("--nodes is ", nodes, "; expected >= 1 (and at most "
                                            "2^30 GPUs)")));
    }
  }
  if (vm.count("global-batch-size") != 0 || (!batch_given && global_batch_size != 0)) {
    if (global_batch_size < 1 ||
        !checked_mul(global_batch_size, base.seq_len, &req.global_batch_tokens)) {
      return report_error(io, Error(ErrorCode::kInvalidArgument,
                                    str_cat("--global-batch-size is ", global_batch_size,
                                            "; expected >= 1")));
    }
  }
  auto s = words("strategies", strategies);
  auto t = counts("tp", tp, 1, 1 << 20);
  auto e = counts("ep", ep, 1, 1 << 20);
  auto r = words("recompute", recompute);
  auto rs = words("reshard-after-forward", reshard);
  auto p = counts("prefetch", prefetch, 0, 64);
  for (const Error* err : {s ? nullptr : &s.error(), t ? nullptr : &t.error(),
                           e ? nullptr : &e.error(), r ? nullptr : &r.error(),
                           rs ? nullptr : &rs.error(), p ? nullptr : &p.error()}) {
    if (err != nullptr) {
      return report_usage_error(io, "plan", err->message());
    }
  }
  req.strategies = *s;
  req.tp_sizes = *t;
  req.ep_sizes = *e;
  req.recompute = *r;
  req.reshard = *rs;
  req.prefetch = *p;
  for (const std::string& item : req.reshard) {
    if (item != "all" && item != "all-but-last" && item != "none") {
      return report_usage_error(io, "plan",
                                str_cat("--reshard-after-forward item '", item,
                                        "': expected all, all-but-last or none"));
    }
  }
  std::function<void(std::int64_t, std::int64_t)> announce = [&](std::int64_t total,
                                                                  std::int64_t left) {
    {
      io.err << "plan: " << total << " configurations; " << left
          << " pass the memory bound and are simulated in order of their throughput bound until "
             "none left can enter the top "
          << req.top << (req.dry_run ? " (dry run: none simulated)" : "") << "\n";
    }
  };
  std::function<void(std::int64_t, std::int64_t)> progress;
  if (io.err_is_terminal) {
    progress = [&io](std::int64_t done, std::int64_t total) {
      draw_progress(io.err, done, total, "configurations in bound order", false);
    };
  }
  auto result = planner::run_plan(req, announce, progress);
  if (io.err_is_terminal && progress) {
    io.err << "\n";
  }
  if (!result) {
    return report_error(io, result.error());
  }
  if (format == "json") {
    nlohmann::json report = planner::plan_report_json(req, *result);
    if (*config) {
      report["config_ignored_fields"] = ignored;
    }
    io.out << report.dump(2) << "\n";
  } else {
    io.out << planner::plan_report_text(req, *result);
  }
  if (*config) {
    print_ignored_fields(io.err, ignored);
  }
  return kExitOk;
}

}  // namespace fsdp::cli
