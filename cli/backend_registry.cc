// SPDX-License-Identifier: Apache-2.0
// The backend registry. The CUDA entry's factory exists only when fsdp::backend_cuda is linked
// (it defines FSDP_HAS_CUDA): this file is the one place in cli/ that tests it.
#include "cli/backend_registry.h"

#include <utility>

#include "backends/cpu/cpu_device.h"
#include "backends/cpu/in_process_training.h"
#include "backends/cpu/mpi_comm.h"
#include "core/base/strings.h"

namespace fsdp::cli {
namespace {

// CPU ranks: CpuDevice, MPI communicators under mpirun, in-process ones otherwise.
class CpuBackend final : public TrainBackend {
 public:
  Status check_usable() const override { return ok_status(); }

  std::vector<Expected<exec::RankResult>> run_in_process(
      const exec::TrainSetup& setup, const exec::TrainSpec& spec,
      const std::function<void(std::int64_t, double)>& on_step) const override {
    return cpu::run_ranks_in_process(setup, spec, /*skip_rank=*/{}, on_step);
  }

  Expected<exec::RankEnv> mpi_rank_env(cpu::MpiSession& session, const DeviceMesh& mesh,
                                       double timeout_s) const override {
    exec::RankEnv env;
    FSDP_TRY(env.comms, cpu::make_mpi_communicators(session, mesh, timeout_s));
    env.device = std::make_unique<cpu::CpuDevice>(str_cat("rank ", session.rank()));
    return env;
  }
};

std::unique_ptr<TrainBackend> make_cpu_backend() {
  return std::make_unique<CpuBackend>();
}

}  // namespace
}  // namespace fsdp::cli

// ---- the build-time gate: the CUDA backend's factory, or none --------------------------------
#if defined(FSDP_HAS_CUDA)
#include "backends/cuda/cuda_backend.h"

namespace fsdp::cli {
namespace {

// CudaDevice ranks: NCCL under mpirun or over a store, the device in-process communicators on
// GPU 0 otherwise.
class CudaBackend final : public TrainBackend {
 public:
  Status check_usable() const override { return cuda::check_cuda_usable(); }

  std::vector<Expected<exec::RankResult>> run_in_process(
      const exec::TrainSetup& setup, const exec::TrainSpec& spec,
      const std::function<void(std::int64_t, double)>& on_step) const override {
    return cuda::run_ranks_in_process_cuda(setup, spec, /*skip_rank=*/{}, on_step);
  }

  Expected<exec::RankEnv> mpi_rank_env(cpu::MpiSession& session, const DeviceMesh& mesh,
                                       double timeout_s) const override {
    return cuda::make_mpi_rank_env(
        mesh, session.rank(),
        std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000.0)));
  }

  Expected<exec::RankEnv> store_rank_env(const DeviceMesh& mesh, std::int64_t rank,
                                         store::Store& store,
                                         std::chrono::milliseconds timeout) const override {
    return cuda::make_store_rank_env(mesh, rank, store, timeout);
  }
};

std::unique_ptr<TrainBackend> make_cuda_backend() {
  return std::make_unique<CudaBackend>();
}
constexpr TrainBackendFactory kCudaFactory = &make_cuda_backend;

}  // namespace
}  // namespace fsdp::cli
#else
namespace fsdp::cli {
namespace {
constexpr TrainBackendFactory kCudaFactory = nullptr;
}  // namespace
}  // namespace fsdp::cli
#endif
// ---- end of the gate ----------------------------------------------------------------------------

namespace fsdp::cli {
namespace {

constexpr BackendEntry kBackends[] = {
    {.name = "cpu", .store_launch = false, .make = &make_cpu_backend, .not_built = ""},
    {.name = "cuda",
     .store_launch = true,
     .make = kCudaFactory,
     .not_built = "the CUDA backend is not built in this binary (configure with -DFSDP_CUDA=ON on "
                  "a machine with nvcc and NCCL)"},
};

}  // namespace

Expected<exec::RankEnv> TrainBackend::store_rank_env(const DeviceMesh& /*mesh*/,
                                                     std::int64_t /*rank*/, store::Store& /*store*/,
                                                     std::chrono::milliseconds /*timeout*/) const {
  return Error(ErrorCode::kFailedPrecondition,
               "this backend cannot bootstrap over a store; expected a launch by mpirun or none");
}

std::span<const BackendEntry> backend_entries() {
  return kBackends;
}

const BackendEntry* find_backend(std::string_view name) {
  for (const BackendEntry& e : kBackends) {
    if (e.name == name) {
      return &e;
    }
  }
  return nullptr;
}

std::vector<std::string> available_backends() {
  std::vector<std::string> names;
  for (const BackendEntry& e : kBackends) {
    if (e.make != nullptr) {
      names.emplace_back(e.name);
    }
  }
  return names;
}

std::string available_backends_text() {
  const std::vector<std::string> names = available_backends();
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i) {
    text += i == 0 ? "" : i + 1 == names.size() ? " or " : ", ";
    text += names[i];
  }
  return text;
}

Expected<std::unique_ptr<TrainBackend>> make_train_backend(std::string_view name) {
  const BackendEntry* entry = find_backend(name);
  if (entry == nullptr) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("--backend is '", name, "'; expected ", available_backends_text()));
  }
  if (entry->make == nullptr) {
    return Error(ErrorCode::kUnavailable, str_cat("--backend ", name, ": ", entry->not_built,
                                                  "; available: ", available_backends_text()));
  }
  return entry->make();
}

}  // namespace fsdp::cli
