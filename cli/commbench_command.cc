// SPDX-License-Identifier: Apache-2.0
// `fsdpsim commbench`: under mpirun, the CPU backend's all-gather and reduce-scatter bus bandwidth
// per message size next to a plain MPI loop of the same size (backends/cpu/comm_bench.h).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/comm_bench.h"
#include "cli/command.h"
#include "cli/launcher_verdict.h"
#include "cli/list_argument.h"
#include "cli/subcommands.h"
#include "core/base/strings.h"

namespace po = boost::program_options;

namespace fsdp::cli {
namespace {

constexpr std::string_view kUsage =
    "commbench [--sizes LIST] [--iters N] [--repeats R]  (under mpirun)";

constexpr std::string_view kDescription =
    "Measures, per total message size, the bus bandwidth ((n-1)/n x bytes / time, as nccl-tests)\n"
    "of all-gather and reduce-scatter issued through the CPU backend (a device stream task\n"
    "calling the MPI communicator, as the executor does) next to a plain MPI_Allgatherv /\n"
    "MPI_Reduce_scatter loop of the same counts, and the wrapper's overhead: the median of\n"
    "R alternating blocks of N calls per side. Needs mpirun.\n\n"
    "example:\n"
    "  mpirun -np 4 fsdpsim commbench --sizes 1MiB,16MiB --iters 20";

}  // namespace

int run_commbench_command(std::span<const std::string> args, Io& io) {
  po::options_description desc("options");
  std::string sizes_text = "1MiB,16MiB";
  cpu::CommBenchOptions options;
  desc.add_options()
      ("sizes", po::value(&sizes_text)->default_value("1MiB,16MiB"),
       "total bytes per collective, comma-separated (KiB, MiB, GiB suffixes)")
      ("iters", po::value(&options.iters)->default_value(options.iters),
       "timed calls per block")
      ("repeats", po::value(&options.repeats)->default_value(options.repeats),
       "blocks per side, alternating backend and plain; the median block counts")
      ("timeout", po::value(&options.timeout_s)->default_value(options.timeout_s),
       "seconds a collective may take");
  // Every rank reaches the same verdict on the command line: rank 0 prints it, once
  // (cli/launcher_verdict.h).
  VerdictIo verdict(io);
  Io& say = verdict.io();
  const auto refused = [](int code) {
    return refuse_together(code);
  };
  po::variables_map vm;
  if (auto done = parse_command_line("commbench", kUsage, kDescription, desc, args, vm, say)) {
    return refused(*done);
  }
  auto sizes = parse_int_list(sizes_text, "--sizes", /*with_units=*/true, 1,
                              std::numeric_limits<std::int64_t>::max());
  if (!sizes) {
    return refused(report_error(say, sizes.error()));
  }
  if (Status s = cpu::check_bench_counts(options); !s.ok()) {
    return refused(report_error(say, s.error().with_context("commbench")));
  }
  if (!cpu::launched_by_mpi()) {
    return report_error(io, Error(ErrorCode::kFailedPrecondition,
                                  "commbench needs mpirun (e.g. mpirun -np 4 fsdpsim commbench)"));
  }
  auto session = cpu::MpiSession::get();
  if (!session) {
    return report_error(io, session.error());
  }
  options.total_bytes = std::move(*sizes);
  auto rows = cpu::bench_collectives(**session, options);
  if (!rows) {
    return report_error(io, rows.error());
  }
  if ((*session)->rank() == 0) {
    io.out << "ranks " << (*session)->size() << ", median of " << options.repeats
           << " blocks of " << options.iters << " calls per side\n";
    io.out << "kind            bytes      backend_ms  backend_GB/s  plain_ms  plain_GB/s  overhead\n";
    for (const cpu::CommBenchRow& r : *rows) {
      char line[160];
      std::snprintf(line, sizeof line, "%-14s %10lld  %10.3f  %12.3f  %8.3f  %10.3f  %+7.1f%%\n",
                    std::string(to_string(r.kind)).c_str(),
                    static_cast<long long>(r.total_bytes), r.backend_seconds * 1e3,
                    r.backend_busbw_gbps, r.plain_seconds * 1e3, r.plain_busbw_gbps,
                    (r.backend_seconds / r.plain_seconds - 1.0) * 100.0);
      io.out << line;
    }
  }
  return kExitOk;
}

}  // namespace fsdp::cli
