// SPDX-License-Identifier: Apache-2.0
// `fsdpsim sweep`: simulates every configuration of a search space (meshes, strategies, layouts,
// microbatch counts, prefetch policies, stream modes) for one model and cluster on a thread pool
// and prints them with the Pareto front of speed vs peak memory. Under mpirun the configurations
// are dealt round-robin over the MPI ranks and gathered on rank 0, which alone prints.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <sstream>
#include <streambuf>
#include <thread>

#include "backends/cpu/mpi_session.h"
#include "cli/command.h"
#include "planner/resource_estimate.h"
#include "cli/run_options.h"
#include "cli/subcommands.h"
#include "cli/sweep_format.h"
#include "core/base/checked_math.h"
#include "core/base/strings.h"
#include "core/model/model.h"
#include "core/model/model_split.h"
#include "core/policy/config_options.h"
#include "core/policy/recompute_policy.h"
#include "planner/step_report.h"
#include "sweep/sweep.h"

namespace po = boost::program_options;

namespace fsdp::cli {
namespace {

constexpr std::string_view kUsage =
    "sweep [--model M] [--hardware H] [--nodes N | --ranks N] [--strategies LIST]\n"
    "         [--dp-inner LIST] [--layouts LIST] [--microbatches LIST] [--prefetch LIST]\n"
    "         [--streams LIST] [--recompute LIST] [--jobs N] [--format text|json]";

constexpr std::string_view kDescription =
    "Simulates one optimizer step (as `fsdpsim simulate` does) for every combination of the\n"
    "listed strategies, meshes (dp=N for noshard/zero*, every dp_outer x dp_inner split for\n"
    "hsdp/hfsdp), shard layouts (unpadded only on 1-axis sharded meshes), microbatch counts,\n"
    "prefetch depths, stream modes and recompute modes, then marks the Pareto front: the\n"
    "configurations that fit the device and that no other fitting one beats in both time per\n"
    "microbatch and peak memory. Lists are comma-separated. Runs on --jobs threads; under\n"
    "mpirun the configurations are spread over all MPI ranks and rank 0 prints the one table.\n\n"
    "examples:\n"
    "  fsdpsim sweep --model llama-3-8b --nodes 2 --microbatches 4 --prefetch 0,1,2\n"
    "  fsdpsim sweep --strategies zero3,hsdp --dp-inner 8 --format json\n"
    "  fsdpsim sweep --strategies zero3 --recompute none,full,selective-op\n"
    "  mpirun -np 4 fsdpsim sweep --model llama-3-70b --nodes 16 --recompute";

constexpr std::int64_t kMaxConfigurations = 1'000'000;
constexpr std::int64_t kMaxMicrobatches = 1'000'000;

// Test-only fault injection (tests/regressions/multirank_regression_test.cc): under mpirun, the
// rank named by FSDP_TEST_SWEEP_FAIL_SETUP_RANK fails its setup; -1 when unset.
std::int64_t sweep_test_fail_setup_rank() {
  const char* text = std::getenv("FSDP_TEST_SWEEP_FAIL_SETUP_RANK");
  if (text == nullptr) {
    return -1;
  }
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  return end != text && *end == '\0' ? v : -1;
}

// Discards everything: the output of ranks other than 0.
class NullBuffer : public std::streambuf {
 protected:
  int_type overflow(int_type ch) override { return traits_type::not_eof(ch); }
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::size_t begin = 0;
  while (true) {
    const std::size_t comma = text.find(',', begin);
    items.emplace_back(trim(std::string_view(text).substr(
        begin, comma == std::string::npos ? std::string::npos : comma - begin)));
    if (comma == std::string::npos) {
      return items;
    }
    begin = comma + 1;
  }
}

// Parses each item of an option's list with `parse`, dropping repeats; errors name the option.
template <class T, class Parse>
Expected<std::vector<T>> parse_list(std::string_view option, const std::string& text,
                                    Parse parse) {
  std::vector<T> values;
  for (const std::string& item : split_list(text)) {
    if (item.empty()) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("--", option, " '", text, "' has an empty item; expected a "
                           "comma-separated list"));
    }
    Expected<T> value = parse(item);
    if (!value) {
      return value.error().with_context(str_cat("--", option));
    }
    if (std::find(values.begin(), values.end(), *value) == values.end()) {
      values.push_back(*value);
    }
  }
  return values;
}

