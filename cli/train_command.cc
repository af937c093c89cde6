// SPDX-License-Identifier: Apache-2.0
// `fsdpsim train`: trains a decoder (backends/model/decoder.h: the small one or a Llama-family
// network from a hub config) for real by executing
// the schedule IR op for op (backends/exec). Under mpirun every MPI rank is one mesh rank (MPI
// communicators); otherwise the ranks are threads of this process (in-process communicators).
// --backend picks the device and communicators through the registry (cli/backend_registry.h):
// cpu, or cuda (CudaDevice; NCCL under mpirun or over a store, the device in-process
// communicators otherwise). Prints the loss per step; --check compares with the unsharded
// reference.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iomanip>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "backends/cpu/mpi_session.h"
#include "backends/exec/trainer.h"
#include "backends/store/rendezvous.h"
#include "cli/backend_registry.h"
#include "cli/command.h"
#include "cli/launcher_verdict.h"
#include "cli/store_launch.h"
#include "cli/subcommands.h"
#include "cli/train_options.h"
#include "core/base/file_io.h"
#include "core/base/number_text.h"
#include "core/base/strings.h"
#include "core/mesh/device_mesh.h"
#include "core/schedule/trace_events.h"

#include <nlohmann/json.hpp>

namespace po = boost::program_options;

namespace fsdp::cli {
namespace {

constexpr std::string_view kUsage =
    "train [--backend cpu|cuda] [--mesh AXES] [--steps N] [--save DIR [--save-every N]]\n"
    "       [--resume DIR] [options]";

constexpr std::string_view kDescription =
    "Trains a decoder on synthetic tokens by executing the schedule IR for real: the same ops,\n"
    "buffers and collectives `fsdpsim schedule` prints. --model names a Llama-family network (a\n"
    "preset or a hub config.json of model_type llama, mistral or qwen2: RMSNorm, causal grouped-\n"
    "query attention with RoPE, SwiGLU, the config's biases), shrunk by --layers, --hidden,\n"
    "--ffn, --heads, --kv-heads, --vocab and --seq-len; its tensors, FLOPs and activation bytes\n"
    "are those `fsdpsim model` shows for the config. Without --model: a small decoder\n"
    "(embedding, blocks of x + W2 gelu(W1 rmsnorm(x)), a head). Everything is fp32.\n\n"
    "Under mpirun each MPI rank is one mesh rank; without it the ranks run as threads of this\n"
    "process. Prints the loss of every step.\n"
    "--check compares losses and final weights with unsharded training (relative error <= 1e-5)\n"
    "and exits 1 on a mismatch. --backend cuda runs on GPUs (in-process ranks share GPU 0;\n"
    "under mpirun NCCL, rank r on GPU r mod count; without mpirun, --rank, --world-size and\n"
    "--store start one process per rank, NCCL bootstrapped over a file or TCP store).\n\n"
    "examples:\n"
    "  fsdpsim train --mesh dp=4 --steps 20\n"
    "  fsdpsim train --model llama-3-8b --layers 2 --hidden 256 --heads 4 --kv-heads 2 \\\n"
    "      --ffn 512 --vocab 512 --seq-len 64 --steps 50 --check\n"
    "  mpirun -np 4 fsdpsim train --backend cpu --mesh dp=4 --steps 20 --check\n"
    "  fsdpsim train --backend cuda --mesh dp=2 --steps 5 --check\n"
    "  fsdpsim train --backend cuda --mesh dp=2 --rank 0 --world-size 2 --store file:/tmp/r &\n"
    "  fsdpsim train --backend cuda --mesh dp=2 --rank 1 --world-size 2 --store file:/tmp/r\n"
    "  fsdpsim train --mesh outer=2,inner=2 --strategy hfsdp --microbatches 4 --check\n\n"
    "checkpoints (docs/cli.md, \"fsdpsim train\"): --save DIR writes DIR/step-N after every\n"
    "--save-every N steps and after the last step, and points DIR/latest at the newest; --resume\n"
    "DIR continues from DIR/latest (or from DIR/step-N when given that), on any mesh, strategy or\n"
    "layout: each rank reads the elements of its own shards from whichever files hold them.\n"
    "--steps counts all steps, so a checkpoint at step 5 resumed with --steps 10 runs 5 more.\n"
    "Keep --seed and the samples per step (ranks x microbatches x micro-batch size) unchanged.\n"
    "  fsdpsim train --mesh dp=4 --steps 5 --save ckpt\n"
    "  fsdpsim train --mesh dp=4 --steps 10 --resume ckpt --check\n"
    "  fsdpsim train --mesh dp=2 --shard-layout unpadded --microbatches 2 --grad-scale 0.5 \\\n"
    "      --steps 10 --resume ckpt/step-5\n"
    "  fsdpsim checkpoint inspect ckpt";

constexpr double kTolerance = 1e-5;

struct TrainArgs {
  std::string backend = "cpu";
  bool check = false;
  std::string trace;
  std::int64_t stall_rank = -1;  // fault injection for tests: this MPI rank never joins
};

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
  if (auto written = write_output_file(path, measured_trace(setup, ranks).dump() + "\n");
      !written) {
    return written.error().with_context("--trace");
  }
  return ok_status();
}

// `--trace` under mpirun: rank 0 writes PATH, unless PATH holds "{rank}"; then every rank writes
// PATH with its rank in place of each "{rank}" (one file per rank, e.g. for per-rank exposure).
constexpr std::string_view kRankPlaceholder = "{rank}";

std::string trace_path_of_rank(std::string path, std::int64_t rank) {
  const std::string r = std::to_string(rank);
  for (std::size_t at = path.find(kRankPlaceholder); at != std::string::npos;
       at = path.find(kRankPlaceholder, at + r.size())) {
    path.replace(at, kRankPlaceholder.size(), r);
  }
  return path;
}

// The loss line of each step with its wall time and throughput (the global batch's tokens over
// the step's time, as a training log shows them), and a summary at the end.
class StepPrinter {
 public:
  explicit StepPrinter(const exec::TrainSpec& spec)
      : tokens_per_step_(spec.mesh.size() / exec::tensor_parallel_size(spec.mesh) *
                         spec.microbatches * spec.model.micro_batch_size * spec.model.seq_len),
        last_(std::chrono::steady_clock::now()) {}

