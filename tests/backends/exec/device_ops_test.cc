// SPDX-License-Identifier: Apache-2.0
// The Device data-ops seam on the CPU device: resident buffers come zeroed from the device's
// memory, the ops do the executor's arithmetic (FSDP accumulation, backend::optimizer_update) bit
// for bit, stream-ordered inside tasks, and the device hands out its decoder.
#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "backends/exec/resident_buffer.h"
#include "backends/model/decoder.h"

namespace fsdp::exec {
namespace {

std::vector<float> ramp(std::int64_t n, float start, float step) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = start + step * static_cast<float>(i);
  }
  return v;
}

std::vector<float> download(Device& device, const ResidentBuffer& b) {
  std::vector<float> out(static_cast<std::size_t>(b.size()), -1.0F);
  EXPECT_TRUE(device.download(StreamKind::kCompute, out.data(), b.data(), b.size()).ok());
  return out;
}

TEST(ResidentBufferTest, ComesZeroedAndRejectsANegativeCount) {
  cpu::CpuDevice device("rank 0");
  auto b = ResidentBuffer::make(device.memory(), 37);
  ASSERT_TRUE(b.has_value()) << b.error().message();
  EXPECT_EQ(b->size(), 37);
  EXPECT_EQ(download(device, *b), std::vector<float>(37, 0.0F));
  auto empty = ResidentBuffer::make(device.memory(), 0);
  ASSERT_TRUE(empty.has_value());
  EXPECT_NE(empty->data(), nullptr);  // a pointer the executor may offset by 0
  auto bad = ResidentBuffer::make(device.memory(), -1);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message().find("-1 floats"), std::string::npos) << bad.error().message();
}

TEST(DeviceOpsTest, UploadCopyAndDownloadRoundTrip) {
  cpu::CpuDevice device("rank 0");
  const std::vector<float> host = ramp(10, 1.5F, 0.25F);
  ResidentBuffer a = ResidentBuffer::make(device.memory(), 10).value();
  ResidentBuffer b = ResidentBuffer::make(device.memory(), 10).value();
  ASSERT_TRUE(device.upload(StreamKind::kCompute, a.data(), host.data(), 10).ok());
  device.submit(StreamKind::kAllGather, TaskTag{}, [&]() -> Status {
    return device.copy(StreamKind::kAllGather, b.data() + 2, a.data(), 8);
  });
  ASSERT_TRUE(device.synchronize().ok());
  const std::vector<float> got = download(device, b);
  EXPECT_EQ(got[0], 0.0F);
  EXPECT_EQ(got[1], 0.0F);
  for (std::size_t i = 2; i < 10; ++i) {
    EXPECT_EQ(got[i], host[i - 2]) << i;
  }
}

TEST(DeviceOpsTest, AccumulateIsTheFsdpRuleInFp32) {
  cpu::CpuDevice device("rank 0");
  constexpr std::int64_t kN = 33;
  const float scale = 1.0F / 3.0F;
  const std::vector<float> x = ramp(kN, -2.0F, 0.37F);
  const std::vector<float> y = ramp(kN, 5.0F, -0.11F);
  ResidentBuffer src = ResidentBuffer::make(device.memory(), kN).value();
  ResidentBuffer dst = ResidentBuffer::make(device.memory(), kN).value();
  ASSERT_TRUE(device.upload(StreamKind::kCompute, src.data(), x.data(), kN).ok());
  device.submit(StreamKind::kReduceScatter, TaskTag{}, [&]() -> Status {
    return device.accumulate(StreamKind::kReduceScatter, dst.data(), src.data(), kN, scale,
                             /*overwrite=*/true);
  });
  ASSERT_TRUE(device.synchronize().ok());
  std::vector<float> expect(kN);
  for (std::size_t i = 0; i < expect.size(); ++i) {
    expect[i] = scale * x[i];
  }
  EXPECT_EQ(download(device, dst), expect);
  ASSERT_TRUE(device.upload(StreamKind::kCompute, src.data(), y.data(), kN).ok());
  device.submit(StreamKind::kReduceScatter, TaskTag{}, [&]() -> Status {
    return device.accumulate(StreamKind::kReduceScatter, dst.data(), src.data(), kN, scale,
                             /*overwrite=*/false);
  });
  ASSERT_TRUE(device.synchronize().ok());
  for (std::size_t i = 0; i < expect.size(); ++i) {
    expect[i] += scale * y[i];
  }
  EXPECT_EQ(download(device, dst), expect);
}

TEST(DeviceOpsTest, OptimizerUpdateMatchesTheHostUpdateBitForBit) {
  constexpr std::int64_t kN = 21;
  backend::OptimizerHyper hyper;
  hyper.lr = 0.03;
  for (OptimizerKind kind :
       {OptimizerKind::kSgd, OptimizerKind::kSgdMomentum, OptimizerKind::kAdam}) {
    cpu::CpuDevice device("rank 0");
    const std::int64_t states = backend::optimizer_num_states(kind);
    std::vector<float> w = ramp(kN, 0.5F, -0.04F);
    std::vector<float> st(static_cast<std::size_t>(states * kN), 0.0F);
    ResidentBuffer dw = ResidentBuffer::make(device.memory(), kN).value();
    ResidentBuffer dg = ResidentBuffer::make(device.memory(), kN).value();
    ResidentBuffer ds = ResidentBuffer::make(device.memory(), states * kN).value();
    ASSERT_TRUE(device.upload(StreamKind::kCompute, dw.data(), w.data(), kN).ok());
    for (std::int64_t step = 1; step <= 3; ++step) {
      const std::vector<float> g = ramp(kN, 0.1F * static_cast<float>(step), 0.013F);
      ASSERT_TRUE(device.upload(StreamKind::kCompute, dg.data(), g.data(), kN).ok());
      device.submit(StreamKind::kCompute, TaskTag{}, [&]() -> Status {
        return device.optimizer_update(StreamKind::kCompute, kind, hyper, step, dw.data(),
                                       dg.data(), ds.data(), kN);
      });
      ASSERT_TRUE(device.synchronize().ok());
      backend::optimizer_update(kind, hyper, step, std::span<float>(w), std::span<const float>(g),
                                std::span<float>(st));
    }
    EXPECT_EQ(download(device, dw), w) << to_string(kind);
    EXPECT_EQ(download(device, ds), st) << to_string(kind);
  }
}

TEST(DeviceOpsTest, TheCpuDeviceMakesTheHostDecoder) {
  cpu::CpuDevice device("rank 0");
  backend::DecoderConfig config;
  auto decoder = device.make_decoder(config, /*num_microbatches=*/1, /*data_rank=*/0,
                                     /*data_world=*/1);
  ASSERT_TRUE(decoder.has_value()) << decoder.error().message();
  EXPECT_TRUE((*decoder)->status().ok());
  auto bad = device.make_decoder(config, /*num_microbatches=*/0, 0, 1);
  EXPECT_FALSE(bad.has_value());
}

}  // namespace
}  // namespace fsdp::exec