Expected<std::int64_t> parse_count(std::string_view option, const std::string& item,
                                   std::int64_t max) {
  std::int64_t v = 0;
  std::size_t used = 0;
  try {
    v = std::stoll(item, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != item.size() || v < 1 || v > max) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(option, " '", item, "': expected an integer in [1, ", max, "]"));
  }
  return v;
}

struct SweepArgs {
  std::string hardware = "h100";
  std::int64_t nodes = 2;
  std::int64_t ranks = 0;
  std::string strategies = "noshard,zero1,zero2,zero3,hsdp,hfsdp";
  std::string dp_inner;
  std::string layouts = "padded,unpadded";
  std::string microbatches = "1,4,8";
  std::string prefetch = "0,1,2";
  std::string streams = "separate,unified";
  std::string tp = "1";  // tensor-parallel sizes
  std::string ep = "1";  // expert-parallel sizes
  int jobs = 0;
  std::string format = "text";
  std::string sort = "throughput";
  bool front_only = false;
  double timeout_s = 600.0;  // under mpirun: how long a rank waits for the others
};

// Everything except the MPI agreement: options into a space and a base. Returns an exit code
// on failure (after printing the one-line error).
struct Prepared {
  sweep::SweepSpace space;
  std::optional<sweep::SweepBase> base;  // set when prepare succeeds
  SweepSort sort = SweepSort::kThroughput;
};

