// SPDX-License-Identifier: Apache-2.0
// CpuDevice: stream order, events across streams, errors that poison the device.
#include "backends/cpu/cpu_device.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace fsdp::cpu {
namespace {

TEST(CpuDeviceTest, WaitHoldsAStreamUntilTheRecordIsReached) {
  CpuDevice device("test");
  device.reset_events(1);
  std::vector<int> order;
  std::mutex mu;
  auto push = [&](int v) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(v);
  };
  // Compute: a slow task, then the record. All-gather: wait, then a task.
  device.submit(StreamKind::kCompute, {}, [&]() -> Status {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    push(1);
    return ok_status();
  });
  device.record(StreamKind::kCompute, 0, {});
  device.wait(StreamKind::kAllGather, 0, {});
  device.submit(StreamKind::kAllGather, {}, [&]() -> Status {
    push(2);
    return ok_status();
  });
  ASSERT_TRUE(device.synchronize().has_value());
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_EQ(device.timeline().size(), 4U);
}

TEST(CpuDeviceTest, AnErrorSkipsLaterTasksAndReleasesWaits) {
  CpuDevice device("test");
  device.reset_events(1);
  std::atomic<bool> ran{false};
  device.submit(StreamKind::kCompute, {}, []() -> Status {
    return Error(ErrorCode::kInternal, "boom");
  });
  device.record(StreamKind::kCompute, 0, {});
  device.wait(StreamKind::kReduceScatter, 0, {});
  device.submit(StreamKind::kReduceScatter, {}, [&]() -> Status {
    ran = true;
    return ok_status();
  });
  Status s = device.synchronize();
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().message(), "boom");
  EXPECT_FALSE(ran.load());
}

TEST(CpuDeviceTest, WaitBeforeRecordIsAnError) {
  CpuDevice device("rank 2");
  device.reset_events(2);
  device.wait(StreamKind::kCompute, 1, {});
  Status s = device.synchronize();
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.error().message().find("rank 2: wait on event 1 issued before its record"),
            std::string::npos);
}

}  // namespace
}  // namespace fsdp::cpu
