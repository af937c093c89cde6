// SPDX-License-Identifier: Apache-2.0
// CudaDevice on a GPU: events order streams, the timeline covers every task, errors poison, the
// arena's reuse is stream-ordered, stale not-ready errors never fail a launch, and every stamp is
// on the device clock.
#include "backends/cuda/cuda_device.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "backends/cuda/cuda_kernels.h"
#include "tests/backends/cuda/cuda_test_util.h"

namespace fsdp::cuda {
namespace {

using testing::DeviceVector;
using testing::gate;

std::unique_ptr<CudaDevice> make_device() {
  auto d = CudaDevice::make(0, "rank 0");
  EXPECT_TRUE(d.has_value()) << d.error().message();
  return d.has_value() ? std::move(d).value() : nullptr;
}

TEST(CudaDeviceTest, WaitOrdersTheComputeStreamAfterTheAllGatherStream) {
  FSDP_SKIP_WITHOUT_GPU();
  auto dev = make_device();
  ASSERT_NE(dev, nullptr);
  const std::int64_t n = 1 << 20;
  DeviceVector<float> a(static_cast<std::size_t>(n));
  DeviceVector<float> b(static_cast<std::size_t>(n));
  std::atomic<bool> open{false};
  dev->reset_events(1);
  // The all-gather stream is held until the host opens the gate, then writes 2s and records;
  // the compute stream waits for the record before copying a into b.
  dev->submit(StreamKind::kAllGather, {}, [&]() -> Status {
    gate(dev->stream(StreamKind::kAllGather), &open);
    EXPECT_EQ(launch_fill(a.get(), n, 2.0F, dev->stream(StreamKind::kAllGather)), cudaSuccess);
    return ok_status();
  });
  dev->record(StreamKind::kAllGather, 0, {});
  dev->wait(StreamKind::kCompute, 0, {});
  dev->submit(StreamKind::kCompute, {}, [&]() -> Status {
    EXPECT_EQ(cudaMemcpyAsync(b.get(), a.get(), static_cast<std::size_t>(n) * 4,
                              cudaMemcpyDeviceToDevice, dev->stream(StreamKind::kCompute)),
              cudaSuccess);
    return ok_status();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(cudaStreamQuery(dev->stream(StreamKind::kCompute)), cudaErrorNotReady);
  open = true;
  ASSERT_TRUE(dev->synchronize().ok());
  const std::vector<float> got = b.download();
  EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float v) { return v == 2.0F; }));
}

TEST(CudaDeviceTest, TimelineHasEveryTaskRecordAndWait) {
  FSDP_SKIP_WITHOUT_GPU();
  auto dev = make_device();
  ASSERT_NE(dev, nullptr);
  dev->reset_events(1);
  for (std::int32_t op = 0; op < 3; ++op) {
    dev->submit(StreamKind::kCompute, exec::TaskTag{5, op}, [] { return ok_status(); });
  }
  dev->record(StreamKind::kCompute, 0, exec::TaskTag{5, 3});
  dev->wait(StreamKind::kReduceScatter, 0, exec::TaskTag{5, 4});
  ASSERT_TRUE(dev->synchronize().ok());
  const std::vector<exec::TaskTiming> t = dev->timeline();
  ASSERT_EQ(t.size(), 5U);
  for (std::size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i].tag.step, 5);
    EXPECT_EQ(t[i].tag.op, static_cast<std::int32_t>(i));
    EXPECT_LE(t[i].start_ns, t[i].end_ns);
    EXPECT_GE(t[i].start_ns, 0);
  }
  EXPECT_EQ(t[4].stream, StreamKind::kReduceScatter);
}

TEST(CudaDeviceTest, TaskErrorPoisonsAndWaitBeforeRecordIsAnError) {
  FSDP_SKIP_WITHOUT_GPU();
  auto dev = make_device();
  ASSERT_NE(dev, nullptr);
  dev->reset_events(2);
  bool ran_after = false;
  dev->submit(StreamKind::kCompute, {}, [] {
    return Status(Error(ErrorCode::kInternal, "boom"));
  });
  dev->submit(StreamKind::kCompute, {}, [&] {
    ran_after = true;
    return ok_status();
  });
  const Status s = dev->synchronize();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("boom"), std::string::npos);
  EXPECT_FALSE(ran_after);

  auto fresh = make_device();
  ASSERT_NE(fresh, nullptr);
  fresh->reset_events(2);
  fresh->wait(StreamKind::kCompute, 1, {});
  const Status w = fresh->synchronize();
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message().find("wait on event 1 issued before its record"),
            std::string::npos)
      << w.error().message();
}