std::optional<int> prepare(const SweepArgs& a, const RunOptions& run, Io& io, Prepared* p) {
  auto usage = [&](const std::string& message) {
    return report_usage_error(io, "sweep", message);
  };
  if (a.format != "text" && a.format != "json") {
    return usage(str_cat("--format is '", a.format, "'; expected text or json"));
  }
  if (a.sort != "throughput" && a.sort != "memory" && a.sort != "config") {
    return usage(str_cat("--sort is '", a.sort, "'; expected throughput, memory or config"));
  }
  p->sort = a.sort == "throughput" ? SweepSort::kThroughput
            : a.sort == "memory" ? SweepSort::kMemory : SweepSort::kConfig;
  if (a.jobs < 0) {
    return usage(str_cat("--jobs is ", a.jobs, "; expected >= 1 (0: one per core)"));
  }
  if (!(a.timeout_s > 0.0 && a.timeout_s <= 1e6)) {
    return usage(str_cat("--timeout is ", a.timeout_s, "; expected seconds in (0, 1e6]"));
  }
  if (a.nodes < 1) {
    return usage(str_cat("--nodes is ", a.nodes, "; expected >= 1"));
  }
  if (a.ranks < 0) {
    return usage(str_cat("--ranks is ", a.ranks, "; expected >= 1"));
  }
  auto hardware = load_hardware_argument(a.hardware);
  if (!hardware) {
    return report_error(io, hardware.error().with_context("--hardware"));
  }
  // nodes x devices per node in checked arithmetic: --nodes 2^63-1 once wrapped to "-8 ranks".
  std::int64_t ranks = a.ranks;
  if (a.ranks == 0 && !checked_mul(a.nodes, hardware->devices_per_node(), &ranks)) {
    ranks = INT64_MAX;
  }
  if (ranks > (std::int64_t{1} << 30)) {
    return report_error(
        io, Error(ErrorCode::kInvalidArgument,
                  a.ranks > 0 ? str_cat("the sweep has ", ranks, " ranks; expected at most 2^30")
                              : str_cat("--nodes ", a.nodes, " x ", hardware->devices_per_node(),
                                        " devices per node is more than 2^30 ranks")));
  }
  p->space.ranks = ranks;
  auto strategies = parse_list<Strategy>("strategies", a.strategies, parse_strategy);
  auto layouts = parse_list<ShardLayout>("layouts", a.layouts, parse_shard_layout);
  auto microbatches = parse_list<std::int64_t>("microbatches", a.microbatches,
                                               [](const std::string& s) {
                                                 return parse_count("microbatch count", s,
                                                                    kMaxMicrobatches);
                                               });
  auto inner = a.dp_inner.empty()
                   ? Expected<std::vector<std::int64_t>>(std::vector<std::int64_t>{})
                   : parse_list<std::int64_t>("dp-inner", a.dp_inner, [&](const std::string& s)
                                                  -> Expected<std::int64_t> {
                       FSDP_TRY(std::int64_t v, parse_count("inner size", s, p->space.ranks));
                       if (p->space.ranks % v != 0) {
                         return Error(ErrorCode::kInvalidArgument,
                                      str_cat("inner size ", v, " does not divide the ",
                                              p->space.ranks, " ranks"));
                       }
                       return v;
                     });
  auto prefetch = parse_list<PrefetchPolicy>("prefetch", a.prefetch, parse_sweep_prefetch);
  auto streams = parse_list<bool>("streams", a.streams,
                                  [](const std::string& s) -> Expected<bool> {
                                    if (s == "separate" || s == "unified") {
                                      return s == "unified";
                                    }
                                    return Error(ErrorCode::kInvalidArgument,
                                                 str_cat("'", s, "': expected separate or "
                                                         "unified"));
                                  });
  // --recompute is a list here: a dimension of the space, not part of the base.
  auto recompute = parse_list<RecomputePolicy>(
      "recompute", run.recompute, [](const std::string& s) -> Expected<RecomputePolicy> {
        auto policy = RecomputePolicy::parse(s);
        if (!policy) {
          return Error(ErrorCode::kInvalidArgument,
                       str_cat("'", s,
                               "': expected none, full, selective-op, selective-layer:K or "
                               "core-attention"));
        }
        return policy;
      });
  const auto parallel_sizes = [&](const char* option, const std::string& text) {
    return parse_list<std::int64_t>(option, text, [&](const std::string& s) {
      return parse_count(str_cat(option, " size"), s, p->space.ranks);
    });
  };
  auto tp_sizes = parallel_sizes("tp", a.tp);
  auto ep_sizes = parallel_sizes("ep", a.ep);
  for (const Error* e : {tp_sizes ? nullptr : &tp_sizes.error(),
                         ep_sizes ? nullptr : &ep_sizes.error(),
                         strategies ? nullptr : &strategies.error(),
                         layouts ? nullptr : &layouts.error(),
                         microbatches ? nullptr : &microbatches.error(),
                         inner ? nullptr : &inner.error(),
                         prefetch ? nullptr : &prefetch.error(),
                         streams ? nullptr : &streams.error(),
                         recompute ? nullptr : &recompute.error()}) {
    if (e != nullptr) {
      return report_error(io, *e);
    }
  }
  p->space.strategies = *strategies;
  p->space.layouts = *layouts;
  p->space.microbatches = *microbatches;
  p->space.inner_sizes = *inner;
  p->space.prefetch = *prefetch;
  p->space.unified_streams = *streams;
  p->space.recompute = *recompute;
  p->space.tp_sizes = *tp_sizes;
  p->space.ep_sizes = *ep_sizes;
  auto workload = make_workload(run);
  if (!workload) {
    return report_error(io, workload.error());
  }
  // --optimizer, --main-params, --max-inflight-all-gathers (the mesh, strategy, layout,
  // microbatches, prefetch, streams and recompute policy are each point's).
  RunOptions base_run = run;
  base_run.recompute = "none";
  auto config = parse_config_options(base_run);
  if (!config) {
    return report_error(io, config.error());
  }
  auto model = load_model_argument(run.model);
  if (!model) {
    return report_error(io, model.error().with_context("--model"));
  }
  // The rank-local model of every split the space lists (docs/design/parallelism.md): a size the
  // model cannot be split by is an error naming the option, not a column of failed points.
  std::map<std::pair<std::int64_t, std::int64_t>, Model> split_models;
  for (const std::int64_t tp : p->space.tp_sizes) {
    for (const std::int64_t ep : p->space.ep_sizes) {
      if ((tp == 1 && ep == 1) || (tp > 1 && ep > 1) || split_models.count({tp, ep}) != 0) {
        continue;
      }
      auto split = ModelSplit::make(tp, ep, run.sequence_parallel, run.capacity_factor);
      if (!split) {
        return report_error(io, split.error().with_context("--capacity-factor"));
      }
      auto local = load_model_argument(run.model, {}, *split);
      if (!local) {
        return report_error(io, local.error().with_context(tp > 1 ? "--tp" : "--ep"));
      }
      split_models.emplace(std::pair{tp, ep}, std::move(*local));
    }
  }
  // Every thread simulates one point at a time: refuse before building any of them.
  const std::int64_t largest_mb =
      p->space.microbatches.empty() ? 1
                                    : *std::max_element(p->space.microbatches.begin(),
                                                        p->space.microbatches.end());
  const std::int64_t threads =
      a.jobs > 0 ? a.jobs : std::max<std::int64_t>(1, std::thread::hardware_concurrency());
  if (Status s = planner::check_memory_estimate(p->space.ranks, model->num_units(), largest_mb, threads);
      !s.ok()) {
    return report_error(io, s.error());
  }
  auto flops = planner::model_flops_of(run);
  if (!flops) {
    return report_error(io, flops.error().with_context("--model"));
  }
  p->base = sweep::SweepBase{std::move(*model), *hardware,         std::move(*config), *workload,
                             sim::SimOptions{},  std::move(*flops), std::move(split_models)};
  return std::nullopt;
}

}  // namespace