  std::string line(std::int64_t step, double loss) {
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    seconds_.push_back(seconds);
    std::ostringstream os;
    os << "step " << (step + 1) << " loss " << std::fixed << std::setprecision(6) << loss << " ("
       << significant_text(seconds * 1e3, 3) << " ms, "
       << significant_text(seconds > 0 ? static_cast<double>(tokens_per_step_) / seconds : 0.0, 3)
       << " tokens/s)";
    return os.str();
  }

  // "20 steps: median 41.2 ms per step, 3110 tokens/s (128 tokens per step)"; empty before any.
  std::string summary() const {
    if (seconds_.empty()) {
      return "";
    }
    std::vector<double> sorted = seconds_;
    std::sort(sorted.begin(), sorted.end());
    const std::size_t n = sorted.size();
    const double median = n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    return str_cat(n, " steps: median ", significant_text(median * 1e3, 3), " ms per step, ",
                   significant_text(median > 0 ? static_cast<double>(tokens_per_step_) / median : 0.0, 3),
                   " tokens/s (", tokens_per_step_, " tokens per step)");
  }

 private:
  std::int64_t tokens_per_step_;
  std::chrono::steady_clock::time_point last_;
  std::vector<double> seconds_;
};

// Compares one rank's result with the reference; prints the verdict when `print`.
bool check_against_reference(const exec::TrainSpec& spec, const exec::RankResult& result, Io& io,
                             bool print) {
  auto reference = exec::train_reference(spec);
  if (!reference) {
    io.err << "fsdpsim: error: unsharded reference: " << reference.error().message() << "\n";
    return false;
  }
  // A resumed run holds the losses from its first step on (the reference trains from step 0).
  const std::vector<double> ref_losses(
      reference->losses.begin() +
          std::min<std::ptrdiff_t>(result.first_step,
                                   static_cast<std::ptrdiff_t>(reference->losses.size())),
      reference->losses.end());
  const double loss_err = exec::max_relative_error(result.losses, ref_losses);
  const double weight_err = exec::max_relative_error(result.final_params, reference->final_params);
  const bool ok = loss_err <= kTolerance && weight_err <= kTolerance;
  if (print || !ok) {
    (ok ? io.out : io.err) << (ok ? "" : "fsdpsim: error: ") << "check (rank " << result.rank
                           << "): losses max relative error " << loss_err
                           << ", final weights max relative error " << weight_err << " (tolerance "
                           << kTolerance << "): " << (ok ? "ok" : "MISMATCH") << "\n";
  }
  return ok;
}

// Trains this process's rank `rank` (under mpirun or started with a store): rank 0 prints the
// losses, every rank checks against the reference when `check`, and the trace goes to rank 0's
// file (or every rank's, with {rank}). An exit status.
int train_one_rank(const exec::TrainSetup& setup, const exec::TrainSpec& spec, std::int64_t rank,
                   exec::RankEnv& env, bool check, const std::string& trace, Io& io) {
  const bool root = rank == 0;
  StepPrinter printer(spec);
  auto result = exec::train_rank(setup, spec, rank, *env.device, *env.comms,
                                 [&](std::int64_t step, double loss) {
                                   if (root) {
                                     io.out << printer.line(step, loss) << std::endl;
                                   }
                                 });
  if (!result) {
    return report_error(io, result.error());
  }
  if (root) {
    io.out << printer.summary() << "\n";
  }
  int status = kExitOk;
  if (check && !check_against_reference(spec, *result, io, root)) {
    status = kExitInvalidInput;
  }
  const bool every_rank = trace.find(kRankPlaceholder) != std::string::npos;
  if (!trace.empty() && (root || every_rank)) {
    if (Status s = write_trace(trace_path_of_rank(trace, rank), setup, {&*result}); !s.ok()) {
      return report_error(io, s.error());
    }
  }
  return status;
}

int run_mpi(const TrainBackend& backend, const exec::TrainSpec& spec, bool check,
            const std::string& trace, std::int64_t stall_rank, Io& io) {
  auto session = cpu::MpiSession::get();
  if (!session) {
    return report_error(io, session.error());
  }
  auto setup = exec::prepare_training(spec);
  if (!setup) {
    // The same verdict on every rank (the spec is the same): printed once.
    VerdictIo verdict(io);
    const int code = report_error(verdict.io(), setup.error());
    (void)(*session)->arrive("the check of the training setup", spec.timeout_s);
    return code;
  }
  auto env = backend.mpi_rank_env(**session, setup->config.mesh(), spec.timeout_s);
  if (!env) {
    return report_error(io, env.error());
  }
  if ((*session)->rank() == stall_rank) {
    // A rank that never joins: its peers' watchdogs must end the job within the timeout.
    std::this_thread::sleep_for(std::chrono::duration<double>(10.0 * spec.timeout_s));
  }
  // Every rank meets before the first collective, with the deadline, so a rank that never
  // starts is named by the others (issue 16, class 5) rather than each healthy rank's watchdog
  // naming only itself.
  if (Status s = (*session)->arrive("the start of training", spec.timeout_s); !s.ok()) {
    return report_error(io, s.error());
  }
  const int status = train_one_rank(*setup, spec, (*session)->rank(), *env, check, trace, io);
  env->device.reset();  // its stream workers may still be inside a collective
  env->comms.reset();
  return status;
}

// A process started without mpirun (--rank/--world-size/--store): the ranks meet in the store
// (a join barrier, so a rank that never starts is a timeout naming it rather than a hang in
// ncclCommInitRank), NCCL's unique ids travel through it, and at the end rank 0 waits until
// every rank is done with the store before clearing it (and, for tcp:, stopping to serve it).
// Otherwise as run_mpi: rank 0 prints, every rank checks.
int run_store(const TrainBackend& backend, const StoreLaunch& launch,
              const exec::TrainSpec& spec, bool check, const std::string& trace, Io& io) {
  auto setup = exec::prepare_training(spec);
  if (!setup) {
    return report_error(io, setup.error());
  }
  const auto timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(spec.timeout_s * 1000.0));
  auto store = store::make_store(launch.spec, launch.rank, launch.world, timeout);
  if (!store) {
    return report_error(io, store.error());
  }
  if (Status s = store::store_barrier(**store, "join", launch.rank, launch.world, timeout);
      !s.ok()) {
    return report_error(io, s.error());
  }
  auto env = backend.store_rank_env(setup->config.mesh(), launch.rank, **store, timeout);
  if (!env) {
    return report_error(io, env.error());
  }
  const int status = train_one_rank(*setup, spec, launch.rank, *env, check, trace, io);
  env->device.reset();
  env->comms.reset();
  if (Status s = store::finish_rendezvous(**store, launch.rank, launch.world, timeout); !s.ok()) {
    return report_error(io, s.error());
  }
  return status;
}

