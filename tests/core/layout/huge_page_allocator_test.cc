// SPDX-License-Identifier: Apache-2.0
// internal::HugePageAllocator: blocks are usable and aligned (64 bytes when small, 2 MiB from
// 2 MiB up), zero-size requests work, std::vector runs on it across the size boundary, and released
// large blocks are cached per thread for the next request of the same rounded size, within bounds.
#include "core/layout/internal/huge_page_allocator.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace fsdp::internal {
namespace {

std::uintptr_t address(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

TEST(HugePageAllocatorTest, SmallBlocksAreUsableAndCacheLineAligned) {
  for (const std::size_t bytes :
       {std::size_t{1}, std::size_t{64}, std::size_t{4096}, kHugePageSize - 1}) {
    void* p = huge_page_allocate(bytes);
    ASSERT_NE(p, nullptr) << "bytes=" << bytes;
    EXPECT_EQ(address(p) % 64, 0U) << "bytes=" << bytes;
    std::memset(p, 0xAB, bytes);
    EXPECT_EQ(static_cast<unsigned char*>(p)[bytes - 1], 0xABU);
    huge_page_deallocate(p, bytes);
  }
}

TEST(HugePageAllocatorTest, LargeBlocksAreHugePageAligned) {
  for (const std::size_t bytes : {kHugePageSize, kHugePageSize + 1, 3 * kHugePageSize + 4096}) {
    void* p = huge_page_allocate(bytes);
    ASSERT_NE(p, nullptr) << "bytes=" << bytes;
    EXPECT_EQ(address(p) % kHugePageSize, 0U) << "bytes=" << bytes;
    auto* bytes_p = static_cast<unsigned char*>(p);
    std::memset(bytes_p, 0x5C, bytes);  // every byte is writable
    EXPECT_EQ(bytes_p[0], 0x5CU);
    EXPECT_EQ(bytes_p[bytes - 1], 0x5CU);
    huge_page_deallocate(p, bytes);
  }
}

TEST(HugePageAllocatorTest, ZeroSizeGivesDistinctReleasableBlocks) {
  HugePageAllocator<int> alloc;
  int* a = alloc.allocate(0);
  int* b = alloc.allocate(0);
  EXPECT_NE(a, nullptr);
  EXPECT_NE(b, nullptr);
  EXPECT_NE(a, b);
  alloc.deallocate(a, 0);
  alloc.deallocate(b, 0);
  HugePageVector<int> empty;
  EXPECT_TRUE(empty.empty());
  empty.shrink_to_fit();
}

TEST(HugePageAllocatorTest, VectorGrowsAcrossTheHugePageThreshold) {
  HugePageVector<std::uint64_t> v;
  const std::size_t n = 3 * kHugePageSize / sizeof(std::uint64_t) + 7;  // ends past a huge page
  for (std::size_t i = 0; i < n; ++i) {
    v.push_back(i * 3);
  }
  ASSERT_EQ(v.size(), n);
  EXPECT_EQ(address(v.data()) % kHugePageSize, 0U);
  for (std::size_t i = 0; i < n; i += 4099) {
    EXPECT_EQ(v[i], i * 3) << "i=" << i;
  }
  EXPECT_EQ(v.back(), (n - 1) * 3);
  HugePageVector<std::uint64_t> copy = v;
  EXPECT_EQ(copy, v);
  v = {};
  EXPECT_TRUE(v.empty());
  EXPECT_EQ(copy[n / 2], n / 2 * 3);
}

TEST(HugePageAllocatorTest, ServesOverAlignedElements) {
  struct alignas(64) Line {
    std::uint32_t v[16] = {};
  };
  HugePageVector<Line> small(3);
  EXPECT_EQ(address(small.data()) % 64, 0U);
  HugePageVector<Line> large(kHugePageSize / sizeof(Line) + 1);
  EXPECT_EQ(address(large.data()) % kHugePageSize, 0U);
  EXPECT_EQ(large.back().v[15], 0U);
}

TEST(HugePageAllocatorTest, InstancesCompareEqualAcrossTypes) {
  EXPECT_TRUE(HugePageAllocator<int>() == HugePageAllocator<double>());
  const HugePageAllocator<char> rebound{HugePageAllocator<int>()};
  EXPECT_TRUE(rebound == HugePageAllocator<char>());
}

TEST(HugePageAllocatorTest, AReleasedLargeBlockServesTheNextRequestOfItsRoundedSize) {
  release_huge_page_cache();
  const std::size_t bytes = 3 * kHugePageSize + 4096;  // rounds to 4 huge pages
  void* p = huge_page_allocate(bytes);
  std::memset(p, 0x11, bytes);
  huge_page_deallocate(p, bytes);
  EXPECT_EQ(huge_page_cache_bytes(), 4 * kHugePageSize);
  // Another rounded size is not served from it.
  void* other = huge_page_allocate(2 * kHugePageSize);
  EXPECT_NE(other, p);
  EXPECT_EQ(huge_page_cache_bytes(), 4 * kHugePageSize);
  void* q = huge_page_allocate(4 * kHugePageSize - 1);
  EXPECT_EQ(q, p);
  EXPECT_EQ(huge_page_cache_bytes(), 0U);
  std::memset(q, 0x22, 4 * kHugePageSize - 1);  // the whole rounded block is usable
  huge_page_deallocate(q, 4 * kHugePageSize - 1);
  huge_page_deallocate(other, 2 * kHugePageSize);
  EXPECT_EQ(huge_page_cache_bytes(), 6 * kHugePageSize);
  release_huge_page_cache();
  EXPECT_EQ(huge_page_cache_bytes(), 0U);
}

TEST(HugePageAllocatorTest, TheCacheKeepsAtMost32BlocksAndItsByteLimit) {
  release_huge_page_cache();
  std::vector<void*> blocks;
  for (int i = 0; i < 40; ++i) {
    blocks.push_back(huge_page_allocate(kHugePageSize));
  }
  for (void* p : blocks) {
    huge_page_deallocate(p, kHugePageSize);
  }
  EXPECT_EQ(huge_page_cache_bytes(), 32 * kHugePageSize);
  release_huge_page_cache();
  // A block above the byte limit is never kept.
  const std::size_t huge = kHugePageCacheBytes + kHugePageSize;
  void* big = huge_page_allocate(huge);
  huge_page_deallocate(big, huge);
  EXPECT_EQ(huge_page_cache_bytes(), 0U);
}

TEST(HugePageAllocatorTest, EachThreadHasItsOwnCache) {
  // A thread caches once it has made a large allocation.
  huge_page_deallocate(huge_page_allocate(kHugePageSize), kHugePageSize);
  release_huge_page_cache();
  std::size_t in_thread = 0;
  std::thread worker([&in_thread] {
    void* p = huge_page_allocate(kHugePageSize);
    huge_page_deallocate(p, kHugePageSize);
    in_thread = huge_page_cache_bytes();
    // The thread exits with a block cached: its exit frees it (LeakSanitizer checks in CI).
  });
  worker.join();
  EXPECT_EQ(in_thread, kHugePageSize);
  EXPECT_EQ(huge_page_cache_bytes(), 0U);
  // A block allocated on one thread may be released on another.
  void* p = nullptr;
  std::thread allocator([&p] { p = huge_page_allocate(kHugePageSize); });
  allocator.join();
  huge_page_deallocate(p, kHugePageSize);
  EXPECT_EQ(huge_page_cache_bytes(), kHugePageSize);
  release_huge_page_cache();
}

}  // namespace
}  // namespace fsdp::internal
