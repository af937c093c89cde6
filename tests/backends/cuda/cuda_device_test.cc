// SPDX-License-Identifier: Apache-2.0
// CudaDevice on a GPU: events order streams, the timeline covers every task, errors poison, and
// the arena reuses a released block only after its fence (the releasing stream) has passed it.
#include "backends/cuda/cuda_device.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "backends/cuda/cuda_kernels.h"
#include "tests/backends/cuda/cuda_test_util.h"

namespace fsdp::cuda {
namespace {

using testing::DeviceVector;

std::unique_ptr<CudaDevice> make_device() {
  auto d = CudaDevice::make(0, "rank 0");
  EXPECT_TRUE(d.has_value()) << d.error().message();
  return d.has_value() ? std::move(d).value() : nullptr;
}

// Blocks `stream` until *open becomes true (a host function spinning on the flag).
void gate(cudaStream_t stream, std::atomic<bool>* open) {
  ASSERT_EQ(cudaLaunchHostFunc(
                stream,
                [](void* flag) {
                  while (!static_cast<std::atomic<bool>*>(flag)->load()) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                  }
                },
                open),
            cudaSuccess);
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

TEST(CudaArenaTest, ReleasedBlockIsReusedOnlyAfterItsFence) {
  FSDP_SKIP_WITHOUT_GPU();
  auto dev = make_device();
  ASSERT_NE(dev, nullptr);
  exec::Arena& arena = dev->arena();
  const std::int64_t bytes = 4 << 20;
  auto first = arena.allocate(bytes, BufferClass::kUnshardedWeights, 0, 0, 0);
  ASSERT_TRUE(first.has_value()) << first.error().message();
  std::atomic<bool> open{false};
  // The last use of the block is held up on the all-gather stream.
  dev->submit(StreamKind::kAllGather, {}, [&]() -> Status {
    gate(dev->stream(StreamKind::kAllGather), &open);
    EXPECT_EQ(launch_fill(static_cast<float*>(*first), bytes / 4, 7.0F,
                          dev->stream(StreamKind::kAllGather)),
              cudaSuccess);
    return ok_status();
  });
  arena.release(*first, dev->fence(StreamKind::kAllGather), 0, 1, 0);
  // Opens the gate eventually even if an allocation below waits for the device.
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    open = true;
  });
  auto second = arena.allocate(bytes, BufferClass::kUnshardedWeights, 0, 2, 1);
  ASSERT_TRUE(second.has_value());
  EXPECT_NE(*second, *first) << "a block was reused before its fence completed";
  opener.join();
  ASSERT_TRUE(dev->synchronize().ok());
  auto third = arena.allocate(bytes, BufferClass::kUnshardedWeights, 0, 3, 2);
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(*third, *first) << "the fenced block should be reused once its fence completed";
  // Handed out zeroed although its last use wrote 7s.
  std::vector<float> host(static_cast<std::size_t>(bytes / 4), -1.0F);
  ASSERT_EQ(cudaMemcpy(host.data(), *third, static_cast<std::size_t>(bytes),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](float v) { return v == 0.0F; }));
  EXPECT_EQ(arena.reserved_bytes(), 2 * bytes);
  EXPECT_EQ(arena.high_water(BufferClass::kUnshardedWeights), 2 * bytes);
}

}  // namespace
}  // namespace fsdp::cuda
