// SPDX-License-Identifier: Apache-2.0
// The MPI communicator's reduce-scatter in place (recv = send + this member's displacement, the
// executor's first step of a two-axis gradient reduction) and out of place give the same sums,
// with uneven counts and one member empty. Run under `mpirun -np 3` (tests/mpi/CMakeLists.txt);
// prints one line per failure and exits 1.
#include <cstdio>
#include <vector>

#include "backends/cpu/mpi_comm.h"
#include "backends/cpu/mpi_session.h"
#include "core/mesh/device_mesh.h"

int main() {
  using namespace fsdp;
  auto session = cpu::MpiSession::get();
  if (!session || (*session)->size() != 3) {
    std::fprintf(stderr, "mpi_comm_in_place_test: expected 3 MPI ranks\n");
    return 1;
  }
  const DeviceMesh mesh = parse_device_mesh("dp=3").value();
  auto comms = cpu::make_mpi_communicators(**session, mesh, /*timeout_s=*/60.0);
  if (!comms) {
    std::fprintf(stderr, "mpi_comm_in_place_test: %s\n", comms.error().message().c_str());
    return 1;
  }
  const auto r = static_cast<std::size_t>((*session)->rank());
  const std::vector<std::int64_t> counts = {2, 0, 3};
  const std::int64_t offsets[] = {0, 2, 2};
  const auto fill = [&](std::vector<float>& buf) {
    for (std::size_t j = 0; j < buf.size(); ++j) {
      buf[j] = static_cast<float>((r + 1) * 10 + j);
    }
  };
  int failures = 0;
  for (const bool in_place : {true, false}) {
    std::vector<float> buf(5);
    fill(buf);
    std::vector<float> separate(static_cast<std::size_t>(counts[r]));
    float* out = in_place ? buf.data() + offsets[r] : separate.data();
    const Status st = (*comms)->axis(0).reduce_scatter_v(StreamKind::kReduceScatter, DType::kFp32,
                                                         buf.data(), counts, out);
    if (!st.ok()) {
      std::printf("rank %zu: %s\n", r, st.error().message().c_str());
      return 1;
    }
    // Element x of the layout sums to (10 + 20 + 30) + 3x.
    for (std::int64_t j = 0; j < counts[r]; ++j) {
      const float want = 60.0F + 3.0F * static_cast<float>(offsets[r] + j);
      if (out[j] != want) {
        std::printf("rank %zu %s reduce-scatter: element %lld is %g; expected %g\n", r,
                    in_place ? "in-place" : "out-of-place", static_cast<long long>(offsets[r] + j),
                    static_cast<double>(out[j]), static_cast<double>(want));
        ++failures;
      }
    }
  }
  if (failures == 0) {
    std::printf("rank %zu: in-place and out-of-place reduce-scatter ok\n", r);
  }
  return failures == 0 ? 0 : 1;
}