int run_sweep_command(std::span<const std::string> args, Io& io) {
  auto session = cpu::MpiSession::get();
  if (!session) {
    return report_error(io, session.error());
  }
  const cpu::MpiSession& mpi = **session;
  // Every rank parses and validates the same arguments; only rank 0 speaks. The others keep
  // their error line, which the setup exchange brings to rank 0.
  NullBuffer null_buffer;
  std::ostream null_stream(&null_buffer);
  std::ostringstream rank_err;
  Io quiet{null_stream, rank_err, false, false};
  Io& out = mpi.is_root() ? io : quiet;

  po::options_description desc("options");
  SweepArgs a;
  RunOptions run;
  desc.add_options()
      ("model", po::value(&run.model)->default_value(run.model),
       "preset name (fsdpsim model --list) or a hub config.json / fsdpsim model JSON file")
      ("hardware", po::value(&a.hardware)->default_value(a.hardware),
       "a preset (fsdpsim hardware lists them) or a hardware JSON file")
      ("nodes", po::value(&a.nodes)->default_value(a.nodes),
       "nodes of the hardware; ranks = nodes x devices per node")
      ("ranks", po::value(&a.ranks), "total ranks instead of whole nodes")
      ("strategies", po::value(&a.strategies)->default_value(a.strategies),
       "noshard | zero1 | zero2 | zero3 | hsdp | hfsdp, comma-separated")
      ("dp-inner", po::value(&a.dp_inner),
       "inner sizes of hsdp/hfsdp meshes, e.g. 8 (default: every divisor of the rank count)")
      ("layouts", po::value(&a.layouts)->default_value(a.layouts), "padded | unpadded")
      ("microbatches", po::value(&a.microbatches)->default_value(a.microbatches),
       "microbatch counts per optimizer step")
      ("prefetch", po::value(&a.prefetch)->default_value(a.prefetch),
       "prefetch depths (0 = none, K = next K units) or policies none | next(K) | budget(E)")
      ("streams", po::value(&a.streams)->default_value(a.streams),
       "separate (all-gather and reduce-scatter streams) | unified (one communication stream)")
      ("tp", po::value(&a.tp)->default_value(a.tp),
       "tensor-parallel sizes: a 'tp' axis of that size innermost, FSDP over ranks / tp")
      ("ep", po::value(&a.ep)->default_value(a.ep),
       "expert-parallel sizes (MoE models): an 'ep' axis innermost, experts split over it")
      ("sequence-parallel", po::bool_switch(&run.sequence_parallel),
       "the tp > 1 points use Megatron sequence parallelism")
      ("capacity-factor", po::value(&run.capacity_factor)->default_value(run.capacity_factor),
       "the ep > 1 points pad routed tokens to this multiple of the balanced share")
      ("seq-len", po::value(&run.seq_len)->default_value(run.seq_len), "tokens per sequence")
      ("micro-batch-size", po::value(&run.micro_batch_size)->default_value(run.micro_batch_size),
       "sequences per microbatch per rank")
      ("recompute", po::value(&run.recompute)->default_value(run.recompute)->implicit_value("full"),
       "activation checkpointing modes: none | full (bare --recompute: every transformer block) "
       "| full-all-units | selective-op | selective-layer:K | core-attention, comma-separated")
      ("compile", po::bool_switch(&run.compile), "compiled model (torch.compile)")
      ("compute-dtype", po::value(&run.compute_dtype)->default_value(run.compute_dtype),
       "math of the weight matmuls: bf16 | fp8")
      ("kernels", po::value(&run.kernels)->default_value(run.kernels),
       "torch | te | auto (the framework's)")
      ("framework", po::value(&run.framework)->default_value(run.framework),
       "megatron-fsdp | fsdp2 | fsdp1 (every point's buffer lifetimes and copies)")
      ("reshard-after-forward",
       po::value(&run.reshard_after_forward)->default_value(run.reshard_after_forward),
       "all | all-but-last | none")
      ("param-dtype", po::value(&run.param_dtype), "bf16 | fp32 (default: the model's)")
      ("reduce-dtype", po::value(&run.reduce_dtype), "fp32 | bf16 (default: the gradient's)")
      ("fp8-all-gather", po::bool_switch(&run.fp8_all_gather),
       "weights gathered in fp8, but the embedding's and the head's (needs --compute-dtype fp8)")
      ("optimizer", po::value(&run.optimizer)->default_value(run.optimizer),
       "sgd | sgd-momentum | adam")
      ("main-params", po::value(&run.main_params)->default_value(run.main_params),
       "main weight dtype: fp32 | bf16 | fp16")
      ("max-inflight-all-gathers", po::value(&run.max_inflight)->default_value(run.max_inflight),
       "cap on units holding gathered weights, 0 = unlimited")
      ("jobs,j", po::value(&a.jobs)->default_value(0),
       "threads per process (0: one per core)")
      ("format", po::value(&a.format)->default_value(a.format), "text | json")
      ("sort", po::value(&a.sort)->default_value(a.sort),
       "text rows by throughput (tokens/s/GPU, fitting rows first) | memory (peak reserved) | "
       "config (enumeration order)")
      ("front-only", po::bool_switch(&a.front_only), "text: list the Pareto front only")
      ("timeout", po::value(&a.timeout_s)->default_value(a.timeout_s),
       "under mpirun: seconds a rank waits for the others at setup and at the gather of the "
       "results; a rank that does not come is named and the job ends");
  po::variables_map vm;
  if (auto done = parse_command_line("sweep", kUsage, kDescription, desc, args, vm, out)) {
    return *done;
  }
  Prepared p;
  std::optional<int> failed = prepare(a, run, out, &p);
  if (!failed && mpi.distributed() && mpi.rank() == sweep_test_fail_setup_rank()) {
    failed = report_error(out, Error(ErrorCode::kInvalidArgument,
                                     "setup failed by FSDP_TEST_SWEEP_FAIL_SETUP_RANK"));
  }
  // A rank that cannot read the model or hardware file must not leave the others waiting, and
  // rank 0 says which rank failed and why (issue 16, class 5). Every rank sends its error line
  // ("" when it is ready).
  std::string mine_error = failed ? rank_err.str() : std::string();
  while (!mine_error.empty() && mine_error.back() == '\n') {
    mine_error.pop_back();
  }
  if (constexpr std::string_view kPrefix = "fsdpsim: error: "; mine_error.starts_with(kPrefix)) {
    mine_error.erase(0, kPrefix.size());
  }
  auto setup = mpi.exchange(mine_error, "the sweep's setup", a.timeout_s);
  if (!setup) {
    return report_error(out, setup.error());
  }
  if (failed) {
    return *failed;  // rank 0 printed its own error; the others stay quiet
  }
  for (std::size_t r = 0; r < setup->size(); ++r) {
    if (!(*setup)[r].empty()) {
      return report_error(out, Error(ErrorCode::kUnavailable,
                                     str_cat("MPI rank ", r, " could not set up the sweep: ",
                                             (*setup)[r])));
    }
  }
  auto enumerated = sweep::enumerate_sweep(p.space);
  if (!enumerated) {
    return report_error(out, enumerated.error());
  }
  const std::vector<sweep::SweepPoint>& points = *enumerated;
  if (points.empty()) {
    return report_error(out, Error(ErrorCode::kInvalidArgument,
                                   str_cat("the sweep has no configuration: no mesh of ",
                                           p.space.ranks, " ranks suits the strategies '",
                                           a.strategies, "'")));
  }
  if (static_cast<std::int64_t>(points.size()) > kMaxConfigurations) {
    return report_error(out, Error(ErrorCode::kInvalidArgument,
                                   str_cat("the sweep has ", points.size(),
                                           " configurations; expected at most ",
                                           kMaxConfigurations, " (restrict a list)")));
  }
  std::vector<std::int64_t> mine;
  for (std::int64_t i = mpi.rank(); i < static_cast<std::int64_t>(points.size());
       i += mpi.size()) {
    mine.push_back(i);
  }
  const int jobs =
      a.jobs > 0 ? a.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::function<void(std::int64_t, std::int64_t)> progress;
  if (mpi.is_root() && io.err_is_terminal) {
    progress = [&io](std::int64_t done, std::int64_t total) {
      draw_progress(io.err, done, total, "configurations");
    };
  }
  std::vector<sweep::SweepOutcome> local =
      sweep::run_sweep_points(*p.base, points, mine, jobs, progress);

  nlohmann::json local_json = nlohmann::json::array();
  for (const sweep::SweepOutcome& o : local) {
    local_json.push_back(sweep::outcome_to_json(o));
  }
  if (Status s = mpi.arrive("the gather of the sweep's results", a.timeout_s); !s.ok()) {
    return report_error(out, s.error());
  }
  auto gathered = mpi.gather_to_root(local_json.dump());
  if (!gathered) {
    return report_error(out, gathered.error());
  }
  if (!mpi.is_root()) {
    return kExitOk;
  }
  std::vector<sweep::SweepOutcome> outcomes(points.size());
  std::vector<bool> seen(points.size(), false);
  for (const std::string& part : *gathered) {
    const auto parsed = nlohmann::json::parse(part, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_array()) {
      return report_error(out, Error(ErrorCode::kInternal, "a rank sent malformed results"));
    }
    for (const nlohmann::json& j : parsed) {
      auto o = sweep::outcome_from_json(j);
      if (!o) {
        return report_error(out, o.error());
      }
      if (o->index < 0 || o->index >= static_cast<std::int64_t>(points.size())) {
        return report_error(out, Error(ErrorCode::kInternal,
                                       str_cat("a rank sent configuration ", o->index,
                                               " of ", points.size())));
      }
      seen[static_cast<std::size_t>(o->index)] = true;
      outcomes[static_cast<std::size_t>(o->index)] = std::move(*o);
    }
  }
  if (std::find(seen.begin(), seen.end(), false) != seen.end()) {
    return report_error(out, Error(ErrorCode::kInternal, "some configurations have no result"));
  }
  sweep::mark_pareto_front(outcomes);
  const SweepReport report{run.model,        &p.base->hardware, p.space.ranks,
                           run.seq_len * run.micro_batch_size, &points, &outcomes};
  if (a.format == "json") {
    io.out << sweep_to_json(report).dump(2) << "\n";
  } else {
    io.out << render_sweep_text(report, p.sort, a.front_only);
  }
  return kExitOk;
}

}  // namespace fsdp::cli
