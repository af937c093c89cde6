// SPDX-License-Identifier: Apache-2.0
// `fsdpsim calibrate --backend cpu`: measures this machine as the CPU backend uses it (compute at
// the train configuration's shapes, copy bandwidth, BLAS per matmul shape and, under mpirun, the
// backend's collectives on all ranks) and writes a hardware file the simulator reads; then prints
// what the simulator predicts for that configuration. With --predict FILE it only predicts.
// docs/design/fidelity.md.
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cpu/calibration.h"
#include "backends/cpu/mpi_comm.h"
#include "cli/command.h"
#include "cli/launcher_verdict.h"
#include "cli/run_options.h"
#include "cli/subcommands.h"
#include "cli/trace_reader.h"
#include "cli/train_options.h"
#include "core/base/file_io.h"
#include "core/base/strings.h"
#include "core/hardware/calibration_fit.h"
#include "core/hardware/hardware_json.h"
#include "sim/engine/simulator.h"
#include "sim/report/sim_report.h"

namespace po = boost::program_options;

namespace fsdp::cli {
namespace {

constexpr std::string_view kUsage =
    "calibrate --backend cpu --out FILE [train options]   (under mpirun for collectives)\n"
    "         calibrate --predict FILE [train options]\n"
    "         calibrate --fit TRACE... --base FILE --out FILE [train options]";

constexpr std::string_view kDescription =
    "Measures this machine as `fsdpsim train --backend cpu` uses it and writes a hardware file\n"
    "whose \"calibration\" section the simulator prefers to datasheet figures: effective\n"
    "FLOP/s of "
    "the decoder's forward, backward and recompute at the given configuration's shapes, the\n"
    "optimizer update, memory-copy bandwidth, sgemm per matmul shape and, under mpirun, the\n"
    "backend's all-gather, reduce-scatter and all-reduce time per message size on all ranks plus\n"
    "the slowdown of compute while collectives run. Every rank measures at once, as in training.\n"
    "Then prints the simulator's prediction for the configuration (step time, exposed\n"
    "communication); --predict FILE skips measuring and predicts with FILE.\n"
    "--fit TRACE... measures nothing either: it takes the measured traces of a real run of the\n"
    "configuration (`fsdpsim train --trace 'run-{rank}.json'`, the steps after the first) and\n"
    "writes --base's hardware with the rates of the run: FLOP/s per compute kind and each\n"
    "collective's time per payload as they were in training, waits for slower peers included.\n\n"
    "examples:\n"
    "  mpirun -np 4 fsdpsim calibrate --backend cpu --mesh dp=4 --layers 4 --hidden 256 --out "
    "cpu.json\n"
    "  fsdpsim calibrate --predict cpu.json --mesh dp=4 --layers 4 --hidden 256 --prefetch none\n"
    "  fsdpsim calibrate --fit run-0.json run-1.json run-2.json run-3.json --base cpu.json \\\n"
    "      --out fitted.json --mesh dp=4 --layers 4 --hidden 256\n"
    "  fsdpsim simulate --hardware cpu.json ...";

struct CalibrateArgs {
  std::string backend = "cpu";
  std::string out;
  std::string predict;
  std::string trace;  // the prediction's Chrome trace
  std::vector<std::string> fit;  // measured traces to fit to
  std::string base;              // the hardware the fit starts from
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
  auto setup = exec::prepare_plan(spec);
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
    if (auto written =
            write_output_file(trace, sim::chrome_trace(*result, setup->schedule).dump() + "\n");
        !written) {
      return report_error(io, written.error().with_context("--trace"));
    }
  }
  return kExitOk;
}

// Writes `hardware` to --out, then prints the prediction with it.
int write_and_predict(const exec::TrainSpec& spec, const Hardware& hardware,
                      const CalibrateArgs& a, Io& io) {
  if (auto written = write_output_file(a.out, hardware_to_json_text(hardware) + "\n");
      !written) {
    return report_error(io, written.error().with_context("--out"));
  }
  io.out << "wrote " << a.out << "\n";
  return print_prediction(spec, hardware, a.trace, io);
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
  return write_and_predict(spec, *hardware, a, io);
}

// The op kind whose name is `name` ("forward", "all-gather", ...), or nullopt.
std::optional<OpKind> op_kind_named(const std::string& name) {
  for (int k = 0; k < kNumOpKinds; ++k) {
    if (to_string(static_cast<OpKind>(k)) == name) {
      return static_cast<OpKind>(k);
    }
  }
  return std::nullopt;
}

// The timed ops of the traces at `paths`, the first step left out when there are several;
// collectives' group sizes from `mesh` by axis name.
Expected<std::vector<MeasuredOp>> measured_ops(const std::vector<std::string>& paths,
                                               const DeviceMesh& mesh) {
  std::vector<MeasuredOp> ops;
  for (const std::string& path : paths) {
    FSDP_TRY(Trace trace, read_trace(path));
    const std::int64_t first = *trace.steps.begin();
    const bool skip_first = trace.steps.size() > 1;
    for (const auto& [key, t] : trace.ops) {
      if (skip_first && std::get<1>(key) == first) {
        continue;  // the first step warms up
      }
      const std::optional<OpKind> kind = op_kind_named(t.kind);
      if (!kind) {
        continue;
      }
      MeasuredOp op;
      op.kind = *kind;
      op.ns = static_cast<std::int64_t>(t.dur_us * 1e3 + 0.5);
      if (is_collective(*kind)) {
        const std::optional<std::int64_t> axis = mesh.axis_index(t.axis);
        if (!axis) {
          return Error(ErrorCode::kInvalidArgument,
                       str_cat("'", path, "': ", t.name, " runs on mesh axis '", t.axis,
                               "'; expected an axis of --mesh ", to_string(mesh)));
        }
        op.bytes = t.bytes;
        op.group_ranks = mesh.axis_size(*axis);
      } else {
        op.flops = std::max<std::int64_t>(t.flops, 0);
      }
      ops.push_back(op);
    }
  }
  return ops;
}

int fit(const exec::TrainSpec& spec, const CalibrateArgs& a, Io& io) {
  auto setup = exec::prepare_plan(spec);
  if (!setup) {
    return report_error(io, setup.error());
  }
  auto base = load_hardware_argument(a.base);
  if (!base) {
    return report_error(io, base.error());
  }
  auto ops = measured_ops(a.fit, setup->config.mesh());
  if (!ops) {
    return report_error(io, ops.error());
  }
  Calibration start;
  if (base->calibration() != nullptr) {
    start = *base->calibration();
  } else {
    start.ranks = setup->config.mesh().size();
    start.copy_bytes_per_s = base->hbm_bytes_per_s();
  }
  auto fitted = fit_calibration(
      start, *ops,
      str_cat("fsdpsim calibrate --fit: ", a.fit.size(), " trace(s), ", ops->size(),
              " measured ops; base ", a.base));
  if (!fitted) {
    return report_error(io, fitted.error().with_context("--fit"));
  }
  for (const ComputeRate& r : fitted->compute) {
    io.out << "  " << to_string(r.kind) << ": " << r.flops_per_s / 1'000'000 << " MFLOP/s, "
           << r.bytes_per_s / 1'000'000 << " MB/s\n";
  }
  for (const CollectiveCurve& c : fitted->collectives) {
    io.out << "  " << to_string(c.kind) << " on " << c.ranks << " ranks: " << c.points.size()
           << " payload(s), " << c.points.front().ns / 1000 << " us at " << c.points.front().bytes
           << " B .. " << c.points.back().ns / 1000 << " us at " << c.points.back().bytes
           << " B\n";
  }
  HardwareSpec hs = base->spec();
  hs.name = a.name;
  hs.calibration = std::move(*fitted);
  auto hardware = Hardware::make(std::move(hs));
  if (!hardware) {
    return report_error(io, hardware.error());
  }
  return write_and_predict(spec, *hardware, a, io);
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
      ("fit", po::value(&a.fit)->multitoken(),
       "measure nothing: fit the rates to these measured traces of the configuration (`fsdpsim "
       "train --trace`, one per rank or one of all ranks); needs --base and --out")
      ("base", po::value(&a.base),
       "with --fit: the hardware file or preset whose other figures the fitted file keeps")
      ("trace", po::value(&a.trace),
       "write the prediction as a Chrome trace (for `fsdpsim compare` with a `train --trace`)")
      ("name", po::value(&a.name)->default_value(a.name), "the hardware's name in the file")
      ("repeats", po::value(&a.repeats)->default_value(a.repeats),
       "rounds of each compute measurement (the median is kept)")
      ("iters", po::value(&a.iters)->default_value(a.iters),
       "timed calls per collective and message size");
  add_train_options(desc, &train);
  // Under mpirun every rank reaches the same verdict on the command line: rank 0 prints it, once
  // (cli/launcher_verdict.h).
  VerdictIo verdict(io);
  Io& say = verdict.io();
  const auto refused = [](int code) {
    return refuse_together(code);
  };
  po::variables_map vm;
  if (auto done = parse_command_line("calibrate", kUsage, kDescription, desc, args, vm, say)) {
    return refused(*done);
  }
  if (a.backend != "cpu") {
    return refused(report_usage_error(
        say, "calibrate", str_cat("--backend is '", a.backend, "'; expected cpu (only the CPU "
                                                              "backend can be measured)")));
  }
  if (a.out.empty() == a.predict.empty()) {
    return refused(
        report_usage_error(say, "calibrate", "expected exactly one of --out and --predict"));
  }
  if (a.fit.empty() != a.base.empty()) {
    return refused(report_usage_error(say, "calibrate", "--fit and --base go together"));
  }
  if (!a.fit.empty() && !a.predict.empty()) {
    return refused(report_usage_error(say, "calibrate",
                                      "--fit writes --out; it does not go with --predict"));
  }
  std::vector<FileArgument> inputs = {{"--predict", a.predict}, {"--base", a.base}};
  for (const std::string& t : a.fit) {
    inputs.push_back({"--fit", t});
  }
  if (auto out_refused =
          refuse_outputs_over_inputs(say, "calibrate", {{"--out", a.out}, {"--trace", a.trace}},
                                     inputs)) {
    return refused(*out_refused);
  }
  auto spec = make_train_spec(train);
  if (!spec) {
    return refused(report_error(say, spec.error()));
  }
  if (!a.predict.empty()) {
    auto hardware = load_hardware_argument(a.predict);
    if (!hardware) {
      return report_error(io, hardware.error());
    }
    return print_prediction(*spec, *hardware, a.trace, io);
  }
  if (!a.fit.empty()) {
    return fit(*spec, a, io);
  }
  return calibrate(*spec, a, io);
}

}  // namespace fsdp::cli
