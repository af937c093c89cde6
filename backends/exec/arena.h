// SPDX-License-Identifier: Apache-2.0
// Arena: the executor's allocator for transient buffers. Reuse is stream-ordered, as in a CUDA
// caching allocator: a released block carries the fence of its last use, and a new user on
// stream S may take it once the fence says it is safe on S (nothing to do on the releasing
// stream itself; another CUDA stream first enqueues a wait on the release event; the CPU device's
// frees already run in stream order). So no stream sees a block reused under it, and reuse never
// depends on when the host happens to look, which keeps reserved memory at the schedule's peak
// and deterministic (docs/design/backends.md, "CUDA backend"). Counts live bytes and the
// high-water mark per BufferClass and keeps a log of every allocation and release. Thread-safe
// (one mutex); owns every block it allocated.
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
  // Fills `bytes` at ptr with zeros, visible to every stream when it returns (resident buffers).
  virtual void zero(void* ptr, std::int64_t bytes) = 0;
  // Fills `bytes` at ptr with zeros in the order of `stream` (arena blocks handed to a user on
  // that stream); by default the same as zero().
  virtual void zero_on(void* ptr, std::int64_t bytes, StreamKind /*stream*/) { zero(ptr, bytes); }
};

// 64-byte aligned host memory (new/delete).
class HostMemory final : public MemoryResource {
 public:
  Expected<void*> allocate(std::int64_t bytes) override;
  void deallocate(void* ptr, std::int64_t bytes) override;
  void zero(void* ptr, std::int64_t bytes) override;
};

// Whether a released block may be used on stream `user`: true once that is safe in `user`'s
// order (a device may enqueue a wait on `user` to make it so), false when not yet. An empty fence
// is always safe.
using Fence = std::function<bool(StreamKind user)>;

// One line of the allocation log.
struct ArenaRecord {
  std::int64_t time_ns = 0;        // Arena clock (set_clock), 0 without one; see resolve_times
  StreamKind stream = StreamKind::kCompute;  // the allocating or releasing stream
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

  // A block of at least `bytes` (0 is allowed and returns a valid pointer) for a user on
  // `stream`, zeroed in that stream's order. Reuses the oldest cached block of the same size
  // whose fence allows `stream`, else asks the memory resource. Errors: bytes < 0
  // (kInvalidArgument); the resource's errors.
  Expected<void*> allocate(std::int64_t bytes, BufferClass cls, StreamKind stream,
                           std::int64_t step, std::int32_t op, std::int32_t buffer);
  // Releases a block from allocate() on `stream`; a later user may take it once `fence` allows
  // its stream. FSDP_CHECKs that ptr is live.
  void release(void* ptr, Fence fence, StreamKind stream, std::int64_t step, std::int32_t op,
               std::int32_t buffer);

  // Bytes live now and at most so far, per class and in total (the requested sizes).
  std::int64_t live_bytes(BufferClass cls) const;
  std::int64_t high_water(BufferClass cls) const;
  std::int64_t live_bytes_total() const;
  std::int64_t high_water_total() const;
  // Bytes obtained from the memory resource (live plus cached).
  std::int64_t reserved_bytes() const;
  std::vector<ArenaRecord> log() const;
  // A clock for the log's time stamps, called with the record's stream (e.g. the device's). A
  // device whose clock runs on the GPU may return a provisional stamp and turn it into
  // nanoseconds later with resolve_times.
  void set_clock(std::function<std::int64_t(StreamKind)> clock);
  // Replaces the time of every record since the last call by resolve(time) (the device's
  // provisional stamps, resolved once its streams are idle).
  void resolve_times(const std::function<std::int64_t(std::int64_t)>& resolve);

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
  std::size_t resolved_ = 0;       // log_[0, resolved_) has final times
  std::function<std::int64_t(StreamKind)> clock_;
};

}  // namespace fsdp::exec