// Stream-ordered reuse (issue 18, defect 6): a block released on the all-gather stream while its
// last use is still held up there is handed to a compute-stream user at once (no host wait, so
// reserved memory is the peak whatever the host saw), and that user's work runs only after the
// last use: its zeroing and its own write come after the 7s.
TEST(CudaArenaTest, ReuseAcrossStreamsWaitsOnTheReleaseEventNotOnTheHost) {
  FSDP_SKIP_WITHOUT_GPU();
  auto dev = make_device();
  ASSERT_NE(dev, nullptr);
  exec::Arena& arena = dev->arena();
  const std::int64_t bytes = 4 << 20;
  const std::int64_t n = bytes / 4;
  auto first = arena.allocate(bytes, BufferClass::kUnshardedWeights, StreamKind::kAllGather, 0, 0, 0);
  ASSERT_TRUE(first.has_value()) << first.error().message();
  std::atomic<bool> open{false};
  dev->submit(StreamKind::kAllGather, {}, [&]() -> Status {
    gate(dev->stream(StreamKind::kAllGather), &open);
    EXPECT_EQ(launch_fill(static_cast<float*>(*first), n, 7.0F,
                          dev->stream(StreamKind::kAllGather)),
              cudaSuccess);
    return ok_status();
  });
  arena.release(*first, dev->fence(StreamKind::kAllGather), StreamKind::kAllGather, 0, 1, 0);
  auto second = arena.allocate(bytes, BufferClass::kUnshardedWeights, StreamKind::kCompute, 0, 2, 1);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(*second, *first) << "stream-ordered reuse needs no host-visible completion";
  dev->submit(StreamKind::kCompute, {}, [&]() -> Status {
    EXPECT_EQ(launch_add(static_cast<float*>(*second), static_cast<float*>(*second), n,
                         dev->stream(StreamKind::kCompute)),
              cudaSuccess);  // 0 + 0 if the zeroing came after the 7s
    return ok_status();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  open = true;
  ASSERT_TRUE(dev->synchronize().ok());
  std::vector<float> host(static_cast<std::size_t>(n), -1.0F);
  ASSERT_EQ(cudaMemcpy(host.data(), *second, static_cast<std::size_t>(bytes),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](float v) { return v == 0.0F; }))
      << "the new user saw the old user's 7s";
  EXPECT_EQ(arena.reserved_bytes(), bytes);
}

// A not-ready query leaves cudaErrorNotReady as the thread's last error; the next task's launch
// must not report it as its own failure (issue 18, defect 1).
TEST(CudaDeviceTest, NotReadyQueryDoesNotFailTheNextLaunch) {
  FSDP_SKIP_WITHOUT_GPU();
  auto dev = make_device();
  ASSERT_NE(dev, nullptr);
  std::atomic<bool> open{false};
  dev->submit(StreamKind::kCompute, {}, [&]() -> Status {
    gate(dev->stream(StreamKind::kCompute), &open);
    return ok_status();
  });
  EXPECT_EQ(cudaStreamQuery(dev->stream(StreamKind::kCompute)), cudaErrorNotReady);
  DeviceVector<float> a(1024);
  dev->submit(StreamKind::kCompute, {}, [&]() -> Status {
    const cudaError_t e = launch_fill(a.get(), 1024, 1.0F, dev->stream(StreamKind::kCompute));
    if (e != cudaSuccess) {
      return Error(ErrorCode::kInternal, cudaGetErrorName(e));
    }
    return ok_status();
  });
  open = true;
  const Status s = dev->synchronize();
  EXPECT_TRUE(s.ok()) << s.error().message();
}

// Every time stamp is on the device clock in int64 nanoseconds, tasks and memory records alike,
// and stays ordered across synchronize calls (the epoch is re-anchored; issue 18, defect 7).
TEST(CudaDeviceTest, TaskAndMemoryStampsShareTheDeviceClock) {
  FSDP_SKIP_WITHOUT_GPU();
  auto dev = make_device();
  ASSERT_NE(dev, nullptr);
  exec::Arena& arena = dev->arena();
  for (std::int64_t step = 0; step < 2; ++step) {
    dev->submit(StreamKind::kCompute, exec::TaskTag{step, 0}, [&]() -> Status {
      auto p = arena.allocate(4096, BufferClass::kActivations, StreamKind::kCompute, step, 0, 0);
      if (!p) return p.error();
      arena.release(*p, dev->fence(StreamKind::kCompute), StreamKind::kCompute, step, 0, 0);
      return ok_status();
    });
    ASSERT_TRUE(dev->synchronize().ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const auto log = arena.log();
  const auto timeline = dev->timeline();
  ASSERT_EQ(log.size(), 4U);
  ASSERT_EQ(timeline.size(), 2U);
  for (std::size_t i = 0; i < log.size(); ++i) {
    EXPECT_GT(log[i].time_ns, 0) << "record " << i << " resolved";
    if (i > 0) {
      EXPECT_GE(log[i].time_ns, log[i - 1].time_ns);
    }
  }
  EXPECT_GE(timeline[1].start_ns, timeline[0].end_ns + 4'000'000) << "5 ms apart on one clock";
  EXPECT_GE(log[2].time_ns, timeline[0].end_ns);
}

}  // namespace
}  // namespace fsdp::cuda
