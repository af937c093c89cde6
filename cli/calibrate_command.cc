// SPDX-License-Identifier: Apache-2.0
// `fsdpsim calibrate --backend cpu`: measures this machine as the CPU backend uses it (compute at
// the train configuration's shapes, copy bandwidth, BLAS per matmul shape and, under mpirun, the
// backend's collectives on all ranks) and writes a hardware file the simulator reads; then prints
// what the simulator predicts for that configuration. With --predict FILE it only predicts.
// docs/design/fidelity.md.
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "backends/cpu/calibration.h"
#include "backends/cpu/mpi_comm.h"
#include "cli/command.h"
#include "cli/run_options.h"
#include "cli/subcommands.h"
#include "cli/train_options.h"
#include "core/base/strings.h"
#include "core/hardware/hardware_json.h"
#include "sim/engine/simulator.h"
#include "sim/report/sim_report.h"

namespace po = boost::program_options;

namespace fsdp::cli {
namespace {

constexpr std::string_view kUsage =
    "calibrate --backend cpu --out FILE [train options]   (under mpirun for collectives)\n"
    "         calibrate --predict FILE [train options]";

constexpr std::string_view kDescription =
    "Measures this machine as `fsdpsim train --backend cpu` uses it and writes a hardware file\n"
    "whose \"calibration\" section the simulator prefers to datasheet figures: effective\n"
    "FLOP/s of "
    "the decoder's forward, backward and recompute at the given configuration's shapes, the\n"
    "optimizer update, memory-copy bandwidth, sgemm per matmul shape and, under mpirun, the\n"
    "backend's all-gather, reduce-scatter and all-reduce time per message size on all ranks plus\n"
    "the slowdown of compute while collectives run. Every rank measures at once, as in training.\n"
    "Then prints the simulator's prediction for the configuration (step time, exposed\n"
    "communication); --predict FILE skips measuring and predicts with FILE.\n\n"
    "examples:\n"
    "  mpirun -np 4 fsdpsim calibrate --backend cpu --mesh dp=4 --layers 4 --hidden 256 --out "
    "cpu.json\n"
    "  fsdpsim calibrate --predict cpu.json --mesh dp=4 --layers 4 --hidden 256 --prefetch none\n"
    "  fsdpsim simulate --hardware cpu.json ...";

struct CalibrateArgs {
  std::string backend = "cpu";
  std::string out;
  std::string predict;
  std::string trace;  // the prediction's Chrome trace
  std::string name = "cpu";
  std::int64_t repeats = 3;
  std::int64_t iters = 5;
};

std::string ms(sim::SimDuration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", d.seconds() * 1e3);
  return buf;
}

// The simulator's step for `spec` on `hardware`, with the calibrated compute slowdown; its
// Chrome trace goes to `trace` unless empty.
int print_prediction(const exec::TrainSpec& spec, const Hardware& hardware,
                     const std::string& trace, Io& io) {
  auto setup = exec::prepare_training(spec);
  if (!setup) {
    return report_error(io, setup.error());
  }
  sim::SimOptions options;
  options.cost = sim::calibrated_cost_options(options.cost, hardware);
  options.record_trace = !trace.empty();
  auto result = sim::simulate(setup->schedule, hardware, options);
  if (!result) {
    return report_error(io, result.error().with_context("while simulating"));
  }
  // Rank 0's class: `fsdpsim train --trace` records rank 0 under mpirun.
  const sim::ClassResult* cls = &result->classes.front();
  for (const sim::ClassResult& c : result->classes) {
    if (c.representative_rank == 0) {
      cls = &c;
    }
  }
  io.out << "predicted step_time_ms " << ms(sim::SimDuration::ps(result->step_time.ps())) << "\n"
         << "predicted compute_ms " << ms(cls->compute) << "\n"
         << "predicted communication_ms " << ms(cls->communication) << "\n"
         << "predicted exposed_communication_ms " << ms(cls->exposed_communication) << "\n";
  if (!trace.empty()) {
    std::ofstream out(trace);
    out << sim::chrome_trace(*result, setup->schedule).dump() << "\n";
    if (!out) {
      return report_error(io, Error(ErrorCode::kUnavailable,
                                    str_cat("--trace: cannot write '", trace, "'")));
    }
  }
  return kExitOk;
}

int calibrate(const exec::TrainSpec& spec, const CalibrateArgs& a, Io& io) {
  const cpu::MpiSession* session = nullptr;
  if (cpu::launched_by_mpi()) {
    auto s = cpu::MpiSession::get();
    if (!s) {
      return report_error(io, s.error());
    }
    session = *s;
  }
  const bool root = session == nullptr || session->rank() == 0;
  cpu::CpuCalibrationOptions options;
  options.spec = spec;
  options.name = a.name;
  options.repeats = a.repeats;
  options.collective_iters = a.iters;
  auto hardware = cpu::calibrate_cpu(options, session, [&](const std::string& line) {
    io.out << line << std::endl;
  });
  if (!hardware) {
    return report_error(io, hardware.error());
  }
  if (!root) {
    return kExitOk;
  }
  std::ofstream out(a.out);
  out << hardware_to_json_text(*hardware) << "\n";
  if (!out) {
    return report_error(io, Error(ErrorCode::kUnavailable,
                                  str_cat("--out: cannot write '", a.out, "'")));
  }
  io.out << "wrote " << a.out << "\n";
  return print_prediction(spec, *hardware, a.trace, io);
}

}  // namespace

int run_calibrate_command(std::span<const std::string> args, Io& io) {
  po::options_description desc("options");
  CalibrateArgs a;
  TrainOptions train;
  desc.add_options()
      ("backend", po::value(&a.backend)->default_value(a.backend), "cpu (the only one measured)")
      ("out", po::value(&a.out), "write the hardware JSON file here")
      ("predict", po::value(&a.predict),
       "measure nothing: print the simulator's prediction of the configuration with this "
       "hardware file")
      ("trace", po::value(&a.trace),
       "write the prediction as a Chrome trace (for `fsdpsim compare` with a `train --trace`)")
      ("name", po::value(&a.name)->default_value(a.name), "the hardware's name in the file")
      ("repeats", po::value(&a.repeats)->default_value(a.repeats),
       "rounds of each compute measurement (the median is kept)")
      ("iters", po::value(&a.iters)->default_value(a.iters),
       "timed calls per collective and message size");
  add_train_options(desc, &train);
  po::variables_map vm;
  if (auto done = parse_command_line("calibrate", kUsage, kDescription, desc, args, vm, io)) {
    return *done;
  }
  if (a.backend != "cpu") {
    return report_usage_error(
        io, "calibrate", str_cat("--backend is '", a.backend, "'; expected cpu (only the CPU "
                                                              "backend can be measured)"));
  }
  if (a.out.empty() == a.predict.empty()) {
    return report_usage_error(io, "calibrate", "expected exactly one of --out and --predict");
  }
  auto spec = make_train_spec(train);
  if (!spec) {
    return report_error(io, spec.error());
  }
  if (!a.predict.empty()) {
    auto hardware = load_hardware_argument(a.predict);
    if (!hardware) {
      return report_error(io, hardware.error());
    }
    return print_prediction(*spec, *hardware, a.trace, io);
  }
  return calibrate(*spec, a, io);
}

}  // namespace fsdp::cli
