// SPDX-License-Identifier: Apache-2.0
// The training backends of `fsdpsim train` (and whoever else runs the schedule for real), chosen
// by name through one registry: each entry maps a name to a factory of a TrainBackend, the
// device and communicators its ranks train on. "cpu" is always built; "cuda" has a factory only
// in binaries built with CUDA (the one build-time gate is in backend_registry.cc). Callers look a
// name up here and never test how the binary was built.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cpu/mpi_session.h"
#include "backends/exec/trainer.h"
#include "backends/store/store.h"
#include "core/base/expected.h"
#include "core/mesh/device_mesh.h"

namespace fsdp::cli {

// How one backend's ranks get a device and communicators, in the three launches of `train`.
class TrainBackend {
 public:
  virtual ~TrainBackend() = default;

  // OK when this machine can run the backend now (CUDA: a usable GPU); one-line error otherwise.
  // Checked before anything is prepared.
  virtual Status check_usable() const = 0;

  // Every rank of the setup's mesh as a thread of this process (no launcher). on_step is called
  // by rank 0 only. Every rank's outcome, in rank order.
  virtual std::vector<Expected<exec::RankResult>> run_in_process(
      const exec::TrainSetup& setup, const exec::TrainSpec& spec,
      const std::function<void(std::int64_t, double)>& on_step) const = 0;

  // This MPI process's device and communicators (mpirun started one process per mesh rank).
  virtual Expected<exec::RankEnv> mpi_rank_env(cpu::MpiSession& session, const DeviceMesh& mesh,
                                               double timeout_s) const = 0;

  // A process started without mpirun as `rank` of `mesh`, meeting its peers in `store` (only for
  // entries with store_launch; the default is an error saying the backend cannot).
  virtual Expected<exec::RankEnv> store_rank_env(const DeviceMesh& mesh, std::int64_t rank,
                                                 store::Store& store,
                                                 std::chrono::milliseconds timeout) const;
};

using TrainBackendFactory = std::unique_ptr<TrainBackend> (*)();

struct BackendEntry {
  std::string_view name;
  // Whether its ranks can bootstrap over a file or TCP store without mpirun (--rank,
  // --world-size, --store).
  bool store_launch = false;
  // nullptr: known, but not built into this binary; `not_built` says why and how to get it.
  TrainBackendFactory make = nullptr;
  std::string_view not_built;
};

// Every backend fsdpsim knows, built or not, cpu first.
std::span<const BackendEntry> backend_entries();
// The entry called `name` (exact), or nullptr.
const BackendEntry* find_backend(std::string_view name);
// The names of the backends built into this binary, in registry order ("cpu", "cuda").
std::vector<std::string> available_backends();
// "cpu or cuda" / "cpu": the available names as a message lists them.
std::string available_backends_text();

// The named backend. Errors, one line listing the available backends: an unknown name
// (kInvalidArgument, "--backend is 'tpu'; expected cpu or cuda"); a backend not built into this
// binary (kUnavailable, "--backend cuda: the CUDA backend is not built in this binary (...);
// available: cpu").
Expected<std::unique_ptr<TrainBackend>> make_train_backend(std::string_view name);

}  // namespace fsdp::cli