int run_in_process(const TrainBackend& backend, const exec::TrainSpec& spec, bool check,
                   const std::string& trace, Io& io) {
  auto setup = exec::prepare_training(spec);
  if (!setup) {
    return report_error(io, setup.error());
  }
  StepPrinter printer(spec);
  auto print = [&](std::int64_t step, double loss) {
    io.out << printer.line(step, loss) << std::endl;
  };
  std::vector<Expected<exec::RankResult>> outcomes = backend.run_in_process(*setup, spec, print);
  std::vector<exec::RankResult> results;
  if (const Error* e = exec::first_failure(outcomes)) {
    return report_error(io, *e);
  }
  io.out << printer.summary() << "\n";
  for (auto& o : outcomes) {
    results.push_back(std::move(*o));
  }
  if (!trace.empty()) {
    if (trace.find(kRankPlaceholder) != std::string::npos) {
      for (const exec::RankResult& r : results) {
        if (Status s = write_trace(trace_path_of_rank(trace, r.rank), *setup, {&r}); !s.ok()) {
          return report_error(io, s.error());
        }
      }
    } else {
      std::vector<const exec::RankResult*> ranks;
      for (const exec::RankResult& r : results) {
        ranks.push_back(&r);
      }
      if (Status s = write_trace(trace, *setup, ranks); !s.ok()) {
        return report_error(io, s.error());
      }
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
  TrainOptions train;
  // clang-format off
  desc.add_options()
      ("backend", po::value(&a.backend)->default_value("cpu"),
       "cpu | cuda (cuda: GPUs; needs a binary built with CUDA)");
  // clang-format on
  add_train_options(desc, &train);
  StoreLaunchArgs store_args;
  add_store_launch_options(desc, &store_args);
  // clang-format off
  desc.add_options()
      ("steps", po::value(&train.spec.steps)->default_value(20), "optimizer steps")
      ("check", po::bool_switch(&a.check),
       "compare with unsharded training; exit 1 on a mismatch")
      ("trace", po::value(&a.trace),
       "write the measured timeline as Chrome-trace JSON (the simulator's op names; under mpirun "
       "rank 0's; every rank's own file when PATH contains {rank})")
      ("save", po::value(&train.spec.checkpoint.save_dir),
       "save sharded checkpoints into DIR (DIR/step-N, DIR/latest)")
      ("save-every", po::value(&train.spec.checkpoint.save_every)->default_value(0),
       "with --save: also after every N steps (0: only after the last step)")
      ("resume", po::value(&train.spec.checkpoint.resume_from),
       "continue from a checkpoint: DIR (its latest step) or DIR/step-N; --steps is the total")
      ("inject-stall-rank", po::value(&a.stall_rank)->default_value(-1),
       "testing: under mpirun this rank never joins the first collective");
  // clang-format on
  // Every rank under mpirun parses the same command line and validates the same options, so
  // every rank reaches the same verdict: rank 0 prints it, once (cli/launcher_verdict.h).
  VerdictIo verdict(io);
  Io& say = verdict.io();
  const auto refused = [](int code) {
    return refuse_together(code);
  };
  po::variables_map vm;
  if (auto done = parse_command_line("train", kUsage, kDescription, desc, args, vm, say)) {
    return refused(*done);
  }
  // The options as typed values (errors name the option), then rank, world size and store
  // (flags or FSDP_* variables), then the backend: all before any GPU probe or store.
  if (train.spec.checkpoint.save_every != 0 && train.spec.checkpoint.save_dir.empty()) {
    return refused(report_usage_error(say, "train", "--save-every needs --save DIR"));
  }
  if (train.spec.checkpoint.save_every < 0) {
    return refused(report_usage_error(
        say, "train",
        str_cat("--save-every is ", train.spec.checkpoint.save_every, "; expected >= 0")));
  }
  auto full = make_train_spec(train);
  if (!full) {
    return refused(report_error(say, full.error()));
  }
  auto launch =
      resolve_store_launch(store_args, a.backend, full->mesh.size(), cpu::launched_by_mpi());
  if (!launch) {
    return refused(report_usage_error(say, "train", launch.error().message()));
  }
  auto backend = make_train_backend(a.backend);
  if (!backend) {
    return refused(backend.error().code() == ErrorCode::kInvalidArgument
                       ? report_usage_error(say, "train", backend.error().message())
                       : report_error(say, backend.error()));
  }
  if (Status s = (*backend)->check_usable(); !s.ok()) {
    return refused(report_error(say, s.error()));
  }
  const bool one_rank_here = *launch || cpu::launched_by_mpi();
  if (Status s = check_train_memory(*full, one_rank_here ? 1 : full->mesh.size(), a.check);
      !s.ok()) {
    return refused(report_error(say, s.error()));
  }
  if (*launch) {
    return run_store(**backend, **launch, *full, a.check, a.trace, io);
  }
  return cpu::launched_by_mpi()
             ? run_mpi(**backend, *full, a.check, a.trace, a.stall_rank, io)
             : run_in_process(**backend, *full, a.check, a.trace, io);
}

}  // namespace fsdp::cli
