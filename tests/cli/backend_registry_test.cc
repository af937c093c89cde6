// SPDX-License-Identifier: Apache-2.0
// The backend registry: cpu is always there and first, cuda is always known (with a factory only
// in binaries built with CUDA), and a name that is unknown or not built is one line listing the
// available backends.
#include "cli/backend_registry.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fsdp::cli {
namespace {

TEST(BackendRegistryTest, CpuIsAlwaysBuiltAndListedFirst) {
  const std::vector<std::string> names = available_backends();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "cpu");
  EXPECT_EQ(backend_entries().front().name, "cpu");
  auto cpu = make_train_backend("cpu");
  ASSERT_TRUE(cpu.has_value()) << cpu.error().message();
  EXPECT_TRUE((*cpu)->check_usable().ok());
}

TEST(BackendRegistryTest, CudaIsKnownWhetherBuiltOrNot) {
  const BackendEntry* cuda = find_backend("cuda");
  ASSERT_NE(cuda, nullptr);
  EXPECT_TRUE(cuda->store_launch);
  EXPECT_FALSE(find_backend("cpu")->store_launch);
  const std::vector<std::string> names = available_backends();
  const bool built = cuda->make != nullptr;
  const std::vector<std::string> expected =
      built ? std::vector<std::string>{"cpu", "cuda"} : std::vector<std::string>{"cpu"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(available_backends_text(), built ? "cpu or cuda" : "cpu");
  auto made = make_train_backend("cuda");
  EXPECT_EQ(made.has_value(), built);
  if (!built) {
    EXPECT_EQ(made.error().code(), ErrorCode::kUnavailable);
    EXPECT_EQ(made.error().message(),
              "--backend cuda: the CUDA backend is not built in this binary (configure with "
              "-DFSDP_CUDA=ON on a machine with nvcc and NCCL); available: cpu");
  }
}

TEST(BackendRegistryTest, UnknownNameListsTheAvailableBackends) {
  EXPECT_EQ(find_backend("tpu"), nullptr);
  EXPECT_EQ(find_backend("CPU"), nullptr);  // exact names
  auto tpu = make_train_backend("tpu");
  ASSERT_FALSE(tpu.has_value());
  EXPECT_EQ(tpu.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(tpu.error().message(), "--backend is 'tpu'; expected " + available_backends_text());
}

}  // namespace
}  // namespace fsdp::cli
