// SPDX-License-Identifier: Apache-2.0
// `fsdpsim train`: trains the small decoder model (backends/model/decoder.h) for real by executing
// the schedule IR op for op (backends/exec). Under mpirun every MPI rank is one mesh rank (MPI
// communicators); otherwise the ranks are threads of this process (in-process communicators).
// Prints the loss per step; --check compares with the unsharded reference.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iomanip>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "backends/cpu/cpu_device.h"
#include "backends/cpu/in_process_training.h"
#include "backends/cpu/mpi_comm.h"
#include "backends/exec/trainer.h"
#include "cli/command.h"
#include "cli/subcommands.h"
#include "core/base/strings.h"
#include "core/schedule/trace_events.h"

#include <nlohmann/json.hpp>

namespace po = boost::program_options;

namespace fsdp::cli {
namespace {

constexpr std::string_view kUsage = "train [--backend cpu] [--mesh AXES] [--steps N] [options]";

constexpr std::string_view kDescription =
    "Trains a small decoder model (embedding, blocks of x + W2 gelu(W1 rmsnorm(x)), a head with\n"
    "cross-entropy on synthetic tokens) by executing the schedule IR for real: the same ops,\n"
    "buffers and collectives `fsdpsim schedule` prints. Under mpirun each MPI rank is one mesh\n"
    "rank; without it the ranks run as threads of this process. Prints the loss of every step.\n"
    "--check compares losses and final weights with unsharded training (relative error <= 1e-5)\n"
    "and exits 1 on a mismatch.\n\n"
    "examples:\n"
    "  fsdpsim train --mesh dp=4 --steps 20\n"
    "  mpirun -np 4 fsdpsim train --backend cpu --mesh dp=4 --steps 20 --check\n"
    "  fsdpsim train --mesh outer=2,inner=2 --strategy hfsdp --microbatches 4 --check";

constexpr double kTolerance = 1e-5;

struct TrainArgs {
  std::string backend = "cpu";
  std::string strategy = "zero3";
  std::string shard_layout = "padded";
  std::string prefetch = "next(1)";
  std::string optimizer = "adam";
  std::string main_params = "fp32";
  std::int64_t max_inflight = 0;
  bool unified_streams = false;
  bool check = false;
  std::string trace;
  std::int64_t stall_rank = -1;  // fault injection for tests: this MPI rank never joins
};

// *out = the value of `parsed`, or its error prefixed with the option's name.
template <class T>
Status take(Expected<T> parsed, std::string_view option, T* out) {
  if (!parsed) {
    return parsed.error().with_context(option);
  }
  *out = std::move(*parsed);
  return ok_status();
}

Expected<exec::TrainSpec> make_spec(const TrainArgs& args, exec::TrainSpec spec) {
  FSDP_RETURN_IF_ERROR(take(parse_strategy(args.strategy), "--strategy", &spec.strategy));
  FSDP_RETURN_IF_ERROR(
      take(parse_shard_layout(args.shard_layout), "--shard-layout", &spec.shard_layout));
  PrefetchPolicy prefetch;
  FSDP_RETURN_IF_ERROR(take(parse_prefetch_policy(args.prefetch), "--prefetch", &prefetch));
  FSDP_RETURN_IF_ERROR(
      take(SchedulePolicy::make(prefetch, prefetch, args.max_inflight, args.unified_streams),
           "--max-inflight-all-gathers", &spec.schedule));
  FSDP_RETURN_IF_ERROR(take(parse_optimizer_kind(args.optimizer), "--optimizer", &spec.optimizer));
  FSDP_RETURN_IF_ERROR(take(parse_dtype(args.main_params), "--main-params", &spec.main_params));
  return spec;
}

// The measured timeline in the simulator's Chrome-trace format (sim/report/sim_report.h): op
// names "<kind> <unit>", category = phase, one process per rank, one thread per stream, times in
// µs, plus a "memory" counter from the arena log.
nlohmann::json measured_trace(const exec::TrainSetup& setup,
                              const std::vector<const exec::RankResult*>& ranks) {
  const Schedule& schedule = setup.schedule;
  nlohmann::json events = nlohmann::json::array();
  for (const exec::RankResult* r : ranks) {
    append_trace_process(events, r->rank, str_cat("rank ", r->rank, " (measured)"));
    const RankProgram& program = schedule.program_of_rank(r->rank);
    for (const exec::OpTiming& t : r->timeline) {
      append_trace_op(events, schedule, program, t.op, r->rank, t.stream,
                      static_cast<double>(t.start_ns) / 1e3,
                      static_cast<double>(t.end_ns - t.start_ns) / 1e3, t.step);
    }
    for (const exec::ArenaRecord& m : r->arena_log) {
      append_trace_memory(events, r->rank, static_cast<double>(m.time_ns) / 1e3, m.live_bytes);
    }
  }
  return trace_document(std::move(events));
}

Status write_trace(const std::string& path, const exec::TrainSetup& setup,
                   const std::vector<const exec::RankResult*>& ranks) {
  std::ofstream out(path);
  out << measured_trace(setup, ranks).dump() << "\n";
  if (!out) {
    return Error(ErrorCode::kUnavailable, str_cat("--trace: cannot write '", path, "'"));
  }
  return ok_status();
}

std::string format_loss(std::int64_t step, double loss) {
  std::ostringstream os;
  os << "step " << (step + 1) << " loss " << std::fixed << std::setprecision(6) << loss;
  return os.str();
}

// Compares one rank's result with the reference; prints the verdict when `print`.
bool check_against_reference(const exec::TrainSpec& spec, const exec::RankResult& result,
                             Io& io, bool print) {
  auto reference = exec::train_reference(spec);
  if (!reference) {
    io.err << "fsdpsim: error: unsharded reference: " << reference.error().message() << "\n";
    return false;
  }
  const double loss_err = exec::max_relative_error(result.losses, reference->losses);
  const double weight_err = exec::max_relative_error(result.final_params, reference->final_params);
  const bool ok = loss_err <= kTolerance && weight_err <= kTolerance;
  if (print || !ok) {
    (ok ? io.out : io.err) << (ok ? "" : "fsdpsim: error: ") << "check (rank " << result.rank
                           << "): losses max relative error " << loss_err
                           << ", final weights max relative error " << weight_err
                           << " (tolerance " << kTolerance << "): "
                           << (ok ? "ok" : "MISMATCH") << "\n";
  }
  return ok;
}

int run_mpi(const exec::TrainSpec& spec, bool check, const std::string& trace,
            std::int64_t stall_rank, Io& io) {
  auto session = cpu::MpiSession::init();
  if (!session) {
    return report_error(io, session.error());
  }
  const bool root = (*session)->rank() == 0;
  auto setup = exec::prepare_training(spec);
  if (!setup) {
    return report_error(io, setup.error());
  }
  auto comms = cpu::make_mpi_communicators(**session, setup->config.mesh(), spec.timeout_s);
  if (!comms) {
    return report_error(io, comms.error());
  }
  if ((*session)->rank() == stall_rank) {
    // A rank that never joins: its peers' watchdogs must end the job within the timeout.
    std::this_thread::sleep_for(std::chrono::duration<double>(10.0 * spec.timeout_s));
  }
  int status = kExitOk;
  {
    cpu::CpuDevice device(str_cat("rank ", (*session)->rank()));
    auto result = exec::train_rank(*setup, spec, (*session)->rank(), device, **comms,
                                   [&](std::int64_t step, double loss) {
                                     if (root) {
                                       io.out << format_loss(step, loss) << std::endl;
                                     }
                                   });
    if (!result) {
      return report_error(io, result.error());
    }
    if (check && !check_against_reference(spec, *result, io, root)) {
      status = kExitInvalidInput;
    }
    if (root && !trace.empty()) {
      if (Status s = write_trace(trace, *setup, {&*result}); !s.ok()) {
        return report_error(io, s.error());
      }
    }
  }
  comms->reset();
  return status;
}

int run_in_process(const exec::TrainSpec& spec, bool check, const std::string& trace, Io& io) {
  auto setup = exec::prepare_training(spec);
  if (!setup) {
    return report_error(io, setup.error());
  }
  auto outcomes = cpu::run_ranks_in_process(*setup, spec, /*skip_rank=*/{},
                                            [&](std::int64_t step, double loss) {
                                              io.out << format_loss(step, loss) << std::endl;
                                            });
  std::vector<exec::RankResult> results;
  for (auto& o : outcomes) {
    if (!o) {
      return report_error(io, o.error());
    }
    results.push_back(std::move(*o));
  }
  if (!trace.empty()) {
    std::vector<const exec::RankResult*> ranks;
    for (const exec::RankResult& r : results) {
      ranks.push_back(&r);
    }
    if (Status s = write_trace(trace, *setup, ranks); !s.ok()) {
      return report_error(io, s.error());
    }
  }
  int status = kExitOk;
  if (check) {
    for (const exec::RankResult& r : results) {
      if (!check_against_reference(spec, r, io, r.rank == 0)) {
        status = kExitInvalidInput;
      }
    }
  }
  return status;
}

}  // namespace

int run_train_command(std::span<const std::string> args, Io& io) {
  po::options_description desc("options");
  TrainArgs a;
  exec::TrainSpec spec;
  spec.mesh = "dp=4";
  desc.add_options()
      ("backend", po::value(&a.backend)->default_value("cpu"), "cpu | cuda")
      ("mesh", po::value(&spec.mesh)->default_value("dp=4"),
       "device mesh, outermost axis first: dp=4 or outer=2,inner=2")
      ("strategy", po::value(&a.strategy)->default_value("zero3"),
       "noshard | zero1 | zero2 | zero3 | hsdp | hfsdp (hsdp/hfsdp need a 2-axis mesh)")
      ("shard-layout", po::value(&a.shard_layout)->default_value("padded"),
       "padded | unpadded (unpadded needs a 1-axis mesh)")
      ("tensor-atomic", po::bool_switch(&spec.tensor_atomic),
       "TensorAtomic placements with planned owners (zero1/2/3)")
      ("block", po::value(&spec.block_size)->default_value(1), "rows kept together (BlockAtomic)")
      ("microbatches", po::value(&spec.microbatches)->default_value(1),
       "microbatches accumulated per optimizer step")
      ("prefetch", po::value(&a.prefetch)->default_value("next(1)"),
       "both directions: none | next(K) | budget(ELEMENTS)")
      ("max-inflight-all-gathers", po::value(&a.max_inflight)->default_value(0),
       "cap on units holding gathered weights, 0 = unlimited")
      ("unified-streams", po::bool_switch(&a.unified_streams),
       "one stream for all-gathers and reduce-scatters")
      ("recompute", po::bool_switch(&spec.recompute), "activation recomputation in every unit")
      ("main-params", po::value(&a.main_params)->default_value("fp32"),
       "main weight dtype (real training needs fp32)")
      ("optimizer", po::value(&a.optimizer)->default_value("adam"), "sgd | sgd_momentum | adam")
      ("lr", po::value(&spec.hyper.lr)->default_value(1e-2), "learning rate")
      ("grad-scale", po::value(&spec.grad_scale)->default_value(1.0),
       "gradient multiplier after DP averaging")
      ("steps", po::value(&spec.steps)->default_value(20), "optimizer steps")
      ("seed", po::value(&spec.model.seed)->default_value(1), "parameter and data seed")
      ("layers", po::value(&spec.model.layers)->default_value(2), "decoder blocks")
      ("hidden", po::value(&spec.model.hidden)->default_value(32), "hidden size")
      ("ffn", po::value(&spec.model.ffn)->default_value(64), "feed-forward size")
      ("vocab", po::value(&spec.model.vocab)->default_value(64), "vocabulary size")
      ("seq-len", po::value(&spec.model.seq_len)->default_value(16), "tokens per sample")
      ("micro-batch-size", po::value(&spec.model.micro_batch_size)->default_value(2),
       "samples per microbatch per rank")
      ("timeout", po::value(&spec.timeout_s)->default_value(60.0),
       "seconds a collective may take before every rank stops with an error")
      ("check", po::bool_switch(&a.check),
       "compare with unsharded training; exit 1 on a mismatch")
      ("trace", po::value(&a.trace),
       "write the measured timeline as Chrome-trace JSON (the simulator's op names; under mpirun "
       "rank 0's)")
      ("inject-stall-rank", po::value(&a.stall_rank)->default_value(-1),
       "testing: under mpirun this rank never joins the first collective");
  po::variables_map vm;
  if (auto done = parse_command_line("train", kUsage, kDescription, desc, args, vm, io)) {
    return *done;
  }
  if (a.backend == "cuda") {
    return report_error(io, Error(ErrorCode::kUnavailable,
                                  "--backend cuda: the CUDA backend is not built in this binary"));
  }
  if (a.backend != "cpu") {
    return report_usage_error(io, "train",
                              str_cat("--backend is '", a.backend, "'; expected cpu or cuda"));
  }
  auto full = make_spec(a, spec);
  if (!full) {
    return report_error(io, full.error());
  }
  return cpu::launched_by_mpi() ? run_mpi(*full, a.check, a.trace, a.stall_rank, io)
                                : run_in_process(*full, a.check, a.trace, io);
}

}  // namespace fsdp::cli
