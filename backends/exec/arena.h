// SPDX-License-Identifier: Apache-2.0
// Arena: the executor's allocator for transient buffers. A released block goes back to the cache
// only once the fence of its last use has completed (a CUDA event, or nothing on the CPU device,
// whose frees already run in stream order), so no stream can see a block reused under it. Counts
// live bytes and the high-water mark per BufferClass and keeps a log of every allocation and
// release. Thread-safe (one mutex); owns every block it allocated.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "core/base/expected.h"
#include "core/schedule/op.h"

namespace fsdp::exec {

// Raw memory of a device: host memory, cudaMalloc, ... Never used concurrently by the arena.
class MemoryResource {
 public:
  virtual ~MemoryResource() = default;
  // Errors (kUnavailable): the device is out of memory, with the device's message.
  virtual Expected<void*> allocate(std::int64_t bytes) = 0;
  virtual void deallocate(void* ptr, std::int64_t bytes) = 0;
  // Fills `bytes` at ptr with zeros (called on blocks handed out by the arena).
  virtual void zero(void* ptr, std::int64_t bytes) = 0;
};

// 64-byte aligned host memory (new/delete).
class HostMemory final : public MemoryResource {
 public:
  Expected<void*> allocate(std::int64_t bytes) override;
  void deallocate(void* ptr, std::int64_t bytes) override;
  void zero(void* ptr, std::int64_t bytes) override;
};

// Whether the last use of a released block has completed. An empty fence is complete.
using Fence = std::function<bool()>;

// One line of the allocation log.
struct ArenaRecord {
  std::int64_t time_ns = 0;        // Arena clock (set_clock), 0 without one
  std::int64_t step = -1;          // the executor's tags
  std::int32_t op = -1;
  std::int32_t buffer = -1;
  BufferClass buffer_class = BufferClass::kUnshardedWeights;
  bool is_alloc = true;
  std::int64_t bytes = 0;
  std::int64_t live_bytes = 0;     // all classes, after this record
  friend bool operator==(const ArenaRecord&, const ArenaRecord&) = default;
};

class Arena {
 public:
  explicit Arena(MemoryResource* memory) : memory_(memory) {}
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // A zeroed block of at least `bytes` (0 is allowed and returns a valid pointer). Reuses a
  // cached block of the same size whose fence completed, else asks the memory resource. Errors:
  // bytes < 0 (kInvalidArgument); the resource's errors.
  Expected<void*> allocate(std::int64_t bytes, BufferClass cls, std::int64_t step,
                           std::int32_t op, std::int32_t buffer);
  // Releases a block from allocate(); it is reused only after `fence` completes. FSDP_CHECKs
  // that ptr is live.
  void release(void* ptr, Fence fence, std::int64_t step, std::int32_t op, std::int32_t buffer);

  // Bytes live now and at most so far, per class and in total (the requested sizes).
  std::int64_t live_bytes(BufferClass cls) const;
  std::int64_t high_water(BufferClass cls) const;
  std::int64_t live_bytes_total() const;
  std::int64_t high_water_total() const;
  // Bytes obtained from the memory resource (live plus cached).
  std::int64_t reserved_bytes() const;
  std::vector<ArenaRecord> log() const;
  // A clock for the log's time stamps (e.g. the device's).
  void set_clock(std::function<std::int64_t()> clock);

 private:
  struct Block {
    void* ptr = nullptr;
    std::int64_t bytes = 0;        // size obtained from the resource
    std::int64_t requested = 0;    // size asked for by the live user
    BufferClass cls = BufferClass::kUnshardedWeights;
    Fence fence;
  };
  MemoryResource* memory_;
  mutable std::mutex mu_;
  std::vector<Block> in_use_;
  std::vector<Block> cached_;      // released; reusable once the fence completes
  std::array<std::int64_t, kNumBufferClasses> live_by_class_{};
  std::array<std::int64_t, kNumBufferClasses> high_by_class_{};
  std::int64_t live_total_ = 0;
  std::int64_t high_total_ = 0;
  std::int64_t reserved_ = 0;
  std::vector<ArenaRecord> log_;
  std::function<std::int64_t()> clock_;
};

}  // namespace fsdp::exec
