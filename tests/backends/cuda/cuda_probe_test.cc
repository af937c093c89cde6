// SPDX-License-Identifier: Apache-2.0
// What the CUDA backend does on any machine, GPU or not: the device probe, the one-line error of
// a device that cannot be made, vendor error messages, the NCCL runtime version and strategy
// choice, and the NCCL unique id (which needs no GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "backends/cpu/cpu_device.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_device.h"
#include "backends/cuda/cuda_error.h"
#include "backends/cuda/nccl_communicator.h"

namespace fsdp::cuda {
namespace {

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == std::string::npos; }

TEST(CudaProbeTest, DeviceCountAgreesWithTheRuntimeProbe) {
  const Expected<int> probe = probe_cuda_devices();
  if (probe.has_value()) {
    EXPECT_EQ(cuda_device_count(), *probe);
  } else {
    EXPECT_EQ(cuda_device_count(), 0) << probe.error().message();
    EXPECT_TRUE(one_line(probe.error().message()));
    EXPECT_NE(probe.error().message().find("cudaGetDeviceCount"), std::string::npos);
  }
}

TEST(CudaProbeTest, DeviceThatCannotBeMadeIsOneClearLine) {
  const int count = cuda_device_count();
  // Without a GPU every ordinal fails; with one, the first ordinal past the last does.
  const Expected<std::unique_ptr<exec::Device>> device = make_cuda_device(count, "rank 3");
  ASSERT_FALSE(device.has_value());
  const std::string& msg = device.error().message();
  EXPECT_EQ(device.error().code(), ErrorCode::kUnavailable);
  EXPECT_TRUE(one_line(msg)) << msg;
  EXPECT_NE(msg.find("rank 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find(count == 0 ? "no usable CUDA device" : "outside [0, "), std::string::npos)
      << msg;
}

TEST(CudaProbeTest, DecoderAndCommunicatorsRejectANonCudaDevice) {
  cpu::CpuDevice host("rank 0");
  const auto decoder = make_cuda_decoder(backend::DecoderConfig{}, 1, 0, 1, host);
  ASSERT_FALSE(decoder.has_value());
  EXPECT_EQ(decoder.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(decoder.error().message().find("needs a CUDA device; got 'rank 0'"),
            std::string::npos)
      << decoder.error().message();
}

TEST(CudaProbeTest, CheckUsableGivesTheTrainCommandsOneLine) {
  const Status s = check_cuda_usable();
  if (cuda_device_count() > 0) {
    EXPECT_TRUE(s.ok()) << s.error().message();
    return;
  }
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ErrorCode::kUnavailable);
  EXPECT_TRUE(one_line(s.error().message())) << s.error().message();
  EXPECT_EQ(s.error().message().rfind("backend cuda: no usable GPU (cudaGetDeviceCount: ", 0), 0U)
      << s.error().message();
}

TEST(CudaProbeTest, InProcessCudaTrainingWithoutAGpuFailsEveryRankCleanly) {
  if (cuda_device_count() > 0) {
    GTEST_SKIP() << "a GPU is visible (CudaTrainingTest covers this machine)";
  }
  exec::TrainSpec spec;
  spec.mesh = parse_device_mesh("dp=2").value();
  spec.steps = 1;
  const exec::TrainSetup setup = exec::prepare_training(spec).value();
  const auto outcomes = run_ranks_in_process_cuda(setup, spec, /*skip_rank=*/{}, /*on_step=*/{});
  ASSERT_EQ(outcomes.size(), 2U);
  for (const auto& o : outcomes) {
    ASSERT_FALSE(o.has_value());
    EXPECT_NE(o.error().message().find("backend cuda: no usable GPU"), std::string::npos)
        << o.error().message();
  }
}

TEST(CudaProbeTest, NcclRuntimeVersionPicksTheUnevenAllGatherStrategy) {
  const int version = nccl_runtime_version();
  EXPECT_GE(version, 22800) << "expected the NCCL 2.28+ this project builds against";
  EXPECT_EQ(resolve_uneven_all_gather(UnevenAllGather::kAuto, 22809), UnevenAllGather::kPadToMax);
  EXPECT_EQ(resolve_uneven_all_gather(UnevenAllGather::kAuto, 22902),
            UnevenAllGather::kGroupedBroadcast);
  EXPECT_EQ(resolve_uneven_all_gather(UnevenAllGather::kPadToMax, 23000),
            UnevenAllGather::kPadToMax);
  EXPECT_EQ(resolve_uneven_all_gather(UnevenAllGather::kGroupedBroadcast, 22809),
            UnevenAllGather::kGroupedBroadcast);
}

TEST(CudaProbeTest, NcclUniqueIdNeedsNoGpu) {
  const Expected<NcclId> id = make_nccl_id();
  ASSERT_TRUE(id.has_value()) << id.error().message();
  EXPECT_TRUE(std::any_of(id->bytes.begin(), id->bytes.end(), [](char c) { return c != 0; }));
}

TEST(CudaErrorTest, CudaErrorNamesCallSiteAndVendorString) {
  const Error e = cuda_error(cudaErrorInvalidValue, "cudaMemcpy(dst, src, n)",
                            "/x/backends/cuda/cuda_device.cc", 42);
  EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
  EXPECT_TRUE(one_line(e.message())) << e.message();
  EXPECT_NE(e.message().find("cudaMemcpy(dst, src, n) failed at backends/cuda/cuda_device.cc:42"),
            std::string::npos)
      << e.message();
  EXPECT_NE(e.message().find(cudaGetErrorString(cudaErrorInvalidValue)), std::string::npos)
      << e.message();
  EXPECT_NE(e.message().find("cudaErrorInvalidValue"), std::string::npos) << e.message();
}

TEST(CudaErrorTest, NcclErrorNamesCallAndVendorString) {
  const Error e = nccl_error(ncclInvalidArgument, nullptr, "ncclAllGather(...)", "f.cc", 7);
  EXPECT_TRUE(one_line(e.message())) << e.message();
  EXPECT_NE(e.message().find("ncclAllGather(...) failed at f.cc:7"), std::string::npos);
  EXPECT_NE(e.message().find(ncclGetErrorString(ncclInvalidArgument)), std::string::npos)
      << e.message();
}

}  // namespace
}  // namespace fsdp::cuda
